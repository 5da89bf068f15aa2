package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	zmq "github.com/pebbe/zmq4"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/queue/inspect"
	"github.com/cortexq/cortexq/queue/procstat"
	"github.com/cortexq/cortexq/queue/reports"
	"github.com/cortexq/cortexq/worker"
)

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "measure durable dispatch end to end, and check that nothing was lost",
		Description: "Stages --tasks sample source archives (valid zips whose cortex.log derives NoProblem), imports\n" +
			"them, starts --replicas replicas (`cortexq serve` subprocesses on loopback) and --workers echo\n" +
			"workers connected to all of them, and drains the backlog. It prints tasks/s, MB/s (source +\n" +
			"result), the p50/p99 time from lease to recorded result, the peak number of leases in flight\n" +
			"and the replicas' peak RSS, the CPU per task of the replicas, the workers, PostgreSQL (the\n" +
			"processes of the cluster serving the database only, found from its data directory; none where\n" +
			"they are out of sight, and it says so) and the machine, and the replicas' average lease and\n" +
			"claim batches (with --vs-river, River's CPU per job beside it), then checks the gates: no task\n" +
			"lost, exactly --tasks NoProblem, every result archive byte-identical to its source. A failed\n" +
			"gate exits non-zero. Uses the\n" +
			"database as configured (the embedded one by default), with its durable settings. Its tasks\n" +
			"belong to its own service, bench_echo: unfinished tasks an earlier bench left there (one that\n" +
			"stopped before its backlog drained) are deleted first.",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "tasks", Usage: "source archives to stage and convert", Value: 20000, EnvVars: wired.EnvVars("BENCH_TASKS")},
			&cli.IntFlag{Name: "workers", Usage: "echo workers, each with its own identity", Value: 8, EnvVars: wired.EnvVars("BENCH_WORKERS")},
			&cli.IntFlag{Name: "replicas", Usage: "replicas sharing the database", Value: 1, EnvVars: wired.EnvVars("BENCH_REPLICAS")},
			&cli.IntFlag{Name: "payload-kb", Usage: "payload size of each source archive", Value: 8, EnvVars: wired.EnvVars("BENCH_PAYLOAD_KB")},
			&cli.IntFlag{Name: "messages", Usage: "give each source archive a LaTeXML-shaped cortex.log of about this many messages (loaded bindings, warnings; errors in a third of the tasks: statuses NoProblem, Warning and Error, the same every run); 0: a one-line log, NoProblem", EnvVars: wired.EnvVars("BENCH_MESSAGES")},
			&cli.Float64Flag{Name: "rate", Usage: "hold the workers to this many tasks/s in all (0: as fast as they go)", EnvVars: wired.EnvVars("BENCH_RATE")},
			&cli.IntFlag{Name: "chaos", Usage: "a saboteur leases this many tasks and dies (the reaper must recover them)", EnvVars: wired.EnvVars("BENCH_CHAOS")},
			&cli.DurationFlag{Name: "lease-timeout", Usage: "the replicas' --lease-timeout; 0: 5s with --chaos (recovered quickly), else the serve default", EnvVars: wired.EnvVars("BENCH_LEASE_TIMEOUT")},
			&cli.BoolFlag{Name: "vs-river", Usage: "also run --tasks no-op River jobs on the same database and print the ratio", EnvVars: wired.EnvVars("BENCH_VS_RIVER")},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON line", EnvVars: wired.EnvVars("BENCH_JSON")},
			&cli.StringFlag{Name: "dir", Usage: "where to stage the archives, kept afterwards; empty: a temp dir, removed afterwards (on ext4 without a journal, files created among thousands deleted in the last minutes cost up to 40x the CPU: give runs one after another a --dir each)", EnvVars: wired.EnvVars("BENCH_DIR")},
			&cli.DurationFlag{Name: "deadline", Usage: "give up (a failed gate) after this long", Value: 10 * time.Minute, EnvVars: wired.EnvVars("BENCH_DEADLINE")},
			&cli.IntFlag{Name: "max-in-flight", Usage: "--max-in-flight of each replica", Value: 5000, EnvVars: wired.EnvVars("BENCH_MAX_IN_FLIGHT")},
			&cli.StringFlag{Name: "cpuprofile", Usage: "write a CPU profile of replica 1 to this file (pprof)", EnvVars: wired.EnvVars("BENCH_CPUPROFILE")},
			&cli.StringFlag{Name: "corpora", Usage: "TODO tasks per corpus, comma-separated (e.g. 1000000,100): several corpora of the service, served by fair share; the run stops once --tasks are converted, and reports when each corpus finished (archives are staged only for the tasks a run can reach)", EnvVars: wired.EnvVars("BENCH_CORPORA")},
			&cli.BoolFlag{Name: "statements", Usage: "also report what PostgreSQL ran during the measurement, statement by statement, per task (pg_stat_statements, which the server must preload)", EnvVars: wired.EnvVars("BENCH_STATEMENTS")},
			&cli.BoolFlag{Name: "pin", Usage: "pin PostgreSQL's processes to CPU 0 and the replicas and the workers to the other CPUs for the run (the embedded or a local cluster; at least 2 CPUs), so that they do not compete for cores as they would not where the database has a machine of its own", EnvVars: wired.EnvVars("BENCH_PIN")},
			&cli.DurationFlag{Name: "db-latency", Usage: "run the replicas' database connections through a proxy (toxiproxy, in this process) that adds this latency each way, in whole milliseconds; 0s: through the proxy with none added, the baseline of a ratio; needs a database reached over TCP (--database-url)", EnvVars: wired.EnvVars("BENCH_DB_LATENCY")},
			&cli.StringSliceFlag{Name: "serve-flag", Usage: "an extra flag for every replica's serve command, e.g. --serve-flag=--claimers=1 (repeatable)", EnvVars: wired.EnvVars("BENCH_SERVE_FLAGS")},
		},
		Action: runBench,
	}
}

// Report is what a bench run measured.
type Report struct {
	// Stages is where the measured tasks' time went, and StageBytesPerTask what their stages
	// take in the database (docs/stages.md).
	Stages            *reports.StageSummary `json:"stages,omitempty"`
	StageBytesPerTask float64               `json:"stage_bytes_per_task"`
	Tasks             int                   `json:"tasks"`
	Workers           int                   `json:"workers"`
	Replicas          int                   `json:"replicas"`
	PayloadKB         int                   `json:"payload_kb"`
	// Messages is --messages; with it, the statuses the logs derive (each gated) and what the
	// stored messages take, all in, divided by their number (every run's, in the database).
	Messages         int     `json:"messages,omitempty"`
	Warning          int64   `json:"warning,omitempty"`
	Error            int64   `json:"error,omitempty"`
	StoredMessages   int64   `json:"stored_messages,omitempty"`
	BytesPerMessage  float64 `json:"bytes_per_message,omitempty"`
	Rate             float64 `json:"rate,omitempty"`
	Chaos            int     `json:"chaos,omitempty"`
	Seconds          float64 `json:"seconds"`
	TasksPerSecond   float64 `json:"tasks_per_s"`
	MBPerSecond      float64 `json:"mb_per_s"`
	P50Millis        float64 `json:"p50_ms"`
	P99Millis        float64 `json:"p99_ms"`
	PeakInFlight     int64   `json:"peak_in_flight"`
	ReplicaPeakRSSMB float64 `json:"replica_peak_rss_mb"`
	// NoWorkReplies counts the replies that had no task for the fleet ("no work", backpressure):
	// each one costs its worker a throttle pause.
	NoWorkReplies uint64 `json:"no_work_replies"`
	// CPU time per task during the run, in µs, by who spent it: the replicas, the echo workers
	// (this process), PostgreSQL's processes (of its own cluster only, see PostgresCPU; absent
	// when not counted), and the whole machine (kernel threads included).
	CPUMicrosPerTask map[string]float64 `json:"cpu_us_per_task,omitempty"`
	// The report fold of the run's results the replicas had not folded when they stopped, run
	// after the drain: tasks folded, its time and PostgreSQL's CPU per task folded, and the
	// throughput counting its time after the drain's (a bound: a replica folds while it serves).
	FoldTasks                 int64   `json:"fold_tasks"`
	FoldSeconds               float64 `json:"fold_seconds"`
	FoldPostgresMicrosPerTask float64 `json:"fold_postgres_cpu_us_per_task"`
	TasksPerSecondWithFold    float64 `json:"tasks_per_s_with_fold"`
	// PostgresCPU says what cpu_us_per_task's "postgres" counts: the processes of the cluster
	// serving the bench's database (its postmaster and that one's descendants, whatever else on
	// the machine is named postgres), or why nothing is counted (a server out of sight).
	PostgresCPU string `json:"postgres_cpu"`
	// DrainPollMicrosPerTask is the PostgreSQL CPU the bench's own drain checks cost, per task,
	// measured on their connection's backend and left out of cpu_us_per_task's "postgres":
	// they are the measurement's, not cortexq's. A check costs ~40 µs back to back, but
	// 200-500 µs after the backend slept 20 ms to 1 s (a cold wake-up).
	DrainPollMicrosPerTask float64 `json:"drain_poll_pg_cpu_us_per_task"`
	DrainPolls             int     `json:"drain_polls"`
	// The average batch of each kind of write, from the replicas' histograms (sum/count): tasks
	// per reservation, hand-outs per attribution statement, replies per claim (benchBatches).
	ReserveBatchAvg   float64 `json:"reserve_batch_avg,omitempty"`
	AttributeBatchAvg float64 `json:"attribute_batch_avg,omitempty"`
	ClaimBatchAvg     float64 `json:"claim_batch_avg,omitempty"`
	// AttributedAtClaim is the share of hand-outs whose attempt the claim of their result
	// recorded, with no attribution statement (a result back within the attribution delay).
	AttributedAtClaim float64 `json:"attributed_at_claim"`
	RiverJobsPerS     float64 `json:"river_jobs_per_s,omitempty"`
	// River's CPU per no-op job, in µs, counted as cpu_us_per_task is during River's run: its
	// client (this process), PostgreSQL (the same cluster) and the machine.
	RiverCPUMicrosPerJob map[string]float64 `json:"river_cpu_us_per_job,omitempty"`
	RatioVsRiver         float64            `json:"ratio_vs_river,omitempty"`
	// Corpora is, with --corpora, each corpus's tasks and when it finished.
	Corpora []benchCorpusReport `json:"corpora,omitempty"`
	// Statements is, with --statements, what PostgreSQL ran during the measurement, per task;
	// Pinned, with --pin, the CPUs PostgreSQL and the rest were pinned to.
	Statements  []StatementStat `json:"statements,omitempty"`
	Pinned      string          `json:"pinned,omitempty"`
	NoProblem   int64           `json:"no_problem"`
	Lost        int64           `json:"lost"`
	BadArchives int             `json:"bad_archives"`
	GatesOK     bool            `json:"gates_ok"`
}

// counted is the bench fleet's handler: it counts the conversions, which tells the drain check
// when to start polling the database.
type counted struct {
	next worker.MemoryHandler
	n    atomic.Int64
}

func (h *counted) Convert(ctx context.Context, in, out string) error {
	h.n.Add(1)
	return h.next.Convert(ctx, in, out)
}

func (h *counted) ConvertBytes(ctx context.Context, in []byte) ([]byte, error) {
	h.n.Add(1)
	return h.next.ConvertBytes(ctx, in)
}

// pacedSlack is how far behind its schedule a paced fleet may catch up.
const pacedSlack = 100 * time.Millisecond

// paced is an echo handler held to a shared rate.
type paced struct {
	mu    sync.Mutex
	next  time.Time
	every time.Duration
}

func (h *paced) Convert(ctx context.Context, in, out string) error {
	if err := h.wait(ctx); err != nil {
		return err
	}
	return worker.Echo{}.Convert(ctx, in, out)
}

func (h *paced) ConvertBytes(ctx context.Context, in []byte) ([]byte, error) {
	if err := h.wait(ctx); err != nil {
		return nil, err
	}
	return in, nil
}

// wait holds the caller to its turn.
func (h *paced) wait(ctx context.Context) error {
	h.mu.Lock()
	// The schedule starts at the first call: from the zero time the floor below would let the
	// first pacedSlack of slots go at once, a burst of 100 tasks at 1,000/s that the run's
	// lease → result tail then measured (docs/performance.md#latency-at-a-steady-rate).
	if h.next.IsZero() {
		h.next = time.Now()
	}
	// Slots missed by less than pacedSlack are caught up, so a short stall does not lower the
	// rate held; older ones are dropped, so a long one does not turn into a burst.
	if floor := time.Now().Add(-pacedSlack); h.next.Before(floor) {
		h.next = floor
	}
	at := h.next
	h.next = h.next.Add(h.every)
	h.mu.Unlock()
	if d := time.Until(at); d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// saboteur leases k tasks, each on a raw DEALER of its own (a worker may hold only
// --max-in-flight-per-worker leases), reads their payloads and vanishes.
func saboteur(vent, service string, k int) error {
	for i := range k {
		if err := leaseAndVanish(vent, service, fmt.Sprintf("chaos-saboteur-%d-%d", os.Getpid(), i)); err != nil {
			return err
		}
	}
	return nil
}

// leaseAndVanish leases one task as worker identity and reads its payload.
func leaseAndVanish(vent, service, identity string) error {
	d, err := zmq.NewSocket(zmq.DEALER)
	if err != nil {
		return err
	}
	defer d.Close()
	_ = d.SetLinger(0)
	_ = d.SetIdentity(identity)
	_ = d.SetRcvtimeo(10 * time.Second)
	if err := d.Connect(vent); err != nil {
		return err
	}
	for {
		if _, err := d.Send(service, 0); err != nil {
			return err
		}
		msg, err := d.RecvMessageBytes(0)
		if err != nil {
			return err
		}
		if string(msg[0]) != "0" {
			return nil
		}
	}
}

// benchRiver runs n no-op River jobs on the database (River tuned as its authors tune it for
// throughput) and reports jobs per second and the CPU per job in µs, counted as the cortexq
// run's is (sampleCPU): its client is this process.
func benchRiver(c *cli.Context, dsn string, n int, cluster pgCluster) (float64, map[string]float64, error) {
	ctx := c.Context
	pool, err := newPool(c, dsn, 20)
	if err != nil {
		return 0, nil, err
	}
	defer pool.Close()
	var done atomic.Int64
	finished := make(chan struct{})
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(ctx context.Context, job *river.Job[noopArgs]) error {
		if done.Add(1) == int64(n) {
			close(finished)
		}
		return nil
	}))
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:        map[string]river.QueueConfig{"bench": {MaxWorkers: 2000}},
		Workers:       workers,
		FetchCooldown: time.Millisecond,
		Logger:        slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return 0, nil, err
	}
	params := make([]river.InsertManyParams, 0, 1000)
	for i := 0; i < n; i += len(params) {
		params = params[:0]
		for j := i; j < min(n, i+1000); j++ {
			params = append(params, river.InsertManyParams{Args: noopArgs{}, InsertOpts: &river.InsertOpts{Queue: "bench"}})
		}
		if _, err := client.InsertManyFast(ctx, params); err != nil {
			return 0, nil, err
		}
	}
	start := time.Now()
	cpuStart := sampleCPU(nil, cluster)
	if err := client.Start(ctx); err != nil {
		return 0, nil, err
	}
	select {
	case <-finished:
	case <-time.After(10 * time.Minute):
		err = errors.New("river did not finish within 10 minutes")
	}
	took := time.Since(start)
	cpu := perUnit(cpuStart, sampleCPU(nil, cluster), int64(n))
	cpu["client"] = cpu["workers"]
	delete(cpu, "workers")
	delete(cpu, "replicas")
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = client.Stop(sctx)
	if err != nil {
		return 0, nil, err
	}
	return float64(n) / took.Seconds(), cpu, nil
}

type noopArgs struct{}

func (noopArgs) Kind() string { return "cortexq_bench_noop" }

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitListening waits until something accepts TCP connections at a tcp:// endpoint.
func waitListening(ctx context.Context, endpoint string, timeout time.Duration) error {
	addr := strings.TrimPrefix(endpoint, "tcp://")
	deadline := time.Now().Add(timeout)
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			conn.Close()
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("nothing listens on %s after %s", endpoint, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// sampleCPU reads the CPU seconds spent so far by the replicas, this process (the echo
// workers), the PostgreSQL cluster's processes (with their reaped children; only when it is
// counted) and the whole machine (steal left out: procstat.Machine).
func sampleCPU(replicas []*exec.Cmd, cluster pgCluster) map[string]float64 {
	machine, _ := procstat.Machine()
	out := map[string]float64{"replicas": 0, "workers": procstat.Process("self"), "machine": machine}
	for _, r := range replicas {
		out["replicas"] += procstat.Process(strconv.Itoa(r.Process.Pid))
	}
	if cluster.counted() {
		// Backends that exit meanwhile are in the postmaster's reaped children's time.
		if pids, err := procstat.ClusterPIDs(cluster.postmaster); err == nil {
			out["postgres"] = procstat.Processes(pids)
		}
	}
	return out
}

// perUnit is the CPU between two samples in µs per unit of work, to a tenth.
func perUnit(start, end map[string]float64, units int64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range end {
		if s, ok := start[k]; ok {
			out[k] = math.Round((v-s)*1e6/float64(units)*10) / 10
		}
	}
	return out
}

// formatCPU prints a cpu_us_per_task map in a fixed order.
func formatCPU(m map[string]float64) string {
	var parts []string
	for _, k := range []string{"postgres", "replicas", "workers", "machine"} {
		if v, ok := m[k]; ok {
			parts = append(parts, fmt.Sprintf("%s %.0f", k, v))
		}
	}
	return strings.Join(parts, ", ")
}

// pgCluster is the PostgreSQL cluster whose processes the bench counts, or why it counts none.
type pgCluster struct {
	dataDir    string
	postmaster int
	backend    int    // the pid of the connection that found it (the bench's polls)
	why        string // set when nothing is counted
	external   bool   // the database came from --database-url
}

func (pc pgCluster) counted() bool { return pc.why == "" }

// String says what the bench's PostgreSQL CPU counts.
func (pc pgCluster) String() string {
	src := "the embedded cluster"
	if pc.external {
		src = "the --database-url server"
	}
	if !pc.counted() {
		return "not counted: " + pc.why
	}
	return fmt.Sprintf("%s's processes only (postmaster pid %d, data directory %s)", src, pc.postmaster, pc.dataDir)
}

// findCluster finds the processes of the cluster serving pool's database: the postmaster named
// by the postmaster.pid in its data directory, checked to be the parent of pool's own backend
// (so a server in another machine, container or pid namespace is not mistaken for a local
// process). Where that cannot be done, nothing is counted, and the reason says why.
func findCluster(ctx context.Context, pool *pgxpool.Pool, external bool) pgCluster {
	pc := pgCluster{external: external}
	if err := pool.QueryRow(ctx, "SELECT current_setting('data_directory'), pg_backend_pid()").Scan(&pc.dataDir, &pc.backend); err != nil {
		pc.why = fmt.Sprintf("the server does not tell its data directory (%v)", err)
		return pc
	}
	pm, err := procstat.Postmaster(pc.dataDir)
	if err != nil {
		pc.why = fmt.Sprintf("the server's processes are out of sight (%v)", err)
		return pc
	}
	if parent := procstat.Parent(pc.backend); parent != pm {
		pc.why = fmt.Sprintf("the server's processes are out of sight (backend %d's parent is %d, not the postmaster %d of %s)",
			pc.backend, parent, pm, pc.dataDir)
		return pc
	}
	pc.postmaster = pm
	return pc
}

// benchBatches are the replicas' batch histograms the bench averages, by the name its report
// gives them.
var benchBatches = map[string]string{"reserve": "cortexq_reserve_batch_size", "attribute": "cortexq_attribute_batch_size",
	"claim": "cortexq_claim_batch_size"}

// readBatches averages each histogram of benchBatches over the replicas (sum over count), from
// their /metrics, and gives the share of leases attributed by their claim as
// "attributed_at_claim". /metrics answers from a gathering up to metricsMaxAge old: it waits
// that long first, so the run's last transactions are in.
func readBatches(urls []string) map[string]float64 {
	time.Sleep(wired.MetricsMaxAge + 100*time.Millisecond)
	names := []string{"cortexq_attributed_at_claim_total", "cortexq_leases_total"}
	for _, h := range benchBatches {
		names = append(names, h+"_sum", h+"_count")
	}
	m := readMetrics(urls, names...)
	out := map[string]float64{}
	for k, h := range benchBatches {
		if m[h+"_count"] > 0 {
			out[k] = math.Round(m[h+"_sum"]/m[h+"_count"]*10) / 10
		}
	}
	if leases := m["cortexq_leases_total"]; leases > 0 {
		out["attributed_at_claim"] = math.Round(m["cortexq_attributed_at_claim_total"]/leases*1000) / 1000
	}
	return out
}

// readMetrics sums the samples of the named metrics (all their labels) over the replicas'
// /metrics. A replica that does not answer is left out.
func readMetrics(urls []string, names ...string) map[string]float64 {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := map[string]float64{}
	client := &http.Client{Timeout: 5 * time.Second}
	for _, u := range urls {
		resp, err := client.Get(u)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			sp := strings.LastIndexByte(line, ' ')
			if sp < 0 || strings.HasPrefix(line, "#") {
				continue
			}
			name, _, _ := strings.Cut(line[:sp], "{")
			if !want[name] {
				continue
			}
			if v, err := strconv.ParseFloat(line[sp+1:], 64); err == nil {
				out[name] += v
			}
		}
		resp.Body.Close()
	}
	return out
}

// peakRSSMB reads a process's peak resident set size (VmHWM) in MB; 0 if unknown.
func peakRSSMB(pid int) float64 {
	hwm, err := procstat.StatusBytes(pid, "VmHWM")
	if err != nil {
		return 0
	}
	return float64(hwm) / (1 << 20)
}

// newPool opens a pool of at most size connections on dsn; behind a transaction-mode pooler,
// one that keeps no prepared statement (docs/operations.md#poolers).
func newPool(c *cli.Context, dsn string, size int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("database url: %w", err)
	}
	cfg.MaxConns = size
	if c.String(wired.PoolerFlag) == "transaction" {
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	return pgxpool.NewWithConfig(c.Context, cfg)
}

// scratchDir is where the bench's workers keep their per-task files: RAM (/dev/shm) when the
// machine has it, as a conversion fleet would, so the numbers measure the dispatcher, not the
// workers' disk.
func scratchDir() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		return "/dev/shm"
	}
	return ""
}

// sumProgress is the bench's corpus's tally, or with --corpora the sum of its corpora's.
func sumProgress(ps []inspect.Progress, name string, corpora []benchCorpus) inspect.Progress {
	var sum inspect.Progress
	for _, p := range ps {
		mine := corpora == nil && p.Corpus == name
		for _, bc := range corpora {
			mine = mine || p.CorpusID == bc.id
		}
		if !mine {
			continue
		}
		sum.Tasks, sum.TODO, sum.Dispatched = sum.Tasks+p.Tasks, sum.TODO+p.TODO, sum.Dispatched+p.Dispatched
		sum.NoProblem, sum.Warning, sum.Error = sum.NoProblem+p.NoProblem, sum.Warning+p.Warning, sum.Error+p.Error
		sum.Fatal, sum.Invalid, sum.Blocked = sum.Fatal+p.Fatal, sum.Invalid+p.Invalid, sum.Blocked+p.Blocked
	}
	return sum
}
