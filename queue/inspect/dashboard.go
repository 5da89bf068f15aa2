package inspect

import (
	"context"
	"time"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/internal/pgtx"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// This file holds the reads of the web dashboard (queue/web) that no command makes: throughput
// by the minute, replicas, workers and leases from the audit views. Each only reads, so the
// dashboard can run them on an audit role's connection.

// ThroughputMinutes is how many minutes Throughput covers.
const ThroughputMinutes = 60

// Throughput counts the attempts answered per corpus and service in each of the last
// ThroughputMinutes minutes: index 0 is the current minute, 59 an hour ago.
func (r *Reader) Throughput(ctx context.Context) (map[queue.Scope][]int64, error) {
	rows, err := dbsqlc.New(r.pool).WebThroughput(ctx)
	if err != nil {
		return nil, pgtx.Wrap("throughput", err)
	}
	out := map[queue.Scope][]int64{}
	for _, r := range rows {
		k := queue.Scope{CorpusID: r.CorpusID, ServiceID: r.ServiceID}
		if out[k] == nil {
			out[k] = make([]int64, ThroughputMinutes)
		}
		if r.Minute >= 0 && r.Minute < ThroughputMinutes {
			out[k][r.Minute] += r.Replies
		}
	}
	return out, nil
}

// ReplicaLoad is one replica's share of the work now.
type ReplicaLoad struct {
	Replica string
	// InFlight leases, and Reserved tasks not yet handed out or not yet attributed.
	InFlight, Reserved int64
	// LeasesLastMinute and ResultsLastMinute count its attempts leased and answered.
	LeasesLastMinute, ResultsLastMinute int64
	// LastLeasedAt and LastReaperPass are nil when there is none on record.
	LastLeasedAt, LastReaperPass *time.Time
}

// ReplicaLoads lists the replicas with a lease in flight or one in the last hour
// (audit_replica_load).
func (r *Reader) ReplicaLoads(ctx context.Context) ([]ReplicaLoad, error) {
	rows, err := dbsqlc.New(r.pool).WebReplicaLoad(ctx)
	if err != nil {
		return nil, pgtx.Wrap("replica load", err)
	}
	out := make([]ReplicaLoad, len(rows))
	for i, r := range rows {
		out[i] = ReplicaLoad{Replica: r.Replica, InFlight: r.InFlight, Reserved: r.Reserved,
			LeasesLastMinute: r.LeasesLastMinute, ResultsLastMinute: r.ResultsLastMinute,
			LastLeasedAt: notEpoch(r.LastLeasedAt), LastReaperPass: notEpoch(r.LastReaperPass)}
	}
	return out, nil
}

func notEpoch(t time.Time) *time.Time {
	if t.Unix() == 0 {
		return nil
	}
	return &t
}

// WorkerActivity is one worker (of one service) as audit_worker_activity reports it.
type WorkerActivity = dbsqlc.WebWorkerActivityRow

// WorkerActivities lists at most limit workers, most recently seen first.
func (r *Reader) WorkerActivities(ctx context.Context, limit int) ([]WorkerActivity, error) {
	rows, err := dbsqlc.New(r.pool).WebWorkerActivity(ctx, int32(limit))
	return rows, pgtx.Wrap("worker activity", err)
}

// LeaseOut is one lease in flight as audit_in_flight reports it.
type LeaseOut = dbsqlc.WebInFlightRow

// LeasesOut lists at most limit leases in flight, the nearest deadline first.
func (r *Reader) LeasesOut(ctx context.Context, limit int) ([]LeaseOut, error) {
	rows, err := dbsqlc.New(r.pool).WebInFlight(ctx, int32(limit))
	return rows, pgtx.Wrap("leases in flight", err)
}

// ActiveWorkers counts the workers (by name and service) heard from in the last minute.
func (r *Reader) ActiveWorkers(ctx context.Context) (int64, error) {
	n, err := dbsqlc.New(r.pool).WebActiveWorkers(ctx)
	return n, pgtx.Wrap("active workers", err)
}
