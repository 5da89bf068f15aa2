package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/internal/bench"
	"github.com/cortexq/cortexq/queue/queuetest"
)

// process is a cortexq subprocess that runs until stopped, with its output collected.
type process struct {
	t      *testing.T
	cmd    *exec.Cmd
	mu     sync.Mutex
	stderr bytes.Buffer
	done   chan struct{}
	err    error
}

// startWeb starts `cortexq web` with args on a free loopback port and waits until its
// dashboard answers; it returns the process and the dashboard's base URL.
func (d *testDB) startWeb(args ...string) (*process, string) {
	d.t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", loopbackPort(d.t))
	web := d.start(append(append([]string{"web"}, args...), "--listen", addr)...)
	require.Eventually(d.t, func() bool {
		resp, err := http.Get("http://" + addr + "/")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	}, 30*time.Second, 100*time.Millisecond, "the dashboard answers: %s", web.log())
	return web, "http://" + addr
}

// start starts the binary with args in the environment of d.
func (d *testDB) start(args ...string) *process {
	d.t.Helper()
	p := &process{t: d.t, done: make(chan struct{})}
	p.cmd = exec.Command(binary(d.t), args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CORTEXQ_") && !strings.HasPrefix(kv, "DATABASE_URL=") {
			p.cmd.Env = append(p.cmd.Env, kv)
		}
	}
	p.cmd.Env = append(p.cmd.Env, d.env...)
	p.cmd.Stdout = io.Discard
	p.cmd.Stderr = lockedWriter{&p.mu, &p.stderr}
	require.NoError(d.t, p.cmd.Start())
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	d.t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if d.t.Failed() {
			d.t.Logf("cortexq %v stderr:\n%s", args, p.log())
		}
	})
	return p
}

// log returns what the process wrote on stderr so far.
func (p *process) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// stop sends sig and waits up to timeout for the process to exit, returning its exit code.
func (p *process) stop(sig os.Signal, timeout time.Duration) int {
	p.t.Helper()
	require.NoError(p.t, p.cmd.Process.Signal(sig))
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.t.Fatalf("cortexq %v did not exit within %s of %v; stderr:\n%s", p.cmd.Args[1:], timeout, sig, p.log())
	}
	return p.cmd.ProcessState.ExitCode()
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// get fetches url, returning its status code and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// TestServe runs a replica and an echo worker as subprocesses over loopback, and checks that the
// replica converts a corpus, exports its metrics and health, and drains on SIGTERM.
func TestServe(t *testing.T) {
	d := newTestDB(t)
	d.ok("service", "add", "echo")
	const tasks = 24
	entries, err := bench.StageCorpus(d.ctx, t.TempDir(), tasks, 4096)
	require.NoError(t, err)
	d.importList("c", "echo", entries...)

	vent := fmt.Sprintf("tcp://127.0.0.1:%d", loopbackPort(t))
	sink := fmt.Sprintf("tcp://127.0.0.1:%d", loopbackPort(t))
	httpAddr := fmt.Sprintf("127.0.0.1:%d", loopbackPort(t))
	const drainTimeout = 10 * time.Second
	replica := d.start("serve", "--replica", "r-serve-test", "--ventilator", vent, "--sink", sink,
		"--http", httpAddr, "--reap-interval", "500ms", "--drain-timeout", drainTimeout.String())
	base := "http://" + httpAddr

	// /healthz answers once the replica is up.
	exited := func() bool {
		select {
		case <-replica.done:
			return true
		default:
			return false
		}
	}
	require.Eventually(t, func() bool {
		return exited() || cortexq(t, nil, "healthcheck", "--url", base+"/healthz", "--timeout", "1s").code == 0
	}, 30*time.Second, 100*time.Millisecond, "healthz")
	require.False(t, exited(), "the replica exited: %v\n%s", replica.err, replica.log())
	code, body := get(t, base+"/healthz")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok\n", body)

	worker := d.start("worker", "echo", "--service", "echo", "--ventilator", vent, "--sink", sink,
		"--identity", "w-serve-test", "--concurrency", "3", "--throttle", "100ms", "--io-timeout", "10s")
	require.Eventually(t, func() bool {
		return d.count(`SELECT count(*) FROM tasks WHERE status = -1`) == tasks
	}, time.Minute, 100*time.Millisecond, "every task NoProblem; replica:\n%s", replica.log())
	bad, first := bench.ByteIdentical(entries, "echo")
	require.Zero(t, bad, "result archives equal their sources: %v", first)
	require.Equal(t, tasks, d.count(`SELECT count(*) FROM attempts WHERE replica = 'r-serve-test' AND outcome = 'accepted'`))

	// /metrics parses as the Prometheus text format and counts the work. The claims are counted
	// once the claim transaction has committed, a moment after the rows are visible.
	var families map[string]*familyValues
	require.Eventually(t, func() bool {
		families = scrape(t, base+"/metrics")
		v, ok := families["cortexq_claims_total"].value("outcome", "accepted")
		return ok && v == tasks
	}, 10*time.Second, 100*time.Millisecond, "cortexq_claims_total{outcome=accepted}")
	leases, ok := families["cortexq_leases_total"].value()
	require.True(t, ok, "cortexq_leases_total")
	require.Equal(t, float64(tasks), leases)
	inFlight, ok := families["cortexq_in_flight"].value()
	require.True(t, ok, "cortexq_in_flight")
	require.Zero(t, inFlight)
	for _, state := range []string{"reserved", "in_flight", "settling", "queued", "dead_lettered"} {
		n, ok := families["cortexq_dispatch_rows"].value("state", state)
		require.True(t, ok, "cortexq_dispatch_rows{state=%q}", state)
		require.Zero(t, n, state)
	}
	require.Equal(t, "COUNTER", families["cortexq_leases_total"].kind)
	require.Equal(t, "GAUGE", families["cortexq_in_flight"].kind)

	// SIGTERM: the replica stops leasing, drains (nothing is out) and exits 0 in time, with the
	// worker still asking for work.
	require.Equal(t, 0, replica.stop(syscall.SIGTERM, drainTimeout+15*time.Second), replica.log())
	log := replica.log()
	require.Contains(t, log, "stopping: no new leases")
	require.Regexp(t, `INF drained .*unanswered=0`, log)
	require.Contains(t, log, "INF stopped")
	require.Equal(t, 0, worker.stop(syscall.SIGTERM, 30*time.Second), worker.log())
}

// familyValues is one metric family of a scrape: its type, and its samples' values by labels.
type familyValues struct {
	kind    string
	samples []sample
}

type sample struct {
	labels map[string]string
	value  float64
}

// value returns the value of the sample with the given label pairs (name, value, ...).
func (f *familyValues) value(labels ...string) (float64, bool) {
	if f == nil {
		return 0, false
	}
next:
	for _, s := range f.samples {
		for i := 0; i+1 < len(labels); i += 2 {
			if s.labels[labels[i]] != labels[i+1] {
				continue next
			}
		}
		return s.value, true
	}
	return 0, false
}

// scrape fetches a Prometheus text exposition and parses it with expfmt.
func scrape(t *testing.T, url string) map[string]*familyValues {
	t.Helper()
	code, body := get(t, url)
	require.Equal(t, http.StatusOK, code, body)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := parser.TextToMetricFamilies(strings.NewReader(body))
	require.NoError(t, err, "parse /metrics")
	out := make(map[string]*familyValues, len(mfs))
	for name, mf := range mfs {
		f := &familyValues{kind: mf.GetType().String()}
		for _, m := range mf.GetMetric() {
			s := sample{labels: map[string]string{}}
			for _, l := range m.GetLabel() {
				s.labels[l.GetName()] = l.GetValue()
			}
			switch {
			case m.Counter != nil:
				s.value = m.GetCounter().GetValue()
			case m.Gauge != nil:
				s.value = m.GetGauge().GetValue()
			case m.Untyped != nil:
				s.value = m.GetUntyped().GetValue()
			default:
				continue // histograms and summaries are not looked at here
			}
			f.samples = append(f.samples, s)
		}
		out[name] = f
	}
	return out
}

// TestServeRefusesAnUnmigratedDatabase checks that serve (and the other commands on the database)
// say in one line what to do when the schema is missing or behind, and exit non-zero before serve
// binds anything.
func TestServeRefusesAnUnmigratedDatabase(t *testing.T) {
	serve := func(t *testing.T, env []string) result {
		return cortexq(t, env, "serve", "--replica", "r", "--http", "",
			"--ventilator", fmt.Sprintf("tcp://127.0.0.1:%d", loopbackPort(t)),
			"--sink", fmt.Sprintf("tcp://127.0.0.1:%d", loopbackPort(t)))
	}
	const want = "cortexq: the database schema is not up to date: run `cortexq migrate up` first"

	t.Run("EmptyDatabase", func(t *testing.T) {
		t.Parallel()
		cluster := queuetest.Shared(t)
		name := fmt.Sprintf("t_unmigrated_%d_%d", os.Getpid(), time.Now().UnixNano())
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, cluster.AdminDSN())
		require.NoError(t, err)
		defer conn.Close(ctx)
		ident := pgx.Identifier{name}.Sanitize()
		_, err = conn.Exec(ctx, "CREATE DATABASE "+ident+" TEMPLATE template0")
		require.NoError(t, err)
		t.Cleanup(func() {
			conn, err := pgx.Connect(context.Background(), cluster.AdminDSN())
			if err == nil {
				_, err = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)")
				_ = conn.Close(context.Background())
			}
			if err != nil {
				t.Errorf("drop database %s: %v", name, err)
			}
		})
		env := []string{"DATABASE_URL=" + cluster.DSN(name)}
		r := serve(t, env)
		oneLineFailure(t, r, want)
		require.Equal(t, 1, r.code)
		// The other commands on the database say the same, not "relation does not exist".
		for _, args := range [][]string{{"status"}, {"service", "list"}, {"bench", "--tasks", "1"}} {
			r := cortexq(t, env, args...)
			oneLineFailure(t, r, want)
			require.Equal(t, 1, r.code, "%v", args)
		}
		// Checking made nothing: the database is as empty as it was.
		db, err := pgx.Connect(ctx, cluster.DSN(name))
		require.NoError(t, err)
		defer db.Close(ctx)
		rows, err := db.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = 'public'`)
		require.NoError(t, err)
		tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		require.Empty(t, tables)
	})

	t.Run("OneMigrationBehind", func(t *testing.T) {
		d := newTestDB(t)
		d.ok("migrate", "down")
		r := serve(t, d.env)
		oneLineFailure(t, r, want)
		require.Equal(t, 1, r.code)
	})
}
