package main

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/cortexq/cortexq/queue/catalog"
	"github.com/cortexq/cortexq/queue/inspect"
)

// The metrics that answer an operator's questions about the cluster (docs/monitoring.md): read
// from the database at scrape time by the elected leader alone, so that a sum over the replicas
// counts each task once and a replica that lost the leadership exports nothing stale.

var (
	descLeader = prometheus.NewDesc("cortexq_leader",
		"1 on the replica whose River client holds the leadership (it runs the reaper and the report fold, and exports the cluster's gauges), else 0.", nil, nil)
	descTasks = prometheus.NewDesc("cortexq_tasks",
		"Tasks per corpus, service and status (todo, dispatched, no_problem, warning, error, fatal, invalid, blocked), from the task_totals ledger: exact. Exported by the leader only.",
		[]string{"corpus", "service", "status"}, nil)
	descOldestTodo = prometheus.NewDesc("cortexq_oldest_todo_age_seconds",
		"How long the oldest TODO task of a corpus and service has waited since it was imported, rerun or resumed (0 with none waiting). Exported by the leader only.",
		[]string{"corpus", "service"}, nil)
	descWorkersActive = prometheus.NewDesc("cortexq_workers_active",
		"Workers of a service that asked for work or answered in the last minute (the dashboard's count). Exported by the leader only.",
		[]string{"service"}, nil)
	descFoldAge = prometheus.NewDesc("cortexq_report_fold_age_seconds",
		"Time since the report rollups were last folded (absent before the first fold). Exported by the leader only.", nil, nil)
	descFoldPending = prometheus.NewDesc("cortexq_report_changes_pending",
		"Noted task changes waiting for the next report fold (counted up to 100000). Exported by the leader only.", nil, nil)
)

// leaderCollector exports cortexq_leader on every replica, and the cluster's gauges on the one
// that is the leader (inspect.Reader.Monitor): a handful of small reads a scrape
// (docs/monitoring.md#cost-to-the-database).
type leaderCollector struct {
	reads *inspect.Reader
	// clientID is this replica's River client ID, which river_leader names when it leads.
	clientID string
}

func (l *leaderCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLeader, descTasks, descOldestTodo, descWorkersActive, descFoldAge, descFoldPending} {
		ch <- d
	}
}

// Collect exports nothing when the database cannot say who leads: an absent series, not a
// guess (cortexq_db_up says why).
func (l *leaderCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	leader, err := l.reads.IsLeader(ctx, l.clientID)
	if err != nil {
		return
	}
	if !leader {
		ch <- prometheus.MustNewConstMetric(descLeader, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(descLeader, prometheus.GaugeValue, 1)
	m, err := l.reads.Monitor(ctx)
	if err != nil {
		return
	}
	for _, t := range m.Tasks {
		ch <- prometheus.MustNewConstMetric(descTasks, prometheus.GaugeValue, float64(t.Tasks), t.Corpus, t.Service, t.Status.String())
	}
	for _, o := range m.OldestTodo {
		ch <- prometheus.MustNewConstMetric(descOldestTodo, prometheus.GaugeValue, o.Seconds, o.Corpus, o.Service)
	}
	for svc, n := range m.Workers {
		ch <- prometheus.MustNewConstMetric(descWorkersActive, prometheus.GaugeValue, float64(n), svc)
	}
	if m.FoldAgeSeconds >= 0 {
		ch <- prometheus.MustNewConstMetric(descFoldAge, prometheus.GaugeValue, m.FoldAgeSeconds)
	}
	ch <- prometheus.MustNewConstMetric(descFoldPending, prometheus.GaugeValue, float64(m.FoldPending))
}

var (
	descFSAvail = prometheus.NewDesc("cortexq_corpus_filesystem_avail_bytes",
		"Bytes available to the replica on the file system of a corpus path (where results are written).", []string{"path"}, nil)
	descFSSize = prometheus.NewDesc("cortexq_corpus_filesystem_size_bytes",
		"Size in bytes of the file system of a corpus path.", []string{"path"}, nil)
)

// corpusFSCollector exports the free space of each corpus path's file system as this replica
// sees it: a full disk stops the results from being written.
type corpusFSCollector struct{ catalog *catalog.Catalog }

func (f *corpusFSCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descFSAvail; ch <- descFSSize }

func (f *corpusFSCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	paths, err := f.catalog.CorpusPaths(ctx)
	if err != nil {
		return
	}
	for _, p := range paths {
		var st unix.Statfs_t
		if unix.Statfs(p, &st) != nil {
			continue // a path this replica cannot see (yet): nothing to say about it
		}
		ch <- prometheus.MustNewConstMetric(descFSAvail, prometheus.GaugeValue, float64(st.Bavail)*float64(st.Bsize), p)
		ch <- prometheus.MustNewConstMetric(descFSSize, prometheus.GaugeValue, float64(st.Blocks)*float64(st.Bsize), p)
	}
}
