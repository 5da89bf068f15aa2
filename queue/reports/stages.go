package reports

// Where a run's time goes (docs/stages.md): the stages of its accepted attempts summarized per
// stage, the bottleneck named, and the slowest tasks.

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/internal/pgtx"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// StageScope is what a stage summary reads: the accepted attempts of a service's tasks (of one
// corpus, unless CorpusID is 0) answered from Since until Until (zero: now on), the newest
// MaxRows of them (0: StageRowsDefault).
type StageScope struct {
	ServiceID    int32
	CorpusID     int32
	Since, Until time.Time
	MaxRows      int
}

// StageRowsDefault bounds the attempts a summary reads unless told otherwise: the newest
// million, about 40 MB read.
const StageRowsDefault = 1_000_000

// TaskStages are one accepted attempt's stages.
type TaskStages struct {
	TaskID     int64        `json:"task_id"`
	Entry      string       `json:"entry"`
	LeasedAt   time.Time    `json:"leased_at"`
	AnsweredAt time.Time    `json:"answered_at"`
	Stages     queue.Stages `json:"-"`
	// Total is the hand-out to the claim's commit: the sum of the source, worker, write,
	// claim_wait and claim stages recorded (what the slowest list sorts by).
	Total time.Duration `json:"-"`
}

// StageStat summarizes one stage over the attempts that recorded it. Load is its sum over the
// wall clock (how many tasks were in it at once, on average); Share its part of the busy time:
// the sum of the stages a task spends handed out, from source to claim, its worker round trip
// split into transfer and the worker's own stages where it reported them (todo and reserved,
// waits for a worker to ask, are not busy time).
type StageStat struct {
	Stage              string
	Count              int
	Sum, P50, P95, P99 time.Duration
	Load, Share        float64
}

// StageSummary is where the time of a scope's accepted attempts went.
type StageSummary struct {
	Tasks int
	// From and To span the attempts, from the first hand-out to the last claim (database
	// clock); Wall is their distance.
	From, To time.Time
	Wall     time.Duration
	// PapersPerSecond is Tasks over Wall.
	PapersPerSecond float64
	Stages          []StageStat
	// Bottleneck is "waiting for workers" when the tasks waited reserved, ready for a worker to
	// ask, longer than they were busy in all; otherwise Busiest. "" with no attempts.
	Bottleneck string
	// Busiest is the stage with the largest share of the busy time, the wait for a claim counted
	// with the claim (the claims before it hold it back).
	Busiest string
	// Truncated is set when the scope held more attempts than were read.
	Truncated bool
}

// StageTransfer is the name of the derived stage: the worker's round trip less its own stages.
const StageTransfer = "transfer"

// WaitingForWorkers names the bottleneck when tasks wait, reserved, for a worker to ask.
const WaitingForWorkers = "waiting for workers"

// StageTasks reads the stages of the attempts of sc, newest first.
func (s *Store) StageTasks(ctx context.Context, sc StageScope) ([]TaskStages, bool, error) {
	limit := sc.MaxRows
	if limit <= 0 {
		limit = StageRowsDefault
	}
	p := dbsqlc.StageRowsParams{ServiceID: sc.ServiceID, Since: sc.Since, MaxRows: int32(min(limit+1, math.MaxInt32))}
	if sc.CorpusID != 0 {
		p.CorpusID = &sc.CorpusID
	}
	if !sc.Until.IsZero() {
		p.Until = &sc.Until
	}
	rows, err := dbsqlc.New(s.pool).StageRows(ctx, p)
	if err != nil {
		return nil, false, pgtx.Wrap("stages", err)
	}
	truncated := len(rows) > limit
	out := make([]TaskStages, 0, min(len(rows), limit))
	for _, r := range rows[:min(len(rows), limit)] {
		st, err := queue.DecodeStages(r.Stages)
		if err != nil {
			return nil, false, fmt.Errorf("stages of task %d: %w", r.TaskID, err)
		}
		out = append(out, TaskStages{TaskID: r.TaskID, Entry: r.Entry, LeasedAt: r.LeasedAt, AnsweredAt: r.AnsweredAt,
			Stages: st, Total: handOutToCommit(&st)})
	}
	return out, truncated, nil
}

// RunStageScope is the scope of a run: its corpus and service, from its start to its end (the
// open run: on).
func (s *Store) RunStageScope(ctx context.Context, run int64) (StageScope, error) {
	r, err := dbsqlc.New(s.pool).StageRun(ctx, run)
	if err != nil {
		return StageScope{}, pgtx.Wrap(fmt.Sprintf("run %d", run), err)
	}
	sc := StageScope{ServiceID: r.ServiceID, CorpusID: r.CorpusID, Since: r.StartedAt}
	if r.EndedAt != nil {
		sc.Until = *r.EndedAt
	}
	return sc, nil
}

// StageStorage reports how many attempts have stages and the bytes they take (docs/stages.md#storage).
func (s *Store) StageStorage(ctx context.Context) (attempts, bytes int64, err error) {
	r, err := dbsqlc.New(s.pool).StageBytes(ctx)
	return r.Attempts, r.Bytes, pgtx.Wrap("stage storage", err)
}

// handOutToCommit is the sum of the source, worker, write, claim_wait and claim stages recorded.
func handOutToCommit(st *queue.Stages) time.Duration {
	var d time.Duration
	for _, s := range []queue.Stage{queue.StageSource, queue.StageWorker, queue.StageWrite, queue.StageClaimWait, queue.StageClaim} {
		if st.Has(s) {
			d += st[s]
		}
	}
	return d
}

// summaryStages are the rows of a summary, in order: the stages, with transfer after worker.
var summaryStages = []string{"todo", "reserved", "source", "worker", StageTransfer, "unpack", "convert", "pack", "write",
	"claim_wait", "claim"}

// SummarizeStages summarizes tasks' stages.
func SummarizeStages(tasks []TaskStages) StageSummary {
	sum := StageSummary{Tasks: len(tasks)}
	if len(tasks) == 0 {
		return sum
	}
	values := map[string][]time.Duration{}
	busy := map[string]time.Duration{}
	sum.From, sum.To = tasks[0].LeasedAt, tasks[0].AnsweredAt
	for i := range tasks {
		t := &tasks[i]
		sum.From, sum.To = minTime(sum.From, t.LeasedAt), maxTime(sum.To, t.AnsweredAt)
		addTaskStages(&t.Stages, values, busy)
	}
	sum.Wall = sum.To.Sub(sum.From)
	if sum.Wall > 0 {
		sum.PapersPerSecond = float64(len(tasks)) / sum.Wall.Seconds()
	}
	var busyAll time.Duration
	for _, d := range busy {
		busyAll += d
	}
	sum.Busiest = busiest(busy)
	sum.Bottleneck = sum.Busiest
	if waited := sumOf(values["reserved"]); waited > busyAll {
		sum.Bottleneck = WaitingForWorkers
	}
	for _, name := range summaryStages {
		vs := values[name]
		if len(vs) == 0 {
			continue
		}
		st := statOf(name, vs)
		if sum.Wall > 0 {
			st.Load = st.Sum.Seconds() / sum.Wall.Seconds()
		}
		if busyAll > 0 {
			st.Share = busy[name].Seconds() / busyAll.Seconds()
		}
		sum.Stages = append(sum.Stages, st)
	}
	return sum
}

// busiest is the stage of the largest busy time, the wait for a claim counted with the claim.
func busiest(busy map[string]time.Duration) string {
	var top time.Duration
	name := ""
	for _, s := range summaryStages {
		d := busy[s]
		switch s {
		case "claim_wait":
			continue
		case "claim":
			d += busy["claim_wait"]
		}
		if d > top {
			top, name = d, s
		}
	}
	return name
}

// sumOf adds up values.
func sumOf(vs []time.Duration) time.Duration {
	var d time.Duration
	for _, v := range vs {
		d += v
	}
	return d
}

// addTaskStages adds one attempt's stages to the values of each stage, and the parts of its
// busy time to busy: its worker round trip split into transfer and the worker's own stages
// where it reported them.
func addTaskStages(st *queue.Stages, values map[string][]time.Duration, busy map[string]time.Duration) {
	transfer, split := st.Transfer()
	if split {
		values[StageTransfer] = append(values[StageTransfer], transfer)
		busy[StageTransfer] += transfer
	}
	for s := queue.Stage(0); s < queue.NumStages; s++ {
		if !st.Has(s) {
			continue
		}
		name := s.String()
		values[name] = append(values[name], st[s])
		switch {
		case s == queue.StageTodo, s == queue.StageReserved:
		case s == queue.StageWorker && split:
		default:
			busy[name] += st[s]
		}
	}
}

// statOf is the count, sum and percentiles of one stage's values (sorted in place).
func statOf(name string, vs []time.Duration) StageStat {
	slices.Sort(vs)
	st := StageStat{Stage: name, Count: len(vs), Sum: sumOf(vs)}
	st.P50, st.P95, st.P99 = percentile(vs, 0.50), percentile(vs, 0.95), percentile(vs, 0.99)
	return st
}

// percentile is the nearest-rank percentile q of sorted values.
func percentile(sorted []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// SlowestTasks returns the n tasks with the longest hand-out to commit (TaskStages.Total),
// longest first; ties by task id.
func SlowestTasks(tasks []TaskStages, n int) []TaskStages {
	out := slices.Clone(tasks)
	slices.SortFunc(out, func(a, b TaskStages) int {
		return cmp.Or(cmp.Compare(b.Total, a.Total), cmp.Compare(a.TaskID, b.TaskID))
	})
	return out[:min(n, len(out))]
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// ms is a duration in milliseconds, for JSON.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// MarshalJSON gives the stage's times in milliseconds.
func (st StageStat) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]any{"stage": st.Stage, "count": st.Count, "sum_ms": ms(st.Sum),
		"p50_ms": ms(st.P50), "p95_ms": ms(st.P95), "p99_ms": ms(st.P99), "load": st.Load, "share": st.Share})
}

// MarshalJSON gives the summary with its wall clock in milliseconds.
func (s StageSummary) MarshalJSON() ([]byte, error) {
	if s.Stages == nil {
		s.Stages = []StageStat{} // none recorded: an empty list, not null
	}
	return json.Marshal(map[string]any{"tasks": s.Tasks, "from": s.From, "to": s.To, "wall_ms": ms(s.Wall),
		"papers_per_second": s.PapersPerSecond, "stages": s.Stages, "bottleneck": s.Bottleneck, "busiest": s.Busiest, "truncated": s.Truncated})
}

// MarshalJSON gives the task's stages by name in milliseconds (those recorded).
func (t TaskStages) MarshalJSON() ([]byte, error) {
	stages := map[string]float64{}
	for s := queue.Stage(0); s < queue.NumStages; s++ {
		if t.Stages.Has(s) {
			stages[s.String()] = ms(t.Stages[s])
		}
	}
	if d, ok := t.Stages.Transfer(); ok {
		stages[StageTransfer] = ms(d)
	}
	return json.Marshal(map[string]any{"task_id": t.TaskID, "entry": t.Entry, "leased_at": t.LeasedAt,
		"answered_at": t.AnsweredAt, "total_ms": ms(t.Total), "stages": stages})
}

// StageRows are a summary's stages as table rows (stage, tasks, p50, p95, p99, sum, load, share),
// under StageHeader.
func StageRows(sum StageSummary) [][]string {
	rows := make([][]string, 0, len(sum.Stages))
	for _, st := range sum.Stages {
		share := "-"
		if st.Share > 0 {
			share = fmt.Sprintf("%.1f%%", 100*st.Share)
		}
		rows = append(rows, []string{st.Stage, fmt.Sprint(st.Count), FormatStage(st.P50), FormatStage(st.P95),
			FormatStage(st.P99), FormatStage(st.Sum), fmt.Sprintf("%.2f", st.Load), share})
	}
	return rows
}

// StageHeader heads StageRows.
var StageHeader = []string{"stage", "tasks", "p50", "p95", "p99", "sum", "load", "busy_share"}

// StageNote is the line under a stage table: the tasks, their wall clock and rate, the
// bottleneck.
func StageNote(sum StageSummary) string {
	if sum.Tasks == 0 {
		return "no accepted attempt with stages recorded"
	}
	note := fmt.Sprintf("%d tasks in %s: %.2f papers/s; bottleneck: %s", sum.Tasks, FormatStage(sum.Wall), sum.PapersPerSecond, sum.Bottleneck)
	if sum.Bottleneck != sum.Busiest {
		note += " (busiest stage: " + sum.Busiest + ")"
	}
	if sum.Truncated {
		note += fmt.Sprintf(" (the newest %d attempts only)", sum.Tasks)
	}
	return note
}

// WriteStageTable writes a summary as an aligned table and its note (the bench's and the demo's
// last lines).
func WriteStageTable(w io.Writer, sum StageSummary) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.ToUpper(strings.Join(StageHeader, "\t")))
	for _, r := range StageRows(sum) {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, StageNote(sum))
	return err
}

// SlowestHeader heads SlowestRows.
var SlowestHeader = []string{"task", "entry", "total", "reserved", "source", "worker", "transfer", "unpack", "convert",
	"pack", "write", "claim_wait", "claim"}

// SlowestRows are tasks as table rows under SlowestHeader ("-": a stage not recorded).
func SlowestRows(tasks []TaskStages) [][]string {
	rows := make([][]string, 0, len(tasks))
	for _, t := range tasks {
		r := []string{fmt.Sprint(t.TaskID), t.Entry, FormatStage(t.Total)}
		for _, name := range SlowestHeader[3:] {
			r = append(r, t.StageText(name))
		}
		rows = append(rows, r)
	}
	return rows
}

// StageText is a stage of the task by name, formatted ("-": not recorded).
func (t TaskStages) StageText(name string) string {
	if name == StageTransfer {
		if d, ok := t.Stages.Transfer(); ok {
			return FormatStage(d)
		}
		return "-"
	}
	for s := queue.Stage(0); s < queue.NumStages; s++ {
		if s.String() == name && t.Stages.Has(s) {
			return FormatStage(t.Stages[s])
		}
	}
	return "-"
}

// FormatStage writes a stage time in milliseconds below 10 s, else in seconds to the tenth.
func FormatStage(d time.Duration) string {
	if d < 10*time.Second {
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}
