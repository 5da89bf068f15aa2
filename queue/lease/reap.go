package lease

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/internal/dbconv"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// ReapSummary tallies one reaping pass.
type ReapSummary struct {
	// Requeued expired leases were queued for another attempt.
	Requeued int
	// DeadLettered expired leases spent their budget and were recorded as a stand-in Fatal.
	DeadLettered int
	// Forgotten held rows passed their late-result window and were deleted.
	Forgotten int
	// Released reservations passed their deadline unhanded (their replica died or froze) and
	// were taken back, with no attempt counted.
	Released int
}

// ReapBatchDefault is how many rows one Reap or Forget transaction takes at most.
const ReapBatchDefault = 1000

// Reap takes in-flight rows past their deadline out of flight, at most max (ReapBatchDefault
// when max <= 0): within the retry budget they are queued for a retry of their own service;
// otherwise they are dead-lettered with the last retryable cause, or never_completed, as a
// stand-in Fatal that a late result still replaces. Rows other transactions hold are skipped, so
// two reapers at once split the work.
func (s *Store) Reap(ctx context.Context, max int) (ReapSummary, error) {
	if max <= 0 {
		max = ReapBatchDefault
	}
	var sum ReapSummary
	err := s.inTx(ctx, "reap", true, func(q *dbsqlc.Queries, tx pgx.Tx, now time.Time) error {
		sum = ReapSummary{}
		rows, err := q.DispatchLockExpired(ctx, now, int32(max))
		if err != nil {
			return fmt.Errorf("lock expired rows: %w", err)
		}
		w := newWrites()
		for i := range rows {
			d := &rows[i].Dispatch
			if !d.Answered {
				// An answered attempt (an unusable reply) keeps that outcome: it did reply, and
				// the audit trail says how.
				w.outcome(d.TaskID, d.Run, currentAttempt(d), AttemptExpired, 0)
			}
			if d.Run != rows[i].TaskRun {
				// A row of an earlier run can only be in flight through a hand edit: hold it.
				s.hold(d, nil, now)
				w.put(d)
				continue
			}
			if exhausted(d) {
				sum.DeadLettered++
				cause := dbconv.Messages(d.LastCause)
				if len(cause) == 0 {
					cause = []queue.Message{queue.NeverCompleted}
				}
				w.setTask(d.TaskID, queue.StatusFatal, d.Run)
				w.setLog(rowKey{d.TaskID, d.Run}, cause, nil)
				w.outcome(d.TaskID, d.Run, currentAttempt(d), AttemptDeadLettered, 0)
				if s.lateWindow() > 0 {
					s.hold(d, nil, now)
					d.DeadLettered = true
					w.put(d)
				} else {
					w.del(d)
				}
				continue
			}
			sum.Requeued++
			s.hold(d, nil, now)
			d.Queued = true
			d.Retries++
			w.put(d)
		}
		if err := s.resolveKinds(ctx, q, w); err != nil {
			return err
		}
		return w.flush(ctx, q, now, s.cfg.Replica)
	})
	return sum, err
}

// Forget deletes held rows whose late-result window has passed, at most max per call
// (ReapBatchDefault when max <= 0). A queued retry is never forgotten before it is leased.
func (s *Store) Forget(ctx context.Context, max int) (int, error) {
	if max <= 0 {
		max = ReapBatchDefault
	}
	var n int64
	err := s.inTx(ctx, "forget", true, func(q *dbsqlc.Queries, tx pgx.Tx, now time.Time) error {
		var err error
		n, err = q.DispatchForget(ctx, now, int32(max))
		return err
	})
	return int(n), err
}

// ReapAll runs Reap and Forget until no due rows are left, then records the pass in
// reaper_passes. It is the periodic reaper's body.
func (s *Store) ReapAll(ctx context.Context) (ReapSummary, error) {
	var total ReapSummary
	for {
		n, err := s.ReleaseExpired(ctx, ReapBatchDefault)
		if err != nil {
			return total, err
		}
		total.Released += n
		if n < ReapBatchDefault {
			break
		}
	}
	for {
		sum, err := s.Reap(ctx, ReapBatchDefault)
		if err != nil {
			return total, err
		}
		total.Requeued += sum.Requeued
		total.DeadLettered += sum.DeadLettered
		if sum.Requeued+sum.DeadLettered < ReapBatchDefault {
			break
		}
	}
	for {
		n, err := s.Forget(ctx, ReapBatchDefault)
		if err != nil {
			return total, err
		}
		total.Forgotten += n
		if n < ReapBatchDefault {
			break
		}
	}
	err := s.inTx(ctx, "record reaper pass", true, func(q *dbsqlc.Queries, tx pgx.Tx, now time.Time) error {
		return q.ReaperPassInsert(ctx, dbsqlc.ReaperPassInsertParams{
			Replica: s.cfg.Replica, At: now, Requeued: int32(total.Requeued),
			DeadLettered: int32(total.DeadLettered), Forgotten: int32(total.Forgotten),
			Released: int32(total.Released),
		})
	})
	return total, err
}
