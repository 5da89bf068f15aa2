package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// PruneOptions selects the run history to drop (docs/operations.md#retention).
type PruneOptions struct {
	// CorpusID and ServiceID, when not zero, limit the pruning to one corpus or service.
	CorpusID  int32
	ServiceID int32
	// Keep, when not zero, keeps the last Keep runs of each corpus and service (at least 2).
	Keep int
	// Before, when not zero, drops the runs that ended before it.
	Before time.Time
	// DryRun counts what would be dropped and drops nothing.
	DryRun bool
	// Batch is how many rows a delete takes at most (tasks for attempts and logs); 0: 20,000.
	Batch int
}

// MinKeep is the fewest runs a prune keeps of a corpus and service: the current run and the last
// closed one, which the kept diff matrix (docs/reports.md#diff-matrices) compares it with.
const MinKeep = 2

// PruneScope is what a prune kept and dropped of one corpus and service.
type PruneScope struct {
	CorpusID    int32   `json:"corpus_id"`
	ServiceID   int32   `json:"service_id"`
	Corpus      string  `json:"corpus"`
	Service     string  `json:"service"`
	KeptRuns    []int64 `json:"kept_runs"`
	DroppedRuns []int64 `json:"dropped_runs"`
	// The rows dropped (or, dry, that would be) per table.
	RunStatuses int64 `json:"run_statuses"`
	RunDiffs    int64 `json:"run_diffs"`
	Attempts    int64 `json:"attempts"`
	MessageLogs int64 `json:"task_message_logs"`
}

// ErrPruneSelection is returned for options that give neither or both of Keep and Before, or a
// Keep below MinKeep.
var ErrPruneSelection = errors.New("give --keep N (at least 2) or --before DATE, not both")

// PruneRuns drops the history of old runs: of each corpus and service (or the one selected), the
// closed runs outside the last Keep, or that ended before Before, go with their kept statuses,
// their stored diff matrices, the attempts of their tasks' earlier runs leased before the oldest
// kept run began, and those runs' message logs. The current run and the last closed one are
// always kept, as is everything of a task's current run. Each batch is its own statement: a
// prune can stop anywhere and be run again.
func (s *Store) PruneRuns(ctx context.Context, opt PruneOptions) ([]PruneScope, error) {
	if (opt.Keep == 0) == opt.Before.IsZero() || (opt.Keep != 0 && opt.Keep < MinKeep) {
		return nil, ErrPruneSelection
	}
	if opt.Batch <= 0 {
		opt.Batch = 20000
	}
	q := dbsqlc.New(s.pool)
	opt32 := func(id int32) *int32 {
		if id == 0 {
			return nil
		}
		return &id
	}
	scopes, err := q.RunScopesWithHistory(ctx, opt32(opt.CorpusID), opt32(opt.ServiceID))
	if err != nil {
		return nil, fmt.Errorf("list the runs: %w", err)
	}
	var out []PruneScope
	for _, sc := range scopes {
		p, err := s.pruneScope(ctx, q, sc.CorpusID, sc.ServiceID, opt)
		p.Corpus, p.Service = sc.Corpus, sc.Service
		if err != nil {
			return out, fmt.Errorf("corpus %d, service %d: %w", sc.CorpusID, sc.ServiceID, err)
		}
		out = append(out, p)
	}
	return out, nil
}

func (s *Store) pruneScope(ctx context.Context, q *dbsqlc.Queries, corpusID, serviceID int32, opt PruneOptions) (PruneScope, error) {
	p := PruneScope{CorpusID: corpusID, ServiceID: serviceID, KeptRuns: []int64{}, DroppedRuns: []int64{}}
	runs, err := q.RunsOfScopeOldestFirst(ctx, corpusID, serviceID)
	if err != nil {
		return p, err
	}
	cut := pruneCut(runs, opt)
	for i, r := range runs {
		if i < cut {
			p.DroppedRuns = append(p.DroppedRuns, r.ID)
		} else {
			p.KeptRuns = append(p.KeptRuns, r.ID)
		}
	}
	if cut == 0 {
		return p, nil
	}
	keepFrom := runs[cut].StartedAt
	dropped := p.DroppedRuns
	if opt.DryRun {
		if p.RunStatuses, err = q.RunStatusesCountOfRuns(ctx, dropped); err != nil {
			return p, err
		}
		if p.RunDiffs, err = q.RunDiffsCountOfRuns(ctx, dropped); err != nil {
			return p, err
		}
	}
	// Attempts and logs first, then the kept statuses, then the runs rows: a prune cut short
	// leaves runs whose history is partly gone, and the next prune finishes them.
	span, err := q.TaskIDRangeOfScope(ctx, corpusID, serviceID)
	if err != nil {
		return p, err
	}
	for after := span.Lo - 1; after < span.Hi; after += int64(opt.Batch) {
		r, err := q.TaskHistoryPruneBatch(ctx, dbsqlc.TaskHistoryPruneBatchParams{
			After: after, Upto: after + int64(opt.Batch), CorpusID: corpusID, ServiceID: serviceID,
			Before: keepFrom, Dry: opt.DryRun,
		})
		if err != nil {
			return p, fmt.Errorf("attempts and logs: %w", err)
		}
		p.Attempts += r.Attempts
		p.MessageLogs += r.MessageLogs
	}
	if opt.DryRun {
		return p, nil
	}
	for _, id := range dropped {
		for {
			n, err := q.RunStatusesDeleteBatch(ctx, id, int32(opt.Batch))
			if err != nil {
				return p, fmt.Errorf("statuses of run %d: %w", id, err)
			}
			p.RunStatuses += n
			if n < int64(opt.Batch) {
				break
			}
		}
	}
	if p.RunDiffs, err = q.RunDiffsDeleteOfRuns(ctx, dropped); err != nil {
		return p, fmt.Errorf("diff matrices: %w", err)
	}
	if _, err := q.RunsDeleteClosed(ctx, dropped); err != nil {
		return p, fmt.Errorf("runs: %w", err)
	}
	return p, nil
}

// pruneCut is how many of a scope's runs, oldest first, opt drops: a prefix, never the last
// MinKeep nor an open one.
func pruneCut(runs []dbsqlc.RunsOfScopeOldestFirstRow, opt PruneOptions) int {
	cut := 0
	for i, r := range runs {
		if i >= len(runs)-MinKeep || r.EndedAt == nil {
			break
		}
		if opt.Keep != 0 && i >= len(runs)-opt.Keep {
			break
		}
		if opt.Keep == 0 && !r.EndedAt.Before(opt.Before) {
			break
		}
		cut = i + 1
	}
	return cut
}
