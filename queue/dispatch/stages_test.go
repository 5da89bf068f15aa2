package dispatch

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/hot"
	"github.com/cortexq/cortexq/queue/reports"
	"github.com/cortexq/cortexq/worker"
)

// sleepyStages is a worker that sleeps a known time in each of its stages and reports them in
// its cortex.log's stage line (docs/stages.md#the-stage-line), as the LaTeXML worker does.
type sleepyStages struct{ unpack, convert, pack time.Duration }

func (d sleepyStages) Convert(ctx context.Context, in, out string) error {
	t0 := time.Now()
	if _, err := os.ReadFile(in); err != nil {
		return err
	}
	time.Sleep(d.unpack)
	unpack := time.Since(t0)
	t1 := time.Now()
	time.Sleep(d.convert)
	convert := time.Since(t1)
	t2 := time.Now()
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	zw := zip.NewWriter(f)
	w, err := zw.Create("result.html")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "<p>%s</p>", in)
	time.Sleep(d.pack)
	pack := time.Since(t2)
	if w, err = zw.Create("cortex.log"); err != nil {
		return err
	}
	fmt.Fprintf(w, "%s\nStatus:conversion:0\n", queue.StageLine(unpack, convert, pack))
	return zw.Close()
}

// runStages converts n tasks with workers of h, links tuned by tune, and summarizes their
// stages.
func runStages(t *testing.T, e *env, n, workers int, h worker.Handler, tune ...func(*worker.Config)) ([]reports.TaskStages, reports.StageSummary) {
	t.Helper()
	ids := e.stage(n, 2000)
	_, stop := e.workersWith(h, workers, tune...)
	e.waitTerminal(2*time.Minute, false)
	stop()
	tasks, truncated, err := reports.New(e.pool, nil, nil).StageTasks(e.ctx, reports.StageScope{ServiceID: e.svc})
	require.NoError(t, err)
	require.False(t, truncated)
	require.Len(t, tasks, len(ids), "every accepted attempt recorded its stages")
	sum := reports.SummarizeStages(tasks)
	for _, st := range sum.Stages {
		t.Logf("%-9s n=%3d p50=%7v p95=%7v sum=%8v share=%5.1f%%", st.Stage, st.Count, st.P50, st.P95, st.Sum, 100*st.Share)
	}
	t.Logf("bottleneck %q, busiest %q, %.1f papers/s", sum.Bottleneck, sum.Busiest, sum.PapersPerSecond)
	attempts, bytes, err := reports.New(e.pool, nil, nil).StageStorage(e.ctx)
	require.NoError(t, err)
	require.Equal(t, int64(n), attempts)
	t.Logf("stages: %.1f bytes an attempt", float64(bytes)/float64(attempts))
	return tasks, sum
}

// stageP50 is a stage's median in sum.
func stageP50(t *testing.T, sum reports.StageSummary, name string) time.Duration {
	t.Helper()
	for _, st := range sum.Stages {
		if st.Stage == name {
			return st.P50
		}
	}
	t.Fatalf("stage %s not recorded", name)
	return 0
}

// requireNear checks that a stage's median holds the injected delay: at least it, and (logged,
// not asserted: no timing assertions in tests) how far above.
func requireNear(t *testing.T, sum reports.StageSummary, name string, injected time.Duration) {
	t.Helper()
	got := stageP50(t, sum, name)
	require.GreaterOrEqual(t, got, injected, "stage %s holds its injected delay", name)
	t.Logf("stage %s: injected %v, median %v (%+.0f%%)", name, injected, got, 100*(float64(got)/float64(injected)-1))
}

// TestStagesFindInjectedDelays runs three set-ups, each with one stage made slow, and checks
// that the delay is found in that stage and the bottleneck named after it: slow workers (their
// convert), slow transfers (toxiproxy between the workers and the replica), and a slow database
// (toxiproxy between the replica and PostgreSQL: the claim).
func TestStagesFindInjectedDelays(t *testing.T) {
	t.Run("SlowWorkers", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		d := sleepyStages{unpack: 60 * time.Millisecond, convert: 400 * time.Millisecond, pack: 80 * time.Millisecond}
		tasks, sum := runStages(t, e, 18, 2, d)
		requireNear(t, sum, "unpack", d.unpack)
		requireNear(t, sum, "convert", d.convert)
		requireNear(t, sum, "pack", d.pack)
		require.Equal(t, "convert", sum.Busiest)
		require.Equal(t, reports.WaitingForWorkers, sum.Bottleneck, "tasks ready waited for the two slow workers longer than they worked")
		for _, ts := range tasks {
			require.True(t, ts.Stages.Has(queue.StageReserved) && ts.Stages.Has(queue.StageSource) && ts.Stages.Has(queue.StageWrite) &&
				ts.Stages.Has(queue.StageClaim) && ts.Stages.Has(queue.StageTodo), "task %d: the dispatcher's stages recorded: %v", ts.TaskID, ts.Stages)
			require.GreaterOrEqual(t, ts.Stages[queue.StageWorker], ts.Stages[queue.StageConvert], "the round trip holds the worker's stages")
		}
	})
	t.Run("SlowTransfers", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		const latency = 150 // ms, each way from the replica to the worker
		srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
		proxied := map[string]string{}
		for name, upstream := range map[string]string{"vent": e.vent, "sink": e.sink} {
			p := toxiproxy.NewProxy(srv, name, "127.0.0.1:0", upstream[len("tcp://"):])
			require.NoError(t, srv.Collection.Add(p, true))
			t.Cleanup(p.Stop)
			// Toward the worker on the ventilator's link (the task), toward the replica on the sink's (the result).
			stream := map[string]string{"vent": "downstream", "sink": "upstream"}[name]
			_, err := p.Toxics.AddToxicJson(jsonReader(t, map[string]any{"name": "slow", "type": "latency", "stream": stream,
				"toxicity": 1.0, "attributes": map[string]int{"latency": latency}}))
			require.NoError(t, err)
			proxied[name] = "tcp://" + p.Listen
		}
		d := sleepyStages{unpack: 5 * time.Millisecond, convert: 20 * time.Millisecond, pack: 5 * time.Millisecond}
		_, sum := runStages(t, e, 12, 6, d, func(c *worker.Config) { c.Ventilator, c.Sink = proxied["vent"], proxied["sink"] })
		requireNear(t, sum, reports.StageTransfer, 2*latency*time.Millisecond)
		require.Equal(t, reports.StageTransfer, sum.Bottleneck)
	})
	t.Run("SlowDatabase", func(t *testing.T) {
		t.Parallel()
		e, proxy := newProxiedEnv(t)
		const latency = 60 // ms, from PostgreSQL to the replica: a round trip each
		_, err := proxy.Toxics.AddToxicJson(jsonReader(t, map[string]any{"name": "slow", "type": "latency", "stream": "downstream",
			"toxicity": 1.0, "attributes": map[string]int{"latency": latency}}))
		require.NoError(t, err)
		d := sleepyStages{unpack: 5 * time.Millisecond, convert: 20 * time.Millisecond, pack: 5 * time.Millisecond}
		_, sum := runStages(t, e, 12, 4, d)
		// A claim is two round trips: its locking reads, then its writes with the COMMIT.
		requireNear(t, sum, "claim", 2*latency*time.Millisecond)
		require.Equal(t, "claim", sum.Bottleneck)
		require.Less(t, stageP50(t, sum, "transfer"), 2*latency*time.Millisecond, "the workers' links are not slowed")
	})
}

// jsonReader encodes v for toxiproxy's API.
func jsonReader(t *testing.T, v any) *bytes.Reader {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return bytes.NewReader(b)
}

// BenchmarkStageRecording is what recording an accepted result's stages adds to a replica's work
// per task: the stages noted, observed on cortexq_stage_seconds and packed for the claim.
func BenchmarkStageRecording(b *testing.B) {
	m := &metrics{stages: &stageObservers{vec: newStageHistogram()}}
	now := time.Now()
	h := hot.Task{HandedOut: now.Add(-30 * time.Millisecond), Reserved: now.Add(-40 * time.Millisecond), SourceSent: now.Add(-29 * time.Millisecond)}
	worker := queue.NoStages()
	worker[queue.StageUnpack], worker[queue.StageConvert], worker[queue.StagePack] = time.Millisecond, 20*time.Millisecond, 2*time.Millisecond
	s := &sink{core: &core{metrics: m}}
	b.ReportAllocs()
	for b.Loop() {
		it := &item{service: "echo", handout: h, queued: now}
		it.result.Report = &queue.Report{Stages: &worker}
		s.noteStages(it, inbound{received: now.Add(-time.Millisecond)})
		m.observeStages(it)
		_ = it.result.Stages.Encode()
	}
}
