package inspect

import (
	"context"
	"strings"
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
	// State is up (a heartbeat within ReplicaGoneAfter), stopped (it said so when it stopped),
	// gone (its heartbeats stopped) or unknown (no heartbeat on record: an older replica);
	// SeenAt is its last heartbeat.
	State  string
	SeenAt *time.Time
}

// ReplicaGoneAfter is how long a replica may go without a heartbeat (it sends one every
// lease.HeartbeatEvery) before it counts as gone.
const ReplicaGoneAfter = 30 * time.Second

// replicaState reads a replica's heartbeat.
func replicaState(seen time.Time, stopped bool, now time.Time) string {
	switch {
	case seen.Unix() == 0:
		return "unknown"
	case stopped:
		return "stopped"
	case now.Sub(seen) > ReplicaGoneAfter:
		return "gone"
	}
	return "up"
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
			LastLeasedAt: notEpoch(r.LastLeasedAt), LastReaperPass: notEpoch(r.LastReaperPass),
			State: replicaState(r.SeenAt, r.Stopped, r.Now), SeenAt: notEpoch(r.SeenAt)}
	}
	return out, nil
}

func notEpoch(t time.Time) *time.Time {
	if t.Unix() == 0 {
		return nil
	}
	return &t
}

// WorkerSeen is one worker (of one service) as the workers table keeps it: when it was first and
// last seen, its leases and results.
type WorkerSeen = dbsqlc.WebWorkersRow

// Workers lists at most limit workers, most recently seen first.
func (r *Reader) Workers(ctx context.Context, limit int) ([]WorkerSeen, error) {
	rows, err := dbsqlc.New(r.pool).WebWorkers(ctx, int32(limit))
	return rows, pgtx.Wrap("workers", err)
}

// WorkerOutcomes are the outcomes of a worker's attempts over the whole attempts trail.
type WorkerOutcomes struct {
	Attempts, Running, Accepted, Superseded, Stale, Retryable, Unusable, Expired, DeadLettered int64
}

// WorkerKey is a worker of a service.
type WorkerKey struct {
	Worker    string
	ServiceID int32
}

// AllWorkerOutcomes counts the outcomes of every worker's attempts, as audit_worker_activity
// does. It reads every attempt: seconds on millions of them.
func (r *Reader) AllWorkerOutcomes(ctx context.Context) (map[WorkerKey]WorkerOutcomes, error) {
	rows, err := dbsqlc.New(r.pool).WebWorkerOutcomes(ctx)
	if err != nil {
		return nil, pgtx.Wrap("worker outcomes", err)
	}
	out := make(map[WorkerKey]WorkerOutcomes, len(rows))
	for _, w := range rows {
		out[WorkerKey{w.Worker, w.ServiceID}] = WorkerOutcomes{Attempts: w.Attempts, Running: w.Running,
			Accepted: w.Accepted, Superseded: w.Superseded, Stale: w.Stale, Retryable: w.Retryable,
			Unusable: w.Unusable, Expired: w.Expired, DeadLettered: w.DeadLettered}
	}
	return out, nil
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

// FoundTask is a task whose entry matched a search.
type FoundTask = dbsqlc.WebSearchTasksRow

// SearchTasks finds at most limit tasks whose entry contains text (case-insensitive; % and _
// are literal), through the trigram index on tasks.entry.
func (r *Reader) SearchTasks(ctx context.Context, text string, limit int) ([]FoundTask, error) {
	esc := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(text)
	rows, err := dbsqlc.New(r.pool).WebSearchTasks(ctx, "%"+esc+"%", int32(limit))
	return rows, pgtx.Wrap("search tasks", err)
}

// TaskExists reports whether a task of that id exists.
func (r *Reader) TaskExists(ctx context.Context, id int64) (bool, error) {
	ok, err := dbsqlc.New(r.pool).WebTaskExists(ctx, id)
	return ok, pgtx.Wrap("task exists", err)
}

// DeadLetter is a task whose current run gave up (audit_dead_letters).
type DeadLetter = dbsqlc.WebDeadLettersRow

// DeadLetters lists at most limit dead-lettered tasks, by id.
func (r *Reader) DeadLetters(ctx context.Context, limit int) ([]DeadLetter, error) {
	rows, err := dbsqlc.New(r.pool).WebDeadLetters(ctx, int32(limit))
	return rows, pgtx.Wrap("dead letters", err)
}

// QueuedRetry is a task queued for a retry.
type QueuedRetry = dbsqlc.WebQueuedRetriesRow

// QueuedRetries lists at most limit tasks queued for a retry, by id.
func (r *Reader) QueuedRetries(ctx context.Context, limit int) ([]QueuedRetry, error) {
	rows, err := dbsqlc.New(r.pool).WebQueuedRetries(ctx, int32(limit))
	return rows, pgtx.Wrap("queued retries", err)
}

// WorkerHour is a worker's attempts over the last hour: leased, and answered of those.
type WorkerHour struct{ Leases, Answered int64 }

// WorkerHours counts the attempts of the workers named over the last hour.
func (r *Reader) WorkerHours(ctx context.Context, names []string) (map[string]WorkerHour, error) {
	rows, err := dbsqlc.New(r.pool).WebWorkerHour(ctx, names)
	if err != nil {
		return nil, pgtx.Wrap("worker hours", err)
	}
	out := make(map[string]WorkerHour, len(rows))
	for _, w := range rows {
		out[w.Worker] = WorkerHour{Leases: w.Leases, Answered: w.Answered}
	}
	return out, nil
}

// WorkerAttempt is one attempt of a worker, with its task.
type WorkerAttempt = dbsqlc.WebWorkerAttemptsRow

// WorkerAttempts lists a worker's latest attempts, at most limit, newest first.
func (r *Reader) WorkerAttempts(ctx context.Context, worker string, limit int) ([]WorkerAttempt, error) {
	rows, err := dbsqlc.New(r.pool).WebWorkerAttempts(ctx, worker, int32(limit))
	return rows, pgtx.Wrap("worker attempts", err)
}

// Now is the database's clock (or the test clock New was given).
func (r *Reader) Now(ctx context.Context) (time.Time, error) {
	if t := r.injectedNow(); t != nil {
		return *t, nil
	}
	var t time.Time
	err := r.pool.QueryRow(ctx, "SELECT now()").Scan(&t)
	return t, pgtx.Wrap("clock", err)
}

// ThroughputQuarters is how many quarter hours ThroughputDay covers: a day.
const ThroughputQuarters = 96

// ThroughputDay counts the attempts answered in each quarter hour of the last day, all corpora
// together: index 0 is the current quarter, 95 a day ago.
func (r *Reader) ThroughputDay(ctx context.Context) ([]int64, error) {
	rows, err := dbsqlc.New(r.pool).WebThroughputDay(ctx)
	if err != nil {
		return nil, pgtx.Wrap("throughput of the day", err)
	}
	out := make([]int64, ThroughputQuarters)
	for _, r := range rows {
		if r.Quarter >= 0 && r.Quarter < ThroughputQuarters {
			out[r.Quarter] += r.Replies
		}
	}
	return out, nil
}
