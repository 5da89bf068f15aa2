package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	zmq "github.com/pebbe/zmq4"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/internal/bench"
	"github.com/cortexq/cortexq/queue/base"
	"github.com/cortexq/cortexq/queue/catalog"
	"github.com/cortexq/cortexq/queue/lease"
)

// The fault tests run replicas and workers as subprocesses of the built binary, on loopback, and
// judge the outcome from the database alone. Their rig is:
//
//	faultRig      a migrated database with the echo service, a staged corpus, the processes
//	replicaProc   one `cortexq serve` on fixed ports, killed and started again at will
//	childProc     any subprocess, its output appended to a log file across restarts

// faultService is the service the fault tests' tasks are for; `cortexq worker echo` answers it.
const faultService = "echo"

// faultRig is one fault test's database, corpus and processes.
type faultRig struct {
	t        *testing.T
	ctx      context.Context
	dsn      string
	pool     *pgxpool.Pool
	root     *base.Base
	store    *lease.Store
	dir      string // the test's scratch directory: logs, and the corpus unless placed elsewhere
	corpusID int32
	entries  []string
	replicas []*replicaProc
	workers  []*childProc
}

func newFaultRig(t *testing.T, dsn string) *faultRig {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(dsn)
	require.NoError(t, err)
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	root := base.New(pool, nil, nil)
	r := &faultRig{t: t, ctx: ctx, dsn: dsn, pool: pool, dir: faultDir(t), root: root,
		store: root.Lease(lease.Config{Replica: "fault-test"})}
	_, err = bench.EnsureService(ctx, r.root, faultService)
	require.NoError(t, err)
	t.Cleanup(r.stopAll)
	return r
}

// faultDir is a rig's directory: a temporary one, or with CORTEXQ_FAULT_KEEP=DIR a new one under
// DIR, kept after the test with its processes' logs (to read where a fault's time went).
func faultDir(t *testing.T) string {
	keep := os.Getenv("CORTEXQ_FAULT_KEEP")
	if keep == "" {
		return t.TempDir()
	}
	dir, err := os.MkdirTemp(keep, "rig-")
	require.NoError(t, err)
	t.Logf("fault rig: keeping %s", dir)
	return dir
}

// stage writes n source archives of size payload bytes under dir (the rig's directory when
// empty) and imports them as corpus name.
func (r *faultRig) stage(name, dir string, n, size int) []string {
	r.t.Helper()
	if dir == "" {
		dir = filepath.Join(r.dir, "corpus")
	}
	entries, err := bench.StageCorpus(r.ctx, dir, n, size)
	require.NoError(r.t, err)
	svc, err := bench.EnsureService(r.ctx, r.root, faultService)
	require.NoError(r.t, err)
	sum, err := r.root.Catalog.Import(r.ctx, catalog.ImportRequest{Corpus: name, CorpusPath: dir, ServiceID: svc.ID, Entries: entries})
	require.NoError(r.t, err)
	require.Equal(r.t, n, int(sum.Added))
	r.corpusID, r.entries = sum.CorpusID, entries
	return entries
}

// loopbackPortsTaken are the ports handed out in this process, so no two replicas share one.
var loopbackPortsTaken sync.Map

// loopbackPort returns a loopback port that is free now, from a range below the kernel's
// ephemeral ports, and never the same one twice in this process: a replica keeps its ports
// across restarts, an ephemeral port could be taken by some outgoing connection meanwhile, and
// two ports asked for in a row from the kernel can be one and the same.
func loopbackPort(t *testing.T) int {
	t.Helper()
	for range 1000 {
		p := 20000 + rand.IntN(10000)
		if _, taken := loopbackPortsTaken.LoadOrStore(p, true); taken {
			continue
		}
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		ln.Close()
		return p
	}
	t.Fatal("no free loopback port")
	return 0
}

// addReplica prepares (does not start) a replica named name with its own fixed ports. Every
// replica reaps each second and leases for 5 s unless extra says otherwise (a later flag wins).
func (r *faultRig) addReplica(name string, extra ...string) *replicaProc {
	r.t.Helper()
	rp := &replicaProc{
		name:       name,
		ventilator: fmt.Sprintf("tcp://127.0.0.1:%d", loopbackPort(r.t)),
		sink:       fmt.Sprintf("tcp://127.0.0.1:%d", loopbackPort(r.t)),
		http:       fmt.Sprintf("127.0.0.1:%d", loopbackPort(r.t)),
	}
	args := []string{"--database-url", r.dsn, "serve",
		"--replica", name, "--ventilator", rp.ventilator, "--sink", rp.sink, "--http", rp.http,
		"--reap-interval", "1s", "--lease-timeout", "5s", "--db-pool-size", "6",
		"--tcp-keepalive-idle", "0"}
	rp.childProc = r.child("replica-"+name, append(args, extra...)...)
	r.replicas = append(r.replicas, rp)
	return rp
}

// startWorkers starts procs `cortexq worker echo` processes of concurrency loops each, every loop
// connected to the ventilator and sink of every replica of the rig.
func (r *faultRig) startWorkers(procs, concurrency int) {
	r.t.Helper()
	r.startWorkersOn("w", procs, concurrency, r.replicas...)
}

// startWorkersOn starts procs `cortexq worker echo` processes of concurrency loops each, every
// loop connected to the given replicas only; set names their logs and identities (worker-<set><i>,
// fault-<set><i>), so that sets started one after another stay apart.
func (r *faultRig) startWorkersOn(set string, procs, concurrency int, replicas ...*replicaProc) {
	r.t.Helper()
	var vents, sinks []string
	for _, rp := range replicas {
		vents = append(vents, rp.ventilator)
		sinks = append(sinks, rp.sink)
	}
	for i := range procs {
		name := fmt.Sprintf("worker-%d", i)
		if set != "w" {
			name = fmt.Sprintf("worker-%s%d", set, i)
		}
		w := r.child(name, "--log-level", "warn", "worker", "echo",
			"--service", faultService, "--identity", fmt.Sprintf("fault-%s%d", set, i),
			"--concurrency", strconv.Itoa(concurrency),
			"--ventilator", strings.Join(vents, ","), "--sink", strings.Join(sinks, ","),
			"--throttle", "100ms", "--io-timeout", "3s")
		w.start()
		r.workers = append(r.workers, w)
	}
}

// startReplicas starts every replica and waits until each serves /healthz.
func (r *faultRig) startReplicas() {
	r.t.Helper()
	for _, rp := range r.replicas {
		rp.start()
	}
	for _, rp := range r.replicas {
		rp.waitHealthy(r.t, 60*time.Second)
	}
}

// stopAll stops the workers, then the replicas, with SIGTERM (SIGKILL after a while), and shows
// the logs of a failed test.
func (r *faultRig) stopAll() {
	for _, w := range r.workers {
		w.stop(syscall.SIGTERM, 10*time.Second)
	}
	for _, rp := range r.replicas {
		rp.stop(syscall.SIGTERM, 30*time.Second)
	}
	if r.t.Failed() {
		for _, p := range append(faultProcs(r.replicas), r.workers...) {
			r.t.Logf("--- %s (last lines of %s):\n%s", p.name, p.logPath, faultTail(p.log(), 6000))
		}
	}
}

func faultProcs(rs []*replicaProc) []*childProc {
	out := make([]*childProc, len(rs))
	for i, r := range rs {
		out[i] = r.childProc
	}
	return out
}

func faultTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// child prepares a subprocess of the binary logging to <dir>/<name>.log.
func (r *faultRig) child(name string, args ...string) *childProc {
	return &childProc{t: r.t, name: name, bin: binary(r.t), args: args,
		logPath: filepath.Join(r.dir, name+".log")}
}

// childProc is a subprocess that can be started again after it exits; each run's output is
// appended to one log file (a file, not a pipe: a process killed with SIGKILL leaves nothing
// behind to copy).
type childProc struct {
	t       *testing.T
	name    string
	bin     string
	args    []string
	logPath string

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	starts int
}

// start starts the process; it must not be running.
func (p *childProc) start() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done != nil {
		select {
		case <-p.done:
		default:
			p.t.Fatalf("%s: started while running", p.name)
		}
	}
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(p.t, err)
	defer f.Close()
	p.starts++
	fmt.Fprintf(f, "=== fault test: start %d of %s at %s\n", p.starts, p.name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.bin, p.args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CORTEXQ_") && !strings.HasPrefix(kv, "DATABASE_URL=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Stdout, cmd.Stderr = f, f
	// The child dies with the test process, whatever ends it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(p.t, cmd.Start(), p.name)
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	p.cmd, p.done = cmd, done
}

// running reports whether the process is running.
func (p *childProc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// current returns the running (or last) command and its done channel.
func (p *childProc) current() (*exec.Cmd, chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd, p.done
}

// kill9 kills the process with SIGKILL and waits until it is gone.
func (p *childProc) kill9() {
	p.t.Helper()
	cmd, done := p.current()
	require.NotNil(p.t, cmd, p.name)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		p.t.Fatalf("%s: still running 10 s after SIGKILL", p.name)
	}
}

// wait waits up to timeout for the process to exit; it reports the exit code (-1 when killed by
// a signal) and whether it exited.
func (p *childProc) wait(timeout time.Duration) (code int, exited bool) {
	cmd, done := p.current()
	if cmd == nil {
		return 0, false
	}
	select {
	case <-done:
		return cmd.ProcessState.ExitCode(), true
	case <-time.After(timeout):
		return 0, false
	}
}

// stop sends sig to a running process and waits up to timeout, then kills it.
func (p *childProc) stop(sig os.Signal, timeout time.Duration) {
	cmd, done := p.current()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(timeout):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
	}
}

// log returns everything the process's runs wrote.
func (p *childProc) log() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// replicaProc is one `cortexq serve` subprocess with fixed endpoints.
type replicaProc struct {
	*childProc
	name             string
	ventilator, sink string // tcp:// endpoints
	http             string // host:port of /metrics and /healthz
}

// healthy reports whether /healthz answers 200.
func (rp *replicaProc) healthy() bool {
	code, _, err := faultGet("http://" + rp.http + "/healthz")
	return err == nil && code == http.StatusOK
}

// waitHealthy waits until the replica serves /healthz with 200, failing the test after timeout
// or when the process exits.
func (rp *replicaProc) waitHealthy(t *testing.T, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !rp.healthy() {
		if !rp.running() {
			t.Fatalf("%s exited before it became healthy:\n%s", rp.name, faultTail(rp.log(), 4000))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not healthy after %s:\n%s", rp.name, timeout, faultTail(rp.log(), 4000))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// metric sums the samples of a metric family on the replica's /metrics (labels ignored).
func (rp *replicaProc) metric(name string) (float64, error) {
	code, body, err := faultGet("http://" + rp.http + "/metrics")
	if err != nil {
		return 0, err
	}
	if code != http.StatusOK {
		return 0, fmt.Errorf("/metrics: status %d", code)
	}
	var sum float64
	found := false
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		if !strings.HasPrefix(rest, " ") && !strings.HasPrefix(rest, "{") {
			continue
		}
		fields := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, fmt.Errorf("metric %s: %w", line, err)
		}
		sum += v
		found = true
	}
	if !found {
		return 0, fmt.Errorf("no metric %s", name)
	}
	return sum, nil
}

// faultGet fetches url with a short timeout.
func faultGet(url string) (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// faultProgress counts the corpus's tasks by state.
type faultProgress struct {
	total, todo, dispatched, terminal, noProblem, fatal int
}

func (p faultProgress) String() string {
	return fmt.Sprintf("%d tasks: %d TODO, %d dispatched, %d terminal (%d NoProblem, %d Fatal)",
		p.total, p.todo, p.dispatched, p.terminal, p.noProblem, p.fatal)
}

// progress reads the corpus's progress; it fails while the database is away.
func (r *faultRig) progress() (faultProgress, error) {
	var p faultProgress
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	defer cancel()
	err := r.pool.QueryRow(ctx, `
		SELECT count(*), count(*) FILTER (WHERE status = 0), count(*) FILTER (WHERE status = 1),
		       count(*) FILTER (WHERE status < 0 AND status <> -6),
		       count(*) FILTER (WHERE status = -1), count(*) FILTER (WHERE status = -4)
		FROM tasks WHERE corpus_id = $1`, r.corpusID).
		Scan(&p.total, &p.todo, &p.dispatched, &p.terminal, &p.noProblem, &p.fatal)
	return p, err
}

// waitFor polls the corpus's progress every 200 ms until done says so, calling tick (when not
// nil) on each poll; it fails the test after timeout. Database errors are retried (it may be
// restarting).
func (r *faultRig) waitFor(what string, timeout time.Duration, done func(faultProgress) bool, tick func(faultProgress)) faultProgress {
	r.t.Helper()
	deadline := time.Now().Add(timeout)
	var last faultProgress
	var lastErr error
	for {
		p, err := r.progress()
		if err == nil {
			last, lastErr = p, nil
			if done(p) {
				return p
			}
			if tick != nil {
				tick(p)
			}
		} else {
			lastErr = err
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%s: not reached within %s; last progress: %v (error %v)", what, timeout, last, lastErr)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// allTerminal is a waitFor condition: every task has a final status.
func allTerminal(p faultProgress) bool { return p.total > 0 && p.terminal == p.total }

// scalar runs a query returning one number.
func (r *faultRig) scalar(query string, args ...any) (float64, error) {
	ctx, cancel := context.WithTimeout(r.ctx, 30*time.Second)
	defer cancel()
	var v float64
	err := r.pool.QueryRow(ctx, query, args...).Scan(&v)
	return v, err
}

func (r *faultRig) mustScalar(query string, args ...any) float64 {
	r.t.Helper()
	v, err := r.scalar(query, args...)
	require.NoError(r.t, err, query)
	return v
}

// dbNow reads the database clock.
func (r *faultRig) dbNow() time.Time {
	r.t.Helper()
	now, err := r.store.DatabaseNow(r.ctx)
	require.NoError(r.t, err)
	return now
}

// overdue reports how many seconds the most overdue lease of a dispatched task is past its
// deadline (0 when none is).
func (r *faultRig) overdue() (float64, error) {
	return r.scalar(`
		SELECT coalesce(extract(epoch FROM max(now() - d.deadline)), 0)::float8
		FROM dispatch d JOIN tasks t ON t.id = d.task_id AND t.run = d.run
		WHERE d.state = 'in_flight' AND t.status = 1 AND d.deadline < now() AND t.corpus_id = $1`, r.corpusID)
}

// faultInvariants are the named invariant queries of sql/audit/invariants.sql: each returns the
// rows that break its rule.
func faultInvariants(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "sql", "audit", "invariants.sql"))
	require.NoError(t, err)
	out := map[string]string{}
	var name string
	var body strings.Builder
	flush := func() {
		if name != "" {
			out[name] = strings.TrimSuffix(strings.TrimSpace(body.String()), ";")
		}
		body.Reset()
	}
	for _, line := range strings.Split(string(b), "\n") {
		if n, ok := strings.CutPrefix(line, "-- name: "); ok {
			flush()
			name = strings.Fields(n)[0]
			continue
		}
		if strings.HasPrefix(strings.TrimSpace(line), "--") {
			continue
		}
		body.WriteString(line + "\n")
	}
	flush()
	require.NotEmpty(t, out, "invariants.sql names its queries")
	return out
}

// violations runs every invariant query and returns, by name, how many rows broke it.
func (r *faultRig) violations() (map[string]int, error) {
	bad := map[string]int{}
	for name, q := range faultInvariants(r.t) {
		n, err := r.scalar("SELECT count(*) FROM (\n" + q + "\n) AS v")
		if err != nil {
			return nil, fmt.Errorf("invariant %s: %w", name, err)
		}
		if n > 0 {
			bad[name] = int(n)
		}
	}
	return bad, nil
}

// checkInvariants requires every invariant to hold.
func (r *faultRig) checkInvariants() {
	r.t.Helper()
	bad, err := r.violations()
	require.NoError(r.t, err)
	require.Empty(r.t, bad, "invariants of sql/audit/invariants.sql broken (rows per rule)")
}

// faultAudit is what the attempts table says about the corpus, once every task is terminal.
type faultAudit struct {
	attempts      int // attempts rows
	retried       int // tasks with more than one attempt
	expired       int // attempts whose lease expired
	deadLettered  int // tasks dead-lettered (a stand-in Fatal) with no result since
	openAttempts  int // attempts with no outcome (a newer attempt's result already stood)
	notExactlyOne int // tasks whose final result is not recorded exactly once (must be 0)
}

// audit checks, for every task of the corpus, that its final result is recorded exactly once in
// its run: a result task has exactly one accepted attempt, with the task's status, and a kept
// dispatch row names that attempt; a dead-lettered task has no accepted attempt, a
// dead_lettered one, and status Fatal.
func (r *faultRig) audit() faultAudit {
	r.t.Helper()
	var a faultAudit
	err := r.pool.QueryRow(r.ctx, `
		WITH per_task AS (
			SELECT t.id, t.status,
			       count(a.attempt) AS attempts,
			       count(a.attempt) FILTER (WHERE a.outcome = 'accepted') AS accepted,
			       min(a.attempt) FILTER (WHERE a.outcome = 'accepted') AS accepted_attempt,
			       min(a.status) FILTER (WHERE a.outcome = 'accepted') AS accepted_status,
			       count(a.attempt) FILTER (WHERE a.outcome = 'expired') AS expired,
			       count(a.attempt) FILTER (WHERE a.outcome = 'dead_lettered') AS dead,
			       count(a.attempt) FILTER (WHERE a.outcome IS NULL) AS open
			FROM tasks t LEFT JOIN attempts a ON a.task_id = t.id AND a.run = t.run
			WHERE t.corpus_id = $1
			GROUP BY t.id, t.status)
		SELECT coalesce(sum(p.attempts), 0), count(*) FILTER (WHERE p.attempts > 1),
		       coalesce(sum(p.expired), 0), count(*) FILTER (WHERE p.accepted = 0 AND p.dead > 0),
		       coalesce(sum(p.open), 0),
		       count(*) FILTER (WHERE NOT (
		           (p.accepted = 1 AND p.accepted_status = p.status
		            AND (d.task_id IS NULL OR d.finished_attempt = p.accepted_attempt))
		        OR (p.accepted = 0 AND p.dead > 0 AND p.status = -4)))
		FROM per_task p
		LEFT JOIN tasks t ON t.id = p.id
		LEFT JOIN dispatch d ON d.task_id = p.id AND d.run = t.run`, r.corpusID).
		Scan(&a.attempts, &a.retried, &a.expired, &a.deadLettered, &a.openAttempts, &a.notExactlyOne)
	require.NoError(r.t, err)
	return a
}

// checkFinished requires the end state every fault test wants: every task terminal, no
// invariant broken, each final result recorded exactly once, and every NoProblem task's result
// archive identical to its source. It returns the audit.
func (r *faultRig) checkFinished() (faultProgress, faultAudit) {
	r.t.Helper()
	p, err := r.progress()
	require.NoError(r.t, err)
	require.Equal(r.t, p.total, p.terminal, "every task terminal: %v", p)
	r.checkInvariants()
	a := r.audit()
	require.Zero(r.t, a.notExactlyOne, "tasks whose final result is not recorded exactly once: %+v", a)
	if p.noProblem == p.total {
		bad, first := bench.ByteIdentical(r.entries, faultService)
		if bad > 0 {
			r.logHistoryOfMissingArchives(3)
		}
		require.Zero(r.t, bad, "result archives identical to their sources: %v", first)
	}
	return p, a
}

// logHistoryOfMissingArchives logs, for up to n tasks whose result archive is missing, their
// attempts and dispatch rows: what a failure needs to be understood after the database is gone.
func (r *faultRig) logHistoryOfMissingArchives(n int) {
	for _, e := range r.entries {
		if n == 0 {
			return
		}
		if _, err := os.Stat(filepath.Join(filepath.Dir(e), faultService+".zip")); err == nil {
			continue
		}
		n--
		rows, err := r.pool.Query(r.ctx, `SELECT 'attempt' AS kind, row_to_json(a)::text FROM attempts a JOIN tasks t ON t.id = a.task_id WHERE t.entry = $1
			UNION ALL SELECT 'dispatch', row_to_json(d)::text FROM dispatch d JOIN tasks t ON t.id = d.task_id WHERE t.entry = $1
			UNION ALL SELECT 'task', row_to_json(t)::text FROM tasks t WHERE t.entry = $1`, e)
		if err != nil {
			r.t.Logf("history of %s: %v", e, err)
			continue
		}
		for rows.Next() {
			var kind, row string
			if err := rows.Scan(&kind, &row); err == nil {
				r.t.Logf("missing archive %s: %s %s", e, kind, row)
			}
		}
		rows.Close()
		if names, err := os.ReadDir(filepath.Dir(e)); err == nil {
			for _, f := range names {
				r.t.Logf("missing archive %s: beside it: %s", e, f.Name())
			}
		}
	}
}

// leftoverTemps counts temp archives left beside the corpus's entries (a replica killed between
// writing a result and claiming it leaves its temp file).
func (r *faultRig) leftoverTemps() int {
	n := 0
	for _, e := range r.entries {
		m, _ := filepath.Glob(filepath.Join(filepath.Dir(e), "."+faultService+".zip.tmp-*"))
		n += len(m)
	}
	return n
}

// blackHole leases up to n tasks on a raw DEALER connected to every replica's ventilator, reads
// their payloads and never answers: their leases can only end by expiring. It returns the ids it
// got.
func blackHole(t *testing.T, replicas []*replicaProc, n int, timeout time.Duration) []int64 {
	t.Helper()
	d, err := zmq.NewSocket(zmq.DEALER)
	require.NoError(t, err)
	defer d.Close()
	require.NoError(t, d.SetLinger(0))
	require.NoError(t, d.SetIdentity(fmt.Sprintf("fault-black-hole-%d", rand.Int64())))
	require.NoError(t, d.SetRcvtimeo(time.Second))
	for _, rp := range replicas {
		require.NoError(t, d.Connect(rp.ventilator))
	}
	var ids []int64
	deadline := time.Now().Add(timeout)
	for len(ids) < n && time.Now().Before(deadline) {
		if _, err := d.Send(faultService, 0); err != nil {
			continue
		}
		msg, err := d.RecvMessageBytes(0)
		if err != nil || len(msg) == 0 {
			continue
		}
		id, err := strconv.ParseInt(string(msg[0]), 10, 64)
		if err != nil || id == 0 {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		ids = append(ids, id)
	}
	require.Len(t, ids, n, "the black hole leased its tasks within %s", timeout)
	return ids
}

// countLines counts the lines of s containing substr.
func faultCountLines(s, substr string) int {
	n := 0
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, substr) {
			n++
		}
	}
	return n
}
