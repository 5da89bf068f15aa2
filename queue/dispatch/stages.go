package dispatch

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cortexq/cortexq/queue"
)

// stageRecording is "off" in a build made to measure what recording the stages costs (the
// bench's baseline, docs/stages.md#cost): go build -ldflags
// "-X github.com/cortexq/cortexq/queue/dispatch.stageRecording=off". Any other value records.
var stageRecording = "on"

// recordStages is whether this build records stages (stageRecording).
var recordStages = stageRecording != "off"

// stageObservers are cortexq_stage_seconds' series of each service, by stage, looked up once
// (a lookup by label values costs more than the observation).
type stageObservers struct {
	vec *prometheus.HistogramVec
	m   sync.Map // service name → *[queue.NumStages]prometheus.Observer
}

// of returns service's series.
func (o *stageObservers) of(service string) *[queue.NumStages]prometheus.Observer {
	if v, ok := o.m.Load(service); ok {
		return v.(*[queue.NumStages]prometheus.Observer)
	}
	obs := &[queue.NumStages]prometheus.Observer{}
	for s := queue.StageReserved; s < queue.NumStages; s++ {
		if s != queue.StageClaimWait {
			obs[s] = o.vec.WithLabelValues(service, s.String())
		}
	}
	v, _ := o.m.LoadOrStore(service, obs)
	return v.(*[queue.NumStages]prometheus.Observer)
}

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
	obs := m.stages.of(it.service)
	for s := queue.StageReserved; s < queue.NumStages; s++ {
		d := st[s]
		switch {
		case s == queue.StageClaimWait:
			continue
		case s == queue.StageClaim && !it.queued.IsZero():
			d = time.Since(it.queued)
		}
		if d >= 0 {
			obs[s].Observe(d.Seconds())
		}
	}
}
