package dispatch

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are a replica's dispatch counters, exported to Prometheus.
type metrics struct {
	leases         prometheus.Counter
	returns        prometheus.Counter
	mocks          *prometheus.CounterVec
	claims         *prometheus.CounterVec
	results        *prometheus.CounterVec
	discards       *prometheus.CounterVec
	publishFails   prometheus.Counter
	writeErrors    prometheus.Counter
	unreadable     prometheus.Counter
	unusable       *prometheus.CounterVec
	reserveBatch   prometheus.Histogram
	attributeBatch prometheus.Histogram
	claimBatch     prometheus.Histogram
	leaseSeconds   prometheus.Histogram
	attrSeconds    prometheus.Histogram
	// reservationsLost counts reservations taken back while in stock (paused, rerun, deleted,
	// expired); attributionsSkipped hand-outs whose row had moved on when their attribution ran;
	// attributedAtClaim replies whose attempt a claim recorded (the hand-out not yet attributed).
	reservationsLost    prometheus.Counter
	attributionsSkipped prometheus.Counter
	attributedAtClaim   prometheus.Counter
	claimSeconds        prometheus.Histogram
	dbErrors            *prometheus.CounterVec
	fdsOpen             prometheus.Gauge
	fdsLimit            prometheus.Gauge
	stages              *stageObservers // cortexq_stage_seconds
}

// identityTables are the per-identity tables cortexq_identity_entries reports (Server.identityEntries).
var identityTables = []string{"waiting", "asking", "asking_key", "capped", "hot_workers", "hot_keys", "budgets"}

func newMetrics(reg prometheus.Registerer, inFlight, parsedBytes, stocked func() float64, identities func() map[string]int) *metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	sizes := prometheus.ExponentialBuckets(1, 2, 10)
	secs := prometheus.ExponentialBuckets(0.0005, 2, 14)
	m := &metrics{
		leases:  prometheus.NewCounter(prometheus.CounterOpts{Name: "cortexq_leases_total", Help: "Tasks leased to workers."}),
		returns: prometheus.NewCounter(prometheus.CounterOpts{Name: "cortexq_lease_returns_total", Help: "Reserved tasks given back unhanded (the replica stopped, the stock was too old or no longer asked for), no attempt counted."}),
		mocks:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cortexq_mock_replies_total", Help: "No-work replies, by reason."}, []string{"reason"}),
		claims:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cortexq_claims_total", Help: "Worker replies decided, by outcome."}, []string{"outcome"}),
		results: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cortexq_results_total",
			Help: "Results recorded by this replica's claims (a worker's verdict, or the stand-in Fatal of a retryable cause on its last attempt), by service and the task's status (docs/monitoring.md)."},
			[]string{"service", "status"}),
		discards:            prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cortexq_discards_total", Help: "Messages dropped before any claim, by reason."}, []string{"socket", "reason"}),
		publishFails:        prometheus.NewCounter(prometheus.CounterOpts{Name: "cortexq_publish_errors_total", Help: "Result archives that could not be published (the earlier state stands)."}),
		writeErrors:         prometheus.NewCounter(prometheus.CounterOpts{Name: "cortexq_result_write_errors_total", Help: "Result archives that could not be written (the task stays for a retry)."}),
		unreadable:          prometheus.NewCounter(prometheus.CounterOpts{Name: "cortexq_unreadable_entries_total", Help: "Leased entries whose source archive could not be opened."}),
		unusable:            prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cortexq_results_unusable_total", Help: "Results that are no usable archive (empty, unreadable, or no result path), left to the reaper to retry, by reason."}, []string{"reason"}),
		reserveBatch:        prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cortexq_reserve_batch_size", Help: "Tasks reserved per reservation transaction.", Buckets: sizes}),
		attributeBatch:      prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cortexq_attribute_batch_size", Help: "Hand-outs attributed per attribution statement.", Buckets: sizes}),
		attrSeconds:         prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cortexq_attribute_seconds", Help: "Attribution statement latency.", Buckets: secs}),
		reservationsLost:    prometheus.NewCounter(prometheus.CounterOpts{Name: "cortexq_reservations_lost_total", Help: "Reserved tasks dropped from the stock unhanded because their reservation was taken back (pause, rerun, delete, deadline)."}),
		attributionsSkipped: prometheus.NewCounter(prometheus.CounterOpts{Name: "cortexq_attributions_skipped_total", Help: "Hand-outs that needed no attribution statement, or whose reservation had moved on when it ran (a claim recorded the attempt first, or the reservation was taken back)."}),
		attributedAtClaim:   prometheus.NewCounter(prometheus.CounterOpts{Name: "cortexq_attributed_at_claim_total", Help: "Replies for reserved tasks whose attempt the claim recorded: the hand-out's attribution had not committed (a result back within 100 ms, or its replica died)."}),
		claimBatch:          prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cortexq_claim_batch_size", Help: "Replies decided per claim transaction.", Buckets: sizes}),
		leaseSeconds:        prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cortexq_reserve_seconds", Help: "Reservation transaction latency.", Buckets: secs}),
		claimSeconds:        prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cortexq_claim_seconds", Help: "Claim transaction latency.", Buckets: secs}),
		dbErrors:            prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cortexq_db_errors_total", Help: "Failed database transactions, by operation."}, []string{"op"}),
		fdsOpen:             prometheus.NewGauge(prometheus.GaugeOpts{Name: "cortexq_open_fds", Help: "File descriptors the replica has open (counted every 2 s; it warns past 80% of the limit)."}),
		fdsLimit:            prometheus.NewGauge(prometheus.GaugeOpts{Name: "cortexq_max_fds", Help: "The replica's file descriptor limit (soft RLIMIT_NOFILE)."}),
	}
	collectors := []prometheus.Collector{m.leases, m.returns, m.mocks, m.claims, m.results, m.discards, m.publishFails,
		m.writeErrors, m.unreadable, m.unusable, m.reserveBatch, m.attributeBatch, m.claimBatch, m.leaseSeconds, m.attrSeconds,
		m.reservationsLost, m.attributionsSkipped, m.attributedAtClaim, m.claimSeconds, m.dbErrors, m.fdsOpen, m.fdsLimit,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cortexq_in_flight", Help: "Tasks this replica has in flight."}, inFlight),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cortexq_reserved", Help: "Tasks this replica holds reserved, not yet handed out (its stock)."}, stocked),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cortexq_parsed_report_bytes", Help: "Memory of the parsed reports not yet claimed (their messages), within the sink's budget for them."}, parsedBytes)}
	for _, table := range identityTables {
		collectors = append(collectors, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cortexq_identity_entries",
			Help:        "Entries of a table kept per worker identity or peer: requests waiting, asking per worker and key, requests held at a cap, workers and keys holding unanswered leases, bogus-input budgets.",
			ConstLabels: prometheus.Labels{"table": table}}, func() float64 { return float64(identities()[table]) }))
	}
	m.stages = &stageObservers{vec: newStageHistogram()}
	collectors = append(collectors, m.stages.vec)
	for _, c := range collectors {
		_ = reg.Register(c) // a second server in one process keeps the first one's collectors
	}
	return m
}
