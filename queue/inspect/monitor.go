package inspect

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/internal/pgtx"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// This file holds what the elected leader exports to Prometheus (docs/monitoring.md): the
// tasks per corpus, service and status, the oldest TODO task's wait, the active workers and
// the report fold's lag.

// Monitored is one scrape's reading of the cluster's state.
type Monitored struct {
	// Tasks are the tasks per corpus, service and status, from the task_totals ledger; every
	// corpus and service with tasks has all of queue.MonitoredStatuses.
	Tasks []TaskCount
	// OldestTodo is, per corpus and service with tasks, how long its oldest TODO task has
	// waited, in seconds (0 with none waiting).
	OldestTodo []TodoAge
	// Workers counts each service's workers that asked or answered in the last minute.
	Workers map[string]int64
	// FoldAgeSeconds is how long ago the report rollups were last folded (-1: never);
	// FoldPending how many noted changes wait for the next fold (counted up to 100,000).
	FoldAgeSeconds float64
	FoldPending    int64
}

// TaskCount is the number of tasks of a corpus and service in one status.
type TaskCount struct {
	Corpus, Service string
	Status          queue.Status
	Tasks           int64
}

// TodoAge is how long the oldest TODO task of a corpus and service has waited.
type TodoAge struct {
	Corpus, Service string
	Seconds         float64
}

// MonitoredStatuses are the statuses Monitored.Tasks reports for each corpus and service
// (blocked sums every value from -6 down).
var MonitoredStatuses = []queue.Status{queue.StatusTODO, queue.StatusDispatched, queue.StatusNoProblem,
	queue.StatusWarning, queue.StatusError, queue.StatusFatal, queue.StatusInvalid, queue.StatusBlocked}

// Monitor reads the cluster's state for a scrape, in one read-only snapshot.
func (r *Reader) Monitor(ctx context.Context) (Monitored, error) {
	var out Monitored
	err := pgx.BeginTxFunc(ctx, r.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		q := dbsqlc.New(tx)
		totals, err := q.MetricsTaskTotals(ctx)
		if err != nil {
			return err
		}
		out.Tasks = taskCounts(totals)
		ages := map[[2]string]float64{}
		oldest, err := q.MetricsOldestTodo(ctx)
		if err != nil {
			return err
		}
		for _, o := range oldest {
			ages[[2]string{o.Corpus, o.Service}] = o.AgeSeconds
		}
		for i, t := range out.Tasks {
			if i == 0 || out.Tasks[i-1].Corpus != t.Corpus || out.Tasks[i-1].Service != t.Service {
				out.OldestTodo = append(out.OldestTodo, TodoAge{Corpus: t.Corpus, Service: t.Service, Seconds: ages[[2]string{t.Corpus, t.Service}]})
			}
		}
		workers, err := q.MetricsActiveWorkers(ctx)
		if err != nil {
			return err
		}
		out.Workers = make(map[string]int64, len(workers))
		for _, w := range workers {
			out.Workers[w.Service] = w.Workers
		}
		fold, err := q.MetricsFold(ctx)
		out.FoldAgeSeconds, out.FoldPending = fold.AgeSeconds, fold.Pending
		return err
	})
	if err != nil {
		return Monitored{}, pgtx.Wrap("read the metrics", err)
	}
	return out, nil
}

// taskCounts turns the ledger's sums (sorted by corpus and service) into every monitored status
// of each corpus and service, zeros included, blocked values summed.
func taskCounts(rows []dbsqlc.MetricsTaskTotalsRow) []TaskCount {
	var out []TaskCount
	for i := 0; i < len(rows); {
		corpus, service := rows[i].Corpus, rows[i].Service
		by := map[queue.Status]int64{}
		for ; i < len(rows) && rows[i].Corpus == corpus && rows[i].Service == service; i++ {
			st := queue.Status(rows[i].Status)
			if st < queue.StatusBlocked {
				st = queue.StatusBlocked
			}
			by[st] += rows[i].Tasks
		}
		for _, st := range MonitoredStatuses {
			out = append(out, TaskCount{Corpus: corpus, Service: service, Status: st, Tasks: by[st]})
		}
	}
	return out
}

// IsLeader reports whether the River client clientID holds the leadership that runs the reaper
// and the report fold. River's own table is read directly: it is not in the schema sqlc knows
// (River's migrations create it).
func (r *Reader) IsLeader(ctx context.Context, clientID string) (bool, error) {
	var leader bool
	err := r.pool.QueryRow(ctx, "SELECT leader_id = $1 AND expires_at > now() FROM river_leader", clientID).Scan(&leader)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, pgtx.Wrap("read river_leader", err)
	}
	return leader, nil
}
