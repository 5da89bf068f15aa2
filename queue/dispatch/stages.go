package dispatch

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cortexq/cortexq/queue"
)

// newStageHistogram makes cortexq_stage_seconds: the stages of the attempts this replica's
// claims accepted, per service and stage (docs/stages.md#metrics). Its labels are bounded by the
// services and the nine stages; the wait in TODO, dated at the claim in the database, is not in
// it (cortexq_oldest_todo_age_seconds watches that wait).
func newStageHistogram() *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "cortexq_stage_seconds",
		Help:    "Stage times of the attempts this replica's claims accepted, by service and stage (docs/stages.md).",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 10), // 1 ms to 262 s
	}, []string{"service", "stage"})
}

// observeStages adds an accepted item's stages to cortexq_stage_seconds, its claim and the wait
// for it together as claim, ending now (the claim has committed).
func (m *metrics) observeStages(it *item) {
	st := it.result.Stages
	if st == nil {
		return
	}
	for s := queue.StageReserved; s < queue.NumStages; s++ {
		d := st[s]
		switch {
		case s == queue.StageClaimWait:
			continue
		case s == queue.StageClaim && !it.queued.IsZero():
			d = time.Since(it.queued)
		}
		if d >= 0 {
			m.stageSeconds.WithLabelValues(it.service, s.String()).Observe(d.Seconds())
		}
	}
}
