package lease

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

type rowKey struct {
	task int64
	run  int32
}

type attemptKey struct {
	task    int64
	run     int32
	attempt int32
}

type taskState struct {
	status queue.Status
	run    int32
}

type workerKey struct {
	name    string
	service int32
}

// writes collects one transaction's changes so each table is written with one statement.
type writes struct {
	upserts     map[rowKey]*dbsqlc.Dispatch
	deletes     map[rowKey]bool
	tasks       map[int64]taskState
	attempts    []dbsqlc.AttemptInsertParams
	outcomes    map[attemptKey]outcomeWrite
	dropAttempt map[attemptKey]bool
	messages    map[rowKey][]queue.Message // replaces the run's messages
	dispatched  map[string]int64
	results     map[workerKey]int64
}

type outcomeWrite struct {
	outcome string
	status  queue.Status
}

func newWrites() *writes {
	return &writes{
		upserts:     map[rowKey]*dbsqlc.Dispatch{},
		deletes:     map[rowKey]bool{},
		tasks:       map[int64]taskState{},
		outcomes:    map[attemptKey]outcomeWrite{},
		dropAttempt: map[attemptKey]bool{},
		messages:    map[rowKey][]queue.Message{},
		dispatched:  map[string]int64{},
		results:     map[workerKey]int64{},
	}
}

func (w *writes) put(d *dbsqlc.Dispatch) {
	k := rowKey{d.TaskID, d.Run}
	delete(w.deletes, k)
	w.upserts[k] = d
}

func (w *writes) del(d *dbsqlc.Dispatch) {
	k := rowKey{d.TaskID, d.Run}
	delete(w.upserts, k)
	w.deletes[k] = true
}

func (w *writes) setTask(id int64, status queue.Status, run int32) {
	w.tasks[id] = taskState{status, run}
}

// outcome records what became of an attempt; an accepted attempt keeps that outcome against a
// repeat of its own result.
func (w *writes) outcome(task int64, run int32, attempt int, outcome string, status queue.Status) {
	if attempt < 0 {
		return
	}
	k := attemptKey{task, run, int32(attempt)}
	if prev, ok := w.outcomes[k]; ok && prev.outcome == "accepted" && (outcome == "superseded" || outcome == "stale") {
		return
	}
	w.outcomes[k] = outcomeWrite{outcome, status}
}

func (w *writes) flush(ctx context.Context, q *dbsqlc.Queries, now time.Time) error {
	if len(w.deletes) > 0 {
		ids, runs := make([]int64, 0, len(w.deletes)), make([]int32, 0, len(w.deletes))
		for k := range w.deletes {
			ids, runs = append(ids, k.task), append(runs, k.run)
		}
		if err := q.DispatchDelete(ctx, ids, runs); err != nil {
			return fmt.Errorf("delete dispatch rows: %w", err)
		}
	}
	if len(w.upserts) > 0 {
		rows := make([]*dbsqlc.Dispatch, 0, len(w.upserts))
		for _, d := range w.upserts {
			rows = append(rows, d)
		}
		// Rows leaving flight first: the one-active-row index is checked row by row.
		slices.SortFunc(rows, func(a, b *dbsqlc.Dispatch) int {
			if a.State != b.State {
				return -strings.Compare(a.State, b.State) // settling before in_flight
			}
			if a.TaskID != b.TaskID {
				return int(a.TaskID - b.TaskID)
			}
			return int(a.Run - b.Run)
		})
		doc, err := json.Marshal(rows)
		if err != nil {
			return fmt.Errorf("encode dispatch rows: %w", err)
		}
		if err := q.DispatchUpsert(ctx, doc); err != nil {
			return fmt.Errorf("write dispatch rows: %w", err)
		}
	}
	if len(w.tasks) > 0 {
		ids := make([]int64, 0, len(w.tasks))
		for id := range w.tasks {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		statuses, runs := make([]int16, len(ids)), make([]int32, len(ids))
		for i, id := range ids {
			statuses[i], runs[i] = int16(w.tasks[id].status), w.tasks[id].run
		}
		if err := q.TaskSetStatus(ctx, ids, statuses, runs); err != nil {
			return fmt.Errorf("set task statuses: %w", err)
		}
	}
	if len(w.dropAttempt) > 0 {
		var ids []int64
		var runs, atts []int32
		for k := range w.dropAttempt {
			ids, runs, atts = append(ids, k.task), append(runs, k.run), append(atts, k.attempt)
		}
		if err := q.AttemptDelete(ctx, ids, runs, atts); err != nil {
			return fmt.Errorf("delete attempts: %w", err)
		}
	}
	if len(w.attempts) > 0 {
		if _, err := q.AttemptInsert(ctx, w.attempts); err != nil {
			return fmt.Errorf("insert attempts: %w", err)
		}
	}
	if len(w.outcomes) > 0 {
		p := dbsqlc.AttemptFinishParams{Now: now}
		for k, o := range w.outcomes {
			p.TaskIds = append(p.TaskIds, k.task)
			p.Runs = append(p.Runs, k.run)
			p.Attempts = append(p.Attempts, k.attempt)
			p.Outcomes = append(p.Outcomes, o.outcome)
			p.Statuses = append(p.Statuses, int16(o.status))
		}
		if err := q.AttemptFinish(ctx, p); err != nil {
			return fmt.Errorf("record attempt outcomes: %w", err)
		}
	}
	if len(w.messages) > 0 {
		var ids []int64
		var runs []int32
		var rows []dbsqlc.MessageInsertParams
		for k, msgs := range w.messages {
			ids, runs = append(ids, k.task), append(runs, k.run)
			for _, m := range msgs {
				rows = append(rows, dbsqlc.MessageInsertParams{
					TaskID: k.task, Run: k.run, Severity: string(m.Severity),
					Category: m.Category, What: m.What, Details: m.Details,
				})
			}
		}
		if err := q.MessageDeleteForRuns(ctx, ids, runs); err != nil {
			return fmt.Errorf("delete messages: %w", err)
		}
		if len(rows) > 0 {
			if _, err := q.MessageInsert(ctx, rows); err != nil {
				return fmt.Errorf("insert messages: %w", err)
			}
		}
	}
	if len(w.results) > 0 {
		keys := make([]workerKey, 0, len(w.results))
		for k := range w.results {
			keys = append(keys, k)
		}
		slices.SortFunc(keys, func(a, b workerKey) int {
			if c := strings.Compare(a.name, b.name); c != 0 {
				return c
			}
			return int(a.service - b.service)
		})
		names, services, counts := make([]string, len(keys)), make([]int32, len(keys)), make([]int64, len(keys))
		for i, k := range keys {
			names[i], services[i], counts[i] = k.name, k.service, w.results[k]
		}
		if err := q.WorkerNoteResults(ctx, now, names, services, counts); err != nil {
			return fmt.Errorf("note worker results: %w", err)
		}
	}
	return nil
}
