package lease

import (
	"context"
	"time"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// InFlight counts the in-flight rows of this store's replica (all replicas' when all is set).
func (s *Store) InFlight(ctx context.Context, all bool) (int, error) {
	var replica *string
	if !all {
		replica = &s.cfg.Replica
	}
	n, err := dbsqlc.New(s.pool).DispatchCountInFlight(ctx, replica)
	return int(n), translate("count in flight", err)
}

// TaskInfo is what the sink needs to place a result: the task's service, corpus and entry.
type TaskInfo struct {
	queue.Task
	ServiceName string
	SandboxID   int32 // 0: an ordinary corpus
	Status      queue.Status
}

// TaskInfos looks tasks up by id; ids not found are missing from the map.
func (s *Store) TaskInfos(ctx context.Context, ids []int64) (map[int64]TaskInfo, error) {
	rows, err := dbsqlc.New(s.pool).TaskInfo(ctx, ids)
	if err != nil {
		return nil, translate("look up tasks", err)
	}
	out := make(map[int64]TaskInfo, len(rows))
	for _, r := range rows {
		out[r.ID] = TaskInfo{Task: queue.Task{TaskID: r.ID, Run: r.Run, ServiceID: r.ServiceID, CorpusID: r.CorpusID, Entry: r.Entry},
			ServiceName: r.ServiceName, SandboxID: r.SandboxID, Status: queue.Status(r.Status)}
	}
	return out, nil
}

// InFlightRows lists this store's replica's in-flight rows, as its hot mirror holds them: each
// with the worker of its latest attempt. Only the task and Worker are set.
func (s *Store) InFlightRows(ctx context.Context) ([]Lease, error) {
	rows, err := dbsqlc.New(s.pool).DispatchInFlightOfReplica(ctx, s.cfg.Replica)
	if err != nil {
		return nil, translate("list in-flight rows", err)
	}
	out := make([]Lease, len(rows))
	for i, r := range rows {
		out[i] = Lease{Task: queue.Task{TaskID: r.TaskID, Run: r.Run, ServiceID: r.ServiceID, CorpusID: r.CorpusID, Entry: r.Entry}, Worker: r.Worker}
	}
	return out, nil
}

// DispatchCounts counts dispatch rows of all replicas by state.
type DispatchCounts struct {
	Reserved, InFlight, Settling, Queued, DeadLettered int64
}

// DispatchCounts reads the dispatch table's counts.
func (s *Store) DispatchCounts(ctx context.Context) (DispatchCounts, error) {
	r, err := dbsqlc.New(s.pool).DispatchCounts(ctx)
	if err != nil {
		return DispatchCounts{}, translate("count dispatch rows", err)
	}
	return DispatchCounts{Reserved: r.Reserved, InFlight: r.InFlight, Settling: r.Settling, Queued: r.Queued, DeadLettered: r.DeadLettered}, nil
}

// Latency reports the median and 99th percentile of the time from lease to recorded result of
// a corpus's accepted results.
func (s *Store) Latency(ctx context.Context, corpusID int32) (p50, p99 time.Duration, err error) {
	r, err := dbsqlc.New(s.pool).AttemptLatency(ctx, corpusID)
	if err != nil {
		return 0, 0, translate("latency", err)
	}
	sec := func(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
	return sec(r.P50), sec(r.P99), nil
}

// LastReapAge reports how long ago, by the store's clock, any replica recorded a reaper pass;
// ok is false when none ever did.
func (s *Store) LastReapAge(ctx context.Context) (age time.Duration, ok bool, err error) {
	q := dbsqlc.New(s.pool)
	now, err := q.ClockNow(ctx, s.injectedNow())
	if err != nil {
		return 0, false, translate("read the clock", err)
	}
	last, err := q.ReaperLastPass(ctx)
	if err != nil {
		return 0, false, translate("last reaper pass", err)
	}
	if last.Passes == 0 {
		return 0, false, nil
	}
	return now.Sub(last.At), true, nil
}

// Open reports whether a service has work left — a TODO task or a dispatch row in flight or
// queued: a drain check cheap enough to poll often (two index probes), unlike Progress.
func (s *Store) Open(ctx context.Context, serviceID int32) (bool, error) {
	r, err := dbsqlc.New(s.pool).BenchOpen(ctx, serviceID)
	if err != nil {
		return false, translate("open tasks", err)
	}
	return r.Todo || r.Active, nil
}

// DiscardUnfinished deletes a service's TODO and dispatched tasks, with their dispatch rows,
// attempts and messages, and reports how many it deleted. It is for a service used by nothing
// else, like the bench's: every replica serving the service would otherwise lease those tasks.
func (s *Store) DiscardUnfinished(ctx context.Context, serviceID int32) (int64, error) {
	n, err := dbsqlc.New(s.pool).BenchDiscardUnfinished(ctx, serviceID)
	if err != nil {
		return 0, translate("discard unfinished tasks", err)
	}
	return n, nil
}

// GenerateTasks adds TODO tasks numbered first to last to a corpus, in the database alone, with
// the entries dir/NNNNNN/source.zip (archives or not), in id order: the bench's large backlogs
// (cortexq bench --corpora).
func (s *Store) GenerateTasks(ctx context.Context, serviceID, corpusID int32, dir string, first, last int) (int64, error) {
	n, err := dbsqlc.New(s.pool).BenchGenerateTasks(ctx, dbsqlc.BenchGenerateTasksParams{
		ServiceID: serviceID, CorpusID: corpusID, Dir: dir, First: int32(first), Last: int32(last)})
	if err != nil {
		return 0, translate("generate tasks", err)
	}
	// Fresh statistics keep the lease path on the tasks_todo index from the first lease on.
	if err := dbsqlc.New(s.pool).TasksAnalyze(ctx); err != nil {
		return n, translate("analyze tasks", err)
	}
	return n, nil
}

// CorpusDone counts a corpus's NoProblem tasks of a service and gives the time from since
// (database clock) to its last accepted result.
func (s *Store) CorpusDone(ctx context.Context, corpusID, serviceID int32, since time.Time) (int64, time.Duration, error) {
	r, err := dbsqlc.New(s.pool).BenchCorpusDone(ctx, corpusID, serviceID, since)
	if err != nil {
		return 0, 0, translate("corpus done", err)
	}
	return r.NoProblem, time.Duration(r.LastS * float64(time.Second)), nil
}
