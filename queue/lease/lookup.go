package lease

import (
	"context"

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
