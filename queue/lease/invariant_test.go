package lease

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
)

// invariantsFile holds the audit queries: each returns the rows that break its rule.
const invariantsFile = "../../sql/audit/invariants.sql"

// invariant is one named query of invariantsFile.
type invariant struct {
	name string
	sql  string
}

// loadInvariants reads the named queries of invariantsFile: a `-- name: X` line starts query X,
// which runs to the next name line.
func loadInvariants(t testing.TB) []invariant {
	t.Helper()
	src, err := os.ReadFile(invariantsFile)
	require.NoError(t, err)
	var out []invariant
	for _, part := range strings.Split(string(src), "-- name: ")[1:] {
		name, body, _ := strings.Cut(part, "\n")
		body = strings.TrimSuffix(strings.TrimSpace(body), ";")
		require.NotEmpty(t, body, "invariant %s has a query", name)
		out = append(out, invariant{name: strings.TrimSpace(name), sql: body})
	}
	require.NotEmpty(t, out, "%s names its queries", invariantsFile)
	return out
}

// violations runs every invariant in one round trip and describes the rows that break them.
func violations(ctx context.Context, pool *pgxpool.Pool, invs []invariant) ([]string, error) {
	batch := &pgx.Batch{}
	for _, inv := range invs {
		batch.Queue(inv.sql)
	}
	br := pool.SendBatch(ctx, batch)
	defer func() { _ = br.Close() }()
	var out []string
	for _, inv := range invs {
		rows, err := br.Query()
		if err != nil {
			return nil, fmt.Errorf("invariant %s: %w", inv.name, err)
		}
		for rows.Next() {
			vals, err := rows.Values()
			if err != nil {
				rows.Close()
				return nil, fmt.Errorf("invariant %s: %w", inv.name, err)
			}
			fields := rows.FieldDescriptions()
			cols := make([]string, len(vals))
			for i, v := range vals {
				cols[i] = fmt.Sprintf("%s=%v", fields[i].Name, v)
			}
			out = append(out, inv.name+": "+strings.Join(cols, " "))
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("invariant %s: %w", inv.name, err)
		}
	}
	return out, nil
}

// invariantSeedsEnv adds seeds to the random walks, to reproduce a failure or explore more:
// CORTEXQ_INVARIANT_SEEDS=17,42.
const invariantSeedsEnv = "CORTEXQ_INVARIANT_SEEDS"

func TestInvariant(t *testing.T) {
	t.Run("RandomOperations", func(t *testing.T) {
		invs := loadInvariants(t)
		type walkCase struct {
			name string
			seed int64
			ops  int
			opts []func(*Config)
		}
		shortWindow := func(c *Config) { c.LateResultWindow = 10 * time.Minute }
		cases := []walkCase{
			{"Window", 20260101, 400, nil},
			{"ShortWindow", 20260202, 400, []func(*Config){shortWindow}},
			{"NoWindow", 20260303, 400, []func(*Config){noWindow}},
		}
		if env := os.Getenv(invariantSeedsEnv); env != "" {
			for s := range strings.SplitSeq(env, ",") {
				seed, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
				require.NoError(t, err, "%s", invariantSeedsEnv)
				cases = append(cases,
					walkCase{"Window", seed, 400, nil},
					walkCase{"ShortWindow", seed, 400, []func(*Config){shortWindow}},
					walkCase{"NoWindow", seed, 400, []func(*Config){noWindow}})
			}
		}
		for _, c := range cases {
			t.Run(fmt.Sprintf("%sSeed%d", c.name, c.seed), func(t *testing.T) {
				f := newFixture(t, c.opts...)
				t.Logf("seed %d, %d operations (reproduce with %s=%d)", c.seed, c.ops, invariantSeedsEnv, c.seed)
				w := newWalk(f, c.seed, invs)
				w.run(c.ops)
				w.drain()
				if os.Getenv("WALKDUMP") != "" {
					t.Log(strings.Join(w.ops, "\n"))
				}
			})
		}
	})
}

// walk applies random operations to a fixture and checks the invariants after each one.
type walk struct {
	f      *fixture
	rng    *rand.Rand
	invs   []invariant
	seed   int64
	tasks  []int64
	leases []Lease // every lease handed out, oldest first
	other  int32   // a second service: results naming it are for the wrong service
	step   int
	op     string
	ops    []string // what each step did
	// replicas are two stores on the database, r1 (the fixture's) and r2, each with what it
	// holds in memory: its stock of reservations not handed out, and its hand-outs not yet
	// attributed. A crash forgets both.
	replicas []*walkReplica
	handed   []HandOut // every hand-out, oldest first
}

// walkReplica is one replica of the walk: a store and its memory.
type walkReplica struct {
	store   *Store
	stock   []Reserved
	pending []HandOut
}

// stocked reports whether the replica holds the task reserved and not handed out.
func (r *walkReplica) stocked(id int64) bool {
	return slices.ContainsFunc(r.stock, func(x Reserved) bool { return x.TaskID == id })
}

// walkWorkers are the walk's worker identities; a stranger never leases anything.
var walkWorkers = []string{"w0", "w1", "w2", "w3", "w4", "w5"}

const walkStranger = "stranger"

func newWalk(f *fixture, seed int64, invs []invariant) *walk {
	w := &walk{f: f, rng: rand.New(rand.NewSource(seed)), invs: invs, seed: seed}
	for range 30 {
		w.tasks = append(w.tasks, f.task())
	}
	w.other = f.service("other", 0)
	cfg := f.store.Config()
	cfg.Replica = "r2"
	w.replicas = []*walkReplica{{store: f.store}, {store: New(f.pool, cfg)}}
	return w
}

// walkOps are the walk's operations with their weights.
var walkOps = []struct {
	name   string
	weight int
	do     func(w *walk)
}{
	{"lease", 18, (*walk).lease},
	{"claim", 18, (*walk).claim},
	{"defer", 8, (*walk).deferCause},
	{"unusable", 6, (*walk).unusable},
	{"reap", 10, (*walk).reap},
	{"reap_all", 3, (*walk).reapAll},
	{"forget", 4, (*walk).forget},
	{"rerun", 3, (*walk).rerun},
	{"return", 5, (*walk).giveBack},
	{"advance", 15, (*walk).advance},
	{"reserve", 10, (*walk).reserve},
	{"hand_out", 10, (*walk).handOut},
	{"attribute", 8, (*walk).attribute},
	{"release", 3, (*walk).release},
	{"crash", 2, (*walk).crash},
	{"expire", 3, (*walk).expire},
	{"pause", 2, (*walk).pause},
	{"resume", 2, (*walk).resume},
}

func (w *walk) run(n int) {
	total := 0
	for _, o := range walkOps {
		total += o.weight
	}
	for w.step = 1; w.step <= n; w.step++ {
		pick := w.rng.Intn(total)
		for _, o := range walkOps {
			if pick < o.weight {
				w.op = o.name
				o.do(w)
				break
			}
			pick -= o.weight
		}
		w.check()
	}
}

// note records what the current step did, for the failure report.
func (w *walk) note(format string, args ...any) {
	w.ops = append(w.ops, fmt.Sprintf("step %d %s: ", w.step, w.op)+fmt.Sprintf(format, args...))
}

// fail reports the failing step with the steps before it.
func (w *walk) fail(format string, args ...any) {
	w.f.t.Helper()
	from := max(0, len(w.ops)-15)
	w.f.t.Fatalf("seed %d, step %d (%s): %s\nlast operations:\n  %s", w.seed, w.step, w.op,
		fmt.Sprintf(format, args...), strings.Join(w.ops[from:], "\n  "))
}

func (w *walk) must(err error) {
	w.f.t.Helper()
	if err != nil {
		w.fail("unexpected error: %v", err)
	}
}

func (w *walk) check() {
	w.f.t.Helper()
	bad, err := violations(w.f.ctx, w.f.pool, w.invs)
	w.must(err)
	if len(bad) > 0 {
		w.fail("invariants violated:\n  %s", strings.Join(bad, "\n  "))
	}
}

func (w *walk) anyTask() int64 { return w.tasks[w.rng.Intn(len(w.tasks))] }

// target picks a task and a worker to reply: mostly a worker that holds or held an attempt of
// the task, sometimes any worker of the pool, a stranger, or a task id that does not exist.
func (w *walk) target() (int64, string) {
	r := w.rng.Intn(100)
	if len(w.handed) > 0 && w.rng.Intn(4) == 0 {
		// A worker given a reserved task: recorded, about to be, or never (its replica crashed).
		h := w.handed[len(w.handed)-1-w.rng.Intn(min(8, len(w.handed)))]
		return h.TaskID, h.Worker
	}
	switch {
	case r < 45 && len(w.leases) > 0:
		l := w.leases[len(w.leases)-1-w.rng.Intn(min(8, len(w.leases)))]
		return l.TaskID, l.Worker
	case r < 70 && len(w.leases) > 0:
		l := w.leases[w.rng.Intn(len(w.leases))]
		return l.TaskID, l.Worker
	case r < 85:
		return w.anyTask(), walkWorkers[w.rng.Intn(len(walkWorkers))]
	case r < 96:
		return w.anyTask(), walkStranger
	default:
		return []int64{-1, 0, w.tasks[len(w.tasks)-1] + 1000}[w.rng.Intn(3)], walkWorkers[0]
	}
}

func (w *walk) lease() {
	workers := slices.Clone(walkWorkers)
	w.rng.Shuffle(len(workers), func(i, j int) { workers[i], workers[j] = workers[j], workers[i] })
	workers = workers[:1+w.rng.Intn(3)]
	timeout := []time.Duration{0, time.Minute, 10 * time.Minute, 2 * time.Hour}[w.rng.Intn(4)]
	leases, err := w.f.store.Lease(w.f.ctx, LeaseRequest{ServiceID: w.f.svc, LeaseTimeout: timeout, Workers: workers})
	w.must(err)
	var got []string
	seen := map[int64]bool{}
	for _, l := range leases {
		got = append(got, fmt.Sprintf("task %d run %d attempt %d to %s (retry %t)", l.TaskID, l.Run, l.Attempt, l.Worker, l.Retry))
		if !slices.Contains(workers, l.Worker) {
			w.fail("lease to %s, who did not ask", l.Worker)
		}
		if seen[l.TaskID] {
			w.fail("task %d leased twice in one batch", l.TaskID)
		}
		seen[l.TaskID] = true
		if !l.Retry {
			var n int
			w.must(w.f.pool.QueryRow(w.f.ctx, `SELECT count(*) FROM dispatch WHERE task_id = $1 AND run < $2 AND $3 = ANY(attempt_workers)`,
				l.TaskID, l.Run, l.Worker).Scan(&n))
			if n > 0 {
				w.fail("task %d run %d handed to %s, who worked an earlier run on record", l.TaskID, l.Run, l.Worker)
			}
		}
	}
	if len(leases) > len(workers) {
		w.fail("%d leases for %d workers", len(leases), len(workers))
	}
	w.leases = append(w.leases, leases...)
	w.note("%v timeout=%v → %v", workers, timeout, got)
}

func (w *walk) randomStatus() queue.Status {
	return []queue.Status{queue.StatusNoProblem, queue.StatusNoProblem, queue.StatusWarning, queue.StatusError,
		queue.StatusFatal, queue.StatusFatal, queue.StatusInvalid}[w.rng.Intn(7)]
}

func (w *walk) cause() []queue.Message {
	if w.rng.Intn(2) == 0 {
		return timeoutCause()
	}
	return shedCause()
}

// reply claims results, through either replica, and checks that each task's recorded status is
// the last result accepted for it, and that an attempt recorded at the claim is on record.
func (w *walk) reply(results []Result, publish PublishFunc) {
	rep := w.replicas[w.rng.Intn(len(w.replicas))]
	ds, err := rep.store.ClaimStocked(w.f.ctx, results, publish, rep.stocked)
	w.must(err)
	if len(ds) != len(results) {
		w.fail("%d decisions for %d results", len(ds), len(results))
	}
	var got []string
	standing := map[int64]queue.Status{}
	for i, d := range ds {
		r := results[i]
		got = append(got, fmt.Sprintf("task %d %s kind %d status %d via %s → %s attempt %d late %q attributed %t %s",
			r.TaskID, r.Worker, r.Kind, r.Status, rep.store.Config().Replica, d.Outcome, d.Attempt, d.Late, d.AttributedAtClaim, d.Reason))
		if d.AttributedAtClaim {
			if rep.stocked(r.TaskID) {
				w.fail("task %d attributed at the claim while its replica holds it unhanded", r.TaskID)
			}
			var n int
			w.must(w.f.pool.QueryRow(w.f.ctx, `SELECT count(*) FROM attempts WHERE task_id = $1 AND run = $2 AND attempt = $3 AND worker = $4`,
				r.TaskID, d.Run, d.Attempt, r.Worker).Scan(&n))
			if n != 1 {
				w.fail("task %d run %d attempt %d attributed at the claim to %s: %d attempts rows", r.TaskID, d.Run, d.Attempt, r.Worker, n)
			}
			w.leases = append(w.leases, Lease{Task: queue.Task{TaskID: r.TaskID, Run: d.Run, ServiceID: d.ServiceID}, Attempt: d.Attempt, Worker: r.Worker})
		}
		switch d.Outcome {
		case OutcomeAccepted:
			if d.Status != r.Status {
				w.fail("accepted status %d for a result of %d", d.Status, r.Status)
			}
			standing[r.TaskID] = d.Status
		case OutcomeFinal:
			standing[r.TaskID] = queue.StatusFatal
		}
	}
	w.note("%s", strings.Join(got, "; "))
	for id, st := range standing {
		if now := w.f.status(id); now != st {
			w.fail("task %d has status %d after its result %d was accepted", id, now, st)
		}
	}
}

func (w *walk) claim() {
	n := 1 + w.rng.Intn(3)
	results := make([]Result, n)
	for i := range results {
		id, worker := w.target()
		r := Result{TaskID: id, Worker: worker, Kind: KindReport, Status: w.randomStatus(),
			Messages: []queue.Message{{Severity: queue.SeverityInfo, Category: "walk", What: fmt.Sprintf("step%d", w.step)}}}
		switch k := w.rng.Intn(10); {
		case k == 0:
			r.Kind, r.Messages = KindRetryable, w.cause()
		case k == 1:
			r.Kind = KindUnusable
		}
		if w.rng.Intn(10) == 0 {
			r.ServiceID = w.other
		}
		results[i] = r
	}
	var publish PublishFunc
	if w.rng.Intn(6) == 0 {
		publish = func(*Decision) error {
			if w.rng.Intn(2) == 0 {
				return errors.New("disk full")
			}
			return nil
		}
	}
	w.reply(results, publish)
}

func (w *walk) deferCause() {
	id, worker := w.target()
	w.reply([]Result{{TaskID: id, Worker: worker, Kind: KindRetryable, Status: queue.StatusFatal, Messages: w.cause()}}, nil)
}

func (w *walk) unusable() {
	id, worker := w.target()
	w.reply([]Result{{TaskID: id, Worker: worker, Kind: KindUnusable}}, nil)
}

func (w *walk) reap() {
	limit := []int{0, 1, 2}[w.rng.Intn(3)]
	sum, err := w.f.store.Reap(w.f.ctx, limit)
	w.must(err)
	w.note("max %d → %+v", limit, sum)
}

func (w *walk) reapAll() {
	sum, err := w.f.store.ReapAll(w.f.ctx)
	w.must(err)
	w.note("%+v", sum)
}

func (w *walk) forget() {
	n, err := w.f.store.Forget(w.f.ctx, w.rng.Intn(2))
	w.must(err)
	w.note("forgot %d", n)
}

func (w *walk) rerun() {
	scope := RerunScope{CorpusID: w.f.corpus, ServiceID: w.f.svc}
	switch w.rng.Intn(4) {
	case 0: // the whole corpus
	case 1, 2:
		all := []queue.Status{queue.StatusTODO, queue.StatusDispatched, queue.StatusNoProblem, queue.StatusWarning,
			queue.StatusError, queue.StatusFatal, queue.StatusInvalid}
		for _, st := range all {
			if w.rng.Intn(3) == 0 {
				scope.Statuses = append(scope.Statuses, st)
			}
		}
		if len(scope.Statuses) == 0 {
			scope.Statuses = []queue.Status{queue.StatusFatal}
		}
	case 3:
		if w.rng.Intn(2) == 0 {
			scope.Category, scope.What = queue.NeverCompleted.Category, queue.NeverCompleted.What
		} else {
			scope.Severity, scope.Category = string(queue.SeverityFatal), "timeout"
		}
	}
	sum, err := w.f.store.Rerun(w.f.ctx, scope)
	w.must(err)
	w.note("statuses %v category %q what %q → %+v", scope.Statuses, scope.Category, scope.What, sum)
}

// giveBack returns one or two leases, recent or not: a lease that moved on is left alone.
func (w *walk) giveBack() {
	if len(w.leases) == 0 {
		w.note("no lease to return")
		return
	}
	var back []Lease
	for range 1 + w.rng.Intn(2) {
		if w.rng.Intn(3) > 0 {
			back = append(back, w.leases[len(w.leases)-1-w.rng.Intn(min(4, len(w.leases)))])
		} else {
			back = append(back, w.leases[w.rng.Intn(len(w.leases))])
		}
	}
	if w.rng.Intn(4) == 0 {
		back = append(back, back[0]) // a lease reported unroutable twice
	}
	n, err := w.f.store.Return(w.f.ctx, back)
	w.must(err)
	var what []string
	distinct := map[attemptID]bool{}
	for _, l := range back {
		what = append(what, fmt.Sprintf("task %d run %d attempt %d of %s", l.TaskID, l.Run, l.Attempt, l.Worker))
		distinct[attemptID{l.TaskID, l.Run, l.Attempt}] = true
	}
	w.note("%v → returned %d", what, n)
	if n > len(distinct) {
		w.fail("%d leases returned of %d distinct ones", n, len(distinct))
	}
}

func (w *walk) advance() {
	var d time.Duration
	switch r := w.rng.Intn(10); {
	case r < 5:
		d = time.Duration(1+w.rng.Intn(59)) * time.Second
	case r < 8:
		d = time.Duration(1+w.rng.Intn(59)) * time.Minute
	default:
		d = time.Duration(1+w.rng.Intn(3)) * time.Hour
	}
	w.f.clock.Advance(d)
	w.note("%v", d)
}

// drain checks liveness after the walk: workers that answer every lease, and a reaper that runs
// after every lease has expired, finish every task.
func (w *walk) drain() {
	w.op = "drain"
	w.resume()
	for round := range 20 {
		var open int
		w.must(w.f.pool.QueryRow(w.f.ctx, `SELECT count(*) FROM tasks WHERE service_id = $1 AND status >= 0`, w.f.svc).Scan(&open))
		if open == 0 {
			return
		}
		w.step++
		w.f.clock.Advance(12 * time.Hour)
		sum, err := w.f.store.ReapAll(w.f.ctx)
		w.must(err)
		// Fresh names: a rerun task is never handed to a worker of its earlier runs.
		workers := make([]string, open)
		for i := range workers {
			workers[i] = fmt.Sprintf("drain%d.%d", round, i)
		}
		leases, err := w.f.store.Lease(w.f.ctx, LeaseRequest{ServiceID: w.f.svc, Workers: workers})
		w.must(err)
		results := make([]Result, len(leases))
		for i, l := range leases {
			results[i] = Result{TaskID: l.TaskID, Worker: l.Worker, Kind: KindReport, Status: queue.StatusNoProblem}
		}
		w.note("%d open, reaped %+v, %d leased", open, sum, len(leases))
		if len(results) > 0 {
			w.reply(results, nil)
		}
		w.check()
	}
	w.fail("tasks still open after the drain")
}

// replica picks one of the walk's replicas, preferring one for which has(r) holds; nil when none
// does.
func (w *walk) replica(has func(r *walkReplica) bool) (int, *walkReplica) {
	start := w.rng.Intn(len(w.replicas))
	for k := range w.replicas {
		i := (start + k) % len(w.replicas)
		if has(w.replicas[i]) {
			return i, w.replicas[i]
		}
	}
	return -1, nil
}

// reserve has a replica reserve a few tasks into its stock.
func (w *walk) reserve() {
	i := w.rng.Intn(len(w.replicas))
	rep := w.replicas[i]
	max := 1 + w.rng.Intn(4)
	timeout := []time.Duration{0, time.Minute, 10 * time.Minute, 2 * time.Hour}[w.rng.Intn(4)]
	got, err := rep.store.Reserve(w.f.ctx, ReserveRequest{ServiceID: w.f.svc, LeaseTimeout: timeout, Max: max})
	w.must(err)
	if len(got) > max {
		w.fail("%d reservations for at most %d", len(got), max)
	}
	var what []string
	for _, r := range got {
		what = append(what, fmt.Sprintf("task %d run %d attempt %d (retry %t, not to %v)", r.TaskID, r.Run, r.Attempt, r.Retry, r.Exclude))
		var state, replica string
		var workers int
		w.must(w.f.pool.QueryRow(w.f.ctx, `SELECT state, replica, cardinality(attempt_workers) FROM dispatch WHERE task_id = $1 AND run = $2`,
			r.TaskID, r.Run).Scan(&state, &replica, &workers))
		if state != StateReserved || replica != rep.store.Config().Replica || workers != r.Attempt {
			w.fail("task %d reserved by %s: row %s of %s with %d workers", r.TaskID, rep.store.Config().Replica, state, replica, workers)
		}
	}
	rep.stock = append(rep.stock, got...)
	w.note("r%d max %d timeout %v → %v", i+1, max, timeout, what)
}

// handOut gives a few of a replica's stocked tasks to workers, in memory: nothing is written
// until the attribution.
func (w *walk) handOut() {
	i, rep := w.replica(func(r *walkReplica) bool { return len(r.stock) > 0 })
	if rep == nil {
		w.note("nothing stocked")
		return
	}
	var what []string
	for range 1 + w.rng.Intn(3) {
		if len(rep.stock) == 0 {
			break
		}
		k := w.rng.Intn(len(rep.stock))
		r := rep.stock[k]
		worker := walkWorkers[w.rng.Intn(len(walkWorkers))]
		if !r.For(worker) {
			what = append(what, fmt.Sprintf("task %d not to %s", r.TaskID, worker))
			continue
		}
		var n int
		w.must(w.f.pool.QueryRow(w.f.ctx, `SELECT count(*) FROM dispatch WHERE task_id = $1 AND run < $2 AND $3 = ANY(attempt_workers)`,
			r.TaskID, r.Run, worker).Scan(&n))
		if n > 0 {
			w.fail("task %d run %d may go to %s, who worked an earlier run on record", r.TaskID, r.Run, worker)
		}
		rep.stock = slices.Delete(rep.stock, k, k+1)
		h := r.HandOut(worker)
		rep.pending = append(rep.pending, h)
		w.handed = append(w.handed, h)
		what = append(what, fmt.Sprintf("task %d run %d attempt %d to %s", h.TaskID, h.Run, h.Attempt, h.Worker))
	}
	w.note("r%d %v", i+1, what)
}

// attribute records some of a replica's hand-outs: each whose reservation still stands goes in
// flight to its worker.
func (w *walk) attribute() {
	i, rep := w.replica(func(r *walkReplica) bool { return len(r.pending) > 0 })
	if rep == nil {
		w.note("nothing handed out")
		return
	}
	n := 1 + w.rng.Intn(len(rep.pending))
	batch := slices.Clone(rep.pending[:n])
	rep.pending = slices.Delete(rep.pending, 0, n)
	leases, err := rep.store.Attribute(w.f.ctx, batch)
	w.must(err)
	var got []string
	for _, l := range leases {
		if !slices.ContainsFunc(batch, func(h HandOut) bool {
			return h.TaskID == l.TaskID && h.Run == l.Run && h.Attempt == l.Attempt && h.Worker == l.Worker
		}) {
			w.fail("attributed task %d run %d attempt %d to %s, no hand-out of the batch", l.TaskID, l.Run, l.Attempt, l.Worker)
		}
		got = append(got, fmt.Sprintf("task %d run %d attempt %d to %s", l.TaskID, l.Run, l.Attempt, l.Worker))
	}
	w.leases = append(w.leases, leases...)
	w.note("r%d %d hand-outs → %v", i+1, len(batch), got)
}

// release gives back some of a replica's stock.
func (w *walk) release() {
	i, rep := w.replica(func(r *walkReplica) bool { return len(r.stock) > 0 })
	if rep == nil {
		w.note("nothing stocked")
		return
	}
	n := 1 + w.rng.Intn(len(rep.stock))
	back := slices.Clone(rep.stock[:n])
	rep.stock = slices.Delete(rep.stock, 0, n)
	released, err := rep.store.Release(w.f.ctx, back)
	w.must(err)
	if released > len(back) {
		w.fail("%d released of %d", released, len(back))
	}
	w.note("r%d %d → released %d", i+1, len(back), released)
}

// crash forgets a replica's memory: its reservations stay until their deadline. A result for
// one it had handed out is then claimed through the other replica, which records its attempt.
func (w *walk) crash() {
	i := w.rng.Intn(len(w.replicas))
	rep := w.replicas[i]
	lost := rep.pending
	w.note("r%d forgets %d stocked, %d handed out", i+1, len(rep.stock), len(lost))
	rep.stock, rep.pending = nil, nil
	if len(lost) == 0 {
		return
	}
	h := lost[w.rng.Intn(len(lost))]
	var state string
	var workers []string
	err := w.f.pool.QueryRow(w.f.ctx, `SELECT state, attempt_workers FROM dispatch WHERE task_id = $1 AND run = $2`, h.TaskID, h.Run).Scan(&state, &workers)
	if errors.Is(err, pgx.ErrNoRows) {
		return
	}
	w.must(err)
	open := state == StateReserved && len(workers) == h.Attempt && !slices.Contains(workers, h.Worker)
	var tasks int
	w.must(w.f.pool.QueryRow(w.f.ctx, `SELECT count(*) FROM tasks WHERE id = $1 AND run = $2`, h.TaskID, h.Run).Scan(&tasks))
	other := w.replicas[1-i]
	w.op = "crash_result"
	ds, err := other.store.ClaimStocked(w.f.ctx, []Result{{TaskID: h.TaskID, Worker: h.Worker, Kind: KindReport,
		Status: queue.StatusNoProblem}}, nil, other.stocked)
	w.must(err)
	d := ds[0]
	w.note("task %d run %d attempt %d from %s (row %s %v) → %s attributed %t %s", h.TaskID, h.Run, h.Attempt, h.Worker,
		state, workers, d.Outcome, d.AttributedAtClaim, d.Reason)
	if open && tasks == 1 && !other.stocked(h.TaskID) {
		if !d.AttributedAtClaim || d.Outcome != OutcomeAccepted || d.Attempt != h.Attempt {
			w.fail("the result of a hand-out whose replica crashed: %s attempt %d attributed %t, want accepted attempt %d recorded at the claim",
				d.Outcome, d.Attempt, d.AttributedAtClaim, h.Attempt)
		}
		if st := w.f.status(h.TaskID); st != queue.StatusNoProblem {
			w.fail("task %d has status %d after its result was accepted", h.TaskID, st)
		}
	}
	if d.AttributedAtClaim {
		w.leases = append(w.leases, Lease{Task: queue.Task{TaskID: h.TaskID, Run: h.Run, ServiceID: w.f.svc}, Attempt: d.Attempt, Worker: h.Worker})
	}
}

// expire moves the clock past the reservation deadline and runs the reaper: every reservation
// made before goes back.
func (w *walk) expire() {
	var open int
	w.must(w.f.pool.QueryRow(w.f.ctx, `SELECT count(*) FROM dispatch WHERE state = 'reserved'`).Scan(&open))
	d := w.f.store.Config().ReservationTTL + time.Duration(1+w.rng.Intn(30))*time.Second
	w.f.clock.Advance(d)
	sum, err := w.f.store.ReapAll(w.f.ctx)
	w.must(err)
	var left int
	w.must(w.f.pool.QueryRow(w.f.ctx, `SELECT count(*) FROM dispatch WHERE state = 'reserved'`).Scan(&left))
	w.note("%v, %d reserved → %+v", d, open, sum)
	if sum.Released != open || left != 0 {
		w.fail("%d reservations past their deadline, %d released, %d left", open, sum.Released, left)
	}
}

// pause blocks the TODO tasks and takes back every reservation of the walk's scope.
func (w *walk) pause() {
	sum, err := w.f.store.Pause(w.f.ctx, Scope{CorpusID: w.f.corpus, ServiceID: w.f.svc})
	w.must(err)
	var left int
	w.must(w.f.pool.QueryRow(w.f.ctx, `SELECT count(*) FROM dispatch WHERE state = 'reserved' AND service_id = $1`, w.f.svc).Scan(&left))
	w.note("%+v", sum)
	if left != 0 {
		w.fail("%d reservations left after a pause", left)
	}
}

func (w *walk) resume() {
	n, err := w.f.store.Resume(w.f.ctx, Scope{CorpusID: w.f.corpus, ServiceID: w.f.svc})
	w.must(err)
	w.note("%d back to TODO", n)
}
