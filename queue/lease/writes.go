package lease

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
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
	attempts    []newAttempt
	outcomes    map[attemptKey]outcomeWrite
	dropAttempt map[attemptKey]bool
	logs        map[rowKey]*messageLog // each replaces its run's messages
	// kindRefs are the message_kinds rows of the messages' kinds and usual the kinds' usual
	// details, where not empty (Store.resolveKinds).
	kindRefs map[kindKey]kindRef
	usual    map[int32]string
	// claimBegan is when a claim began, claimSent when its writes were sent, and commitTook its
	// commit's estimated round trip: its attempts' claim stages (stagesParam).
	claimBegan, claimSent time.Time
	commitTook            time.Duration
}

// messageLog is a run's messages as a transaction writes them, with the ids of their kinds in
// order: a reply's come with them (Store.resultKinds); others are resolved before the writes
// go (Store.resolveKinds).
type messageLog struct {
	msgs  []queue.Message
	kinds []int32
}

// resolved reports whether the log's kinds are known.
func (l *messageLog) resolved() bool { return len(l.kinds) == len(l.msgs) }

// setLog makes msgs the messages of a task's run, with their kinds' ids if known (nil if not).
func (w *writes) setLog(k rowKey, msgs []queue.Message, kinds []int32) {
	w.logs[k] = &messageLog{msgs: msgs, kinds: kinds}
}

// newAttempt is an attempts row a transaction adds. Replica is the replica that handed the
// attempt out ("": the writing one).
type newAttempt struct {
	TaskID  int64
	Run     int32
	Attempt int32
	Worker  string
	Replica string
	// LeasedAt is when the attempt began: its hand-out, by the database clock.
	LeasedAt time.Time
}

type outcomeWrite struct {
	outcome AttemptOutcome
	status  queue.Status
	archive *ArchiveRecord // an accepted attempt's result archive, if recorded
	stages  *stageWrite    // an accepted attempt's stage times, if measured
}

// stageWrite is an attempt's stages, and when its result was queued for the claim (zero:
// unknown) to time the claim stage.
type stageWrite struct {
	stages queue.Stages
	queued time.Time
}

// stagesParam is an outcome's stages as the statement takes them (nil: none): the wait for the
// claim from the result's queueing to claimBegan, and the claim from then to the commit, the
// writes sent at claimSent and their round trip as long as commitTook.
func (w *writes) stagesParam(o outcomeWrite) []byte {
	if o.stages == nil {
		return nil
	}
	st := o.stages.stages
	if !w.claimSent.IsZero() {
		st[queue.StageClaim] = max(w.claimSent.Sub(w.claimBegan), 0) + w.commitTook
		if !o.stages.queued.IsZero() {
			st[queue.StageClaimWait] = max(w.claimBegan.Sub(o.stages.queued), 0)
		}
	}
	return st.Encode()
}

// archiveParams is an outcome's archive as the statement takes it: a size below -1 for none.
func (o outcomeWrite) archiveParams() (int64, []byte) {
	if o.archive == nil {
		return -2, nil
	}
	return o.archive.Size, o.archive.Digest
}

func newWrites() *writes {
	return &writes{
		upserts:     map[rowKey]*dbsqlc.Dispatch{},
		deletes:     map[rowKey]bool{},
		tasks:       map[int64]taskState{},
		outcomes:    map[attemptKey]outcomeWrite{},
		dropAttempt: map[attemptKey]bool{},
		logs:        map[rowKey]*messageLog{},
		kindRefs:    map[kindKey]kindRef{},
		usual:       map[int32]string{},
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
func (w *writes) outcome(task int64, run int32, attempt int, outcome AttemptOutcome, status queue.Status) {
	if attempt < 0 {
		return
	}
	k := attemptKey{task, run, int32(attempt)}
	if prev, ok := w.outcomes[k]; ok && prev.outcome == AttemptAccepted && (outcome == AttemptSuperseded || outcome == AttemptStale) {
		return
	}
	w.outcomes[k] = outcomeWrite{outcome: outcome, status: status}
}

// accepted records what an accepted attempt keeps of its result r, after outcome: its archive
// and its stages.
func (w *writes) accepted(task int64, run int32, attempt int, r *Result, stages *stageWrite) {
	k := attemptKey{task, run, int32(attempt)}
	if o, ok := w.outcomes[k]; ok && o.outcome == AttemptAccepted {
		o.archive, o.stages = r.Archive, stages
		w.outcomes[k] = o
	}
}

// flush writes everything collected in one statement (sql/apply.sql): one round trip, however
// many rows and tables a transaction touched. A pipelined transaction calls it once, queueing
// the statement (pipelinedTx's writeBatch); its answer is read with the COMMIT's.
func (w *writes) flush(ctx context.Context, q *dbsqlc.Queries, now time.Time, replica string) error {
	p := dbsqlc.ApplyParams{Now: now, Replica: replica}
	for k := range w.deletes {
		p.DelTaskIds, p.DelRuns = append(p.DelTaskIds, k.task), append(p.DelRuns, k.run)
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
				return cmp.Compare(a.TaskID, b.TaskID)
			}
			return cmp.Compare(a.Run, b.Run)
		})
		doc, err := json.Marshal(rows)
		if err != nil {
			return fmt.Errorf("encode dispatch rows: %w", err)
		}
		p.Upserts = doc
	}
	ids := make([]int64, 0, len(w.tasks))
	for id := range w.tasks {
		ids = append(ids, id)
	}
	slices.Sort(ids) // tasks are locked in id order everywhere
	for _, id := range ids {
		p.TaskIds = append(p.TaskIds, id)
		p.TaskStatuses = append(p.TaskStatuses, int16(w.tasks[id].status))
		p.TaskRuns = append(p.TaskRuns, w.tasks[id].run)
	}
	for k := range w.dropAttempt {
		p.DropTaskIds, p.DropRuns, p.DropAttempts = append(p.DropTaskIds, k.task), append(p.DropRuns, k.run), append(p.DropAttempts, k.attempt)
	}
	w.attemptParams(&p)
	if err := w.messageParams(&p); err != nil {
		return err
	}
	if err := q.Apply(ctx, p); err != nil {
		return fmt.Errorf("write changes: %w", err)
	}
	return nil
}

// attemptParams puts the attempts added and finished in p, one element of the Att arrays each:
// an added attempt with its outcome, if it has one (the statement's update cannot see the rows
// its insert adds).
func (w *writes) attemptParams(p *dbsqlc.ApplyParams) {
	add := func(k attemptKey, a *newAttempt) {
		o := w.outcomes[k]
		p.AttTaskIds, p.AttRuns, p.AttAttempts = append(p.AttTaskIds, k.task), append(p.AttRuns, k.run), append(p.AttAttempts, k.attempt)
		var worker, replica string
		var leasedAt time.Time
		if a != nil {
			worker, replica, leasedAt = a.Worker, a.Replica, a.LeasedAt
		}
		p.AttNew, p.AttWorkers, p.AttReplicas = append(p.AttNew, a != nil), append(p.AttWorkers, worker), append(p.AttReplicas, replica)
		p.AttLeasedAts = append(p.AttLeasedAts, leasedAt)
		p.AttOutcomes, p.AttStatuses = append(p.AttOutcomes, string(o.outcome)), append(p.AttStatuses, int16(o.status))
		size, digest := o.archiveParams()
		p.AttResultSizes, p.AttResultDigests = append(p.AttResultSizes, size), append(p.AttResultDigests, digest)
		p.AttStages = append(p.AttStages, w.stagesParam(o))
	}
	added := make(map[attemptKey]bool, len(w.attempts))
	for i := range w.attempts {
		a := &w.attempts[i]
		k := attemptKey{a.TaskID, a.Run, a.Attempt}
		added[k] = true
		add(k, a)
	}
	for k := range w.outcomes {
		if !added[k] {
			add(k, nil)
		}
	}
}

// messageParams puts the messages of the changes in p: each run's log is one row, the slice of
// p.MsgKinds from MsgKindFrom to MsgKindTo (1-based, inclusive) its kinds, and its details one
// text joined by its separator, the details of a message that are its kind's usual ones left
// empty where the log is elided (logDetails).
func (w *writes) messageParams(p *dbsqlc.ApplyParams) error {
	var joined strings.Builder
	var usualAt []bool
	for k, log := range w.logs {
		msgs, seq := log.msgs, log.kinds
		p.MsgTaskIds, p.MsgRuns = append(p.MsgTaskIds, k.task), append(p.MsgRuns, k.run)
		p.MsgKindFrom = append(p.MsgKindFrom, int32(len(p.MsgKinds)+1))
		if !log.resolved() {
			return fmt.Errorf("write changes: the kinds of %d messages of task %d are not resolved", len(msgs), k.task)
		}
		p.MsgKinds = append(p.MsgKinds, seq...)
		p.MsgKindTo = append(p.MsgKindTo, int32(len(p.MsgKinds)))
		usualAt = slices.Grow(usualAt[:0], len(msgs))[:len(msgs)]
		elide, details := w.logDetails(msgs, seq, usualAt)
		p.MsgElided = append(p.MsgElided, elide)
		if !details {
			p.MsgDetails, p.MsgDetailSeps = append(p.MsgDetails, ""), append(p.MsgDetailSeps, "")
			continue
		}
		sep := detailSeparator(msgs)
		size := len(sep) * (len(msgs) - 1)
		for i, m := range msgs {
			if !elide || !usualAt[i] {
				size += len(m.Details)
			}
		}
		joined.Reset()
		joined.Grow(size)
		for i, m := range msgs {
			if i > 0 {
				joined.WriteString(sep)
			}
			if !elide || !usualAt[i] {
				joined.WriteString(m.Details)
			}
		}
		p.MsgDetails, p.MsgDetailSeps = append(p.MsgDetails, joined.String()), append(p.MsgDetailSeps, sep)
	}
	return nil
}

// logDetails decides how the details of a log (its messages and their kinds' ids) are stored.
// usualAt[i] is set where message i has its kind's usual details (w.usual, not empty). details
// says whether any are stored: else the log's details are NULL, all empty. elide says whether
// those of usualAt go as NULL elements (migrations/00025_usual_details.sql): not in a log where
// a message of a kind with usual details has empty ones (NULL would read as the usual ones),
// nor in a log of one message (its one empty element would make an empty array).
func (w *writes) logDetails(msgs []queue.Message, seq []int32, usualAt []bool) (elide, details bool) {
	clash := false
	for i, m := range msgs {
		usualAt[i] = false
		switch u := w.usual[seq[i]]; {
		case u == "":
			details = details || m.Details != ""
		case m.Details == u:
			usualAt[i], elide, details = true, true, true
		case m.Details == "":
			clash = true
		default:
			details = true
		}
	}
	return elide && !clash && len(msgs) > 1, details
}

// detailSeparator returns a separator for joining the details of msgs that PostgreSQL's
// string_to_array splits back exactly: \x1e, a number (none at first), \x1f, the first of these
// that no detail holds. The separator begins and ends with bytes found nowhere else in it, so no
// proper prefix of it is also a suffix: the leftmost match of it in the joined text is always
// one this function put there, never one that begins inside a detail.
func detailSeparator(msgs []queue.Message) string {
	sep := "\x1e\x1f"
	for n := 0; ; n++ {
		if n > 0 {
			sep = "\x1e" + strconv.Itoa(n) + "\x1f"
		}
		clash := false
		for _, m := range msgs {
			if strings.Contains(m.Details, sep) {
				clash = true
				break
			}
		}
		if !clash {
			return sep
		}
	}
}

// record writes a decided result whose archive was published: the row's next state, the
// task's status and messages (the reply's, with their kinds), and the attempts' outcomes.
func (s *Store) record(step *claimStep, rec *recorded) {
	w, ct, r, d := step.w, rec.ct, rec.r, rec.d
	row, next, attempt, status, drop := rec.x.row, rec.x.next, rec.x.attempt, rec.x.status, rec.x.drop
	if drop {
		w.del(row)
	} else {
		*row = *next
		w.put(row)
	}
	w.setTask(row.TaskID, status, ct.task.Run)
	// The run's log is the reply's messages, with the kinds resultKinds found (a log this claim
	// wrote before for the row is replaced).
	w.setLog(rowKey{row.TaskID, row.Run}, r.Messages, r.kinds)
	if d.Replaced != nil && d.Replaced.Attempt != attempt {
		w.outcome(row.TaskID, row.Run, d.Replaced.Attempt, AttemptReplaced, 0)
	}
	outcome := AttemptAccepted
	if d.Outcome == OutcomeFinal {
		outcome = AttemptRetryable
	}
	w.outcome(row.TaskID, row.Run, attempt, outcome, status)
	w.accepted(row.TaskID, row.Run, attempt, r, attemptStages(r, attempt, ct.task.TodoSince, step.now))
}

// attemptStages are the stages an accepted result's attempt records: the dispatcher's, with the
// wait in TODO of a run's first attempt, from todo_since to the reservation, dated on the
// claim's database clock (now) by the replica's monotonic age of the reservation. The claim
// stage is added at the write (writes.stagesParam). nil: none measured.
func attemptStages(r *Result, attempt int, todoSince, now time.Time) *stageWrite {
	if r.Stages == nil {
		return nil
	}
	st := *r.Stages
	if attempt == 0 && !r.ReservedAt.IsZero() && !todoSince.IsZero() {
		st[queue.StageTodo] = max(now.Add(-time.Since(r.ReservedAt)).Sub(todoSince), 0)
	}
	return &stageWrite{stages: st, queued: r.Queued}
}
