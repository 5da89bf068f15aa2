package main

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	zmq "github.com/pebbe/zmq4"
	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"
	"go.yaml.in/yaml/v3"
)

// workerStopBudget is how long a worker with no task in hand may take to exit after SIGTERM. It
// aims at a second; the budget is generous for a loaded machine, and far below what the case
// below took before issue 64 (--io-timeout, 2 min by default: Docker's SIGKILL came first).
const workerStopBudget = 5 * time.Second

// silentReplica is a ROUTER on a loopback port standing in for a replica's ventilator that
// takes requests and never answers, until killed: what a worker sees of a replica killed with
// its request unanswered.
type silentReplica struct {
	requests chan struct{}
	quit     chan struct{}
	wg       sync.WaitGroup
}

func startSilentReplica(t *testing.T, endpoint string) *silentReplica {
	t.Helper()
	zctx, err := zmq.NewContext()
	require.NoError(t, err)
	s, err := zctx.NewSocket(zmq.ROUTER)
	require.NoError(t, err)
	require.NoError(t, s.SetLinger(0))
	require.NoError(t, s.SetRcvtimeo(20*time.Millisecond))
	require.NoError(t, s.Bind(endpoint))
	r := &silentReplica{requests: make(chan struct{}, 100), quit: make(chan struct{})}
	r.wg.Go(func() {
		defer func() { _ = s.Close(); _ = zctx.Term() }()
		for {
			select {
			case <-r.quit:
				return
			default:
			}
			if _, err := s.RecvMessageBytes(0); err == nil {
				r.requests <- struct{}{}
			}
		}
	})
	t.Cleanup(r.kill)
	return r
}

// kill closes the socket, as kill -9 closes a replica's: the worker's connection drops and its
// request is lost.
func (r *silentReplica) kill() {
	select {
	case <-r.quit:
	default:
		close(r.quit)
	}
	r.wg.Wait()
}

// Issue 64: an idle echo worker connected to two replicas, as docker-compose.yml runs it, whose
// request went to a replica that was then killed and came back, asks again at once and exits
// within a second or so of SIGTERM, whatever it waits for then (a reply of the silent replica
// that came back, or its throttle), instead of waiting --io-timeout for the lost reply
// (compose's SIGKILL came first).
func TestWorkerSIGTERMGivesUpTheRequestLostWithAKilledReplica(t *testing.T) {
	d := newTestDB(t)
	d.ok("service", "add", "echo")
	vent1 := fmt.Sprintf("tcp://127.0.0.1:%d", loopbackPort(t))
	sink1 := fmt.Sprintf("tcp://127.0.0.1:%d", loopbackPort(t))
	vent2 := fmt.Sprintf("tcp://127.0.0.1:%d", loopbackPort(t))
	sink2 := fmt.Sprintf("tcp://127.0.0.1:%d", loopbackPort(t))
	replica := d.start("serve", "--replica", "r-live", "--ventilator", vent1, "--sink", sink1,
		"--http", fmt.Sprintf("127.0.0.1:%d", loopbackPort(t)))
	doomed := startSilentReplica(t, vent2)
	worker := d.start("worker", "echo", "--service", "echo", "--identity", "w-idle",
		"--ventilator", vent1+","+vent2, "--sink", sink1+","+sink2, "--throttle", "200ms")
	select {
	case <-doomed.requests: // the worker now waits for its reply
	case <-time.After(time.Minute):
		t.Fatalf("no request reached the second replica; worker:\n%s", worker.log())
	}
	doomed.kill()
	startSilentReplica(t, vent2) // back, and silent again: a request it takes is never answered
	require.Eventually(t, func() bool {
		return strings.Contains(worker.log(), "the replica went away with this request; asking again")
	},
		time.Minute, 50*time.Millisecond, "the worker saw its request lost; worker:\n%s", worker.log())

	require.Equal(t, 0, worker.stop(syscall.SIGTERM, workerStopBudget), worker.log())
	require.NotContains(t, worker.log(), "abandoning")
	require.Equal(t, 0, replica.stop(syscall.SIGTERM, 30*time.Second), replica.log())
}

// An idle worker throttled after a no-work reply of a real replica exits at once on SIGTERM.
func TestWorkerSIGTERMWhileThrottled(t *testing.T) {
	d := newTestDB(t)
	d.ok("service", "add", "echo")
	vent := fmt.Sprintf("tcp://127.0.0.1:%d", loopbackPort(t))
	sink := fmt.Sprintf("tcp://127.0.0.1:%d", loopbackPort(t))
	replica := d.start("serve", "--replica", "r-idle", "--ventilator", vent, "--sink", sink,
		"--http", fmt.Sprintf("127.0.0.1:%d", loopbackPort(t)))
	worker := d.start("--log-level", "debug", "worker", "echo", "--service", "echo", "--identity", "w-throttled",
		"--ventilator", vent, "--sink", sink, "--throttle", "10m")
	require.Eventually(t, func() bool { return strings.Contains(worker.log(), "no work") },
		time.Minute, 50*time.Millisecond, "the worker asked and got no work; worker:\n%s", worker.log())

	require.Equal(t, 0, worker.stop(syscall.SIGTERM, workerStopBudget), worker.log())
	require.Equal(t, 0, replica.stop(syscall.SIGTERM, 30*time.Second), replica.log())
}

// A conversion longer than --grace is abandoned when the grace is over: the worker exits 0
// then, and the task (its attempt spent) is left to the reaper, as after a second signal. (The
// replica, stopped now, would wait out its drain for that lease: the test's cleanup kills it.)
func TestWorkerSIGTERMAbandonsTheConversionPastItsGrace(t *testing.T) {
	d, _, worker := startConverting(t, 1, "r-graceless", "w-graceless", "--grace", "500ms")
	require.Equal(t, 0, worker.stop(syscall.SIGTERM, 30*time.Second), worker.log())
	require.Contains(t, worker.log(), "grace period over: abandoning the conversions in hand")
	require.Contains(t, worker.log(), "task abandoned: worker stopping")
	require.Equal(t, 0, d.count(`SELECT count(*) FROM attempts WHERE outcome = 'accepted'`), "no result came")
}

// Every worker service of docker-compose.yml gives its workers time to end their conversions
// themselves: Docker's SIGKILL comes stop_grace_period after its SIGTERM, which must be past the
// worker's --grace (the flag's default if the command gives none), with time to send the last
// results and exit. A worker killed by Docker instead loses its conversions and, before issue 64
// was understood, made `docker compose stop` take the whole period.
func TestComposeWorkersStopWithinTheirGracePeriod(t *testing.T) {
	raw, err := os.ReadFile("../../docker-compose.yml")
	require.NoError(t, err)
	var doc struct {
		Services map[string]struct {
			Command         []string `yaml:"command"`
			StopGracePeriod string   `yaml:"stop_grace_period"`
		} `yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	var defaultGrace time.Duration
	for _, f := range workerCommand().Subcommands[0].Flags {
		if d, ok := f.(*cli.DurationFlag); ok && d.Name == "grace" {
			defaultGrace = d.Value
		}
	}
	require.Positive(t, defaultGrace, "worker echo has --grace")
	workers := 0
	for name, svc := range doc.Services {
		if len(svc.Command) == 0 || svc.Command[0] != "worker" {
			continue
		}
		workers++
		grace := defaultGrace
		for _, arg := range svc.Command {
			if v, ok := strings.CutPrefix(arg, "--grace="); ok {
				grace, err = time.ParseDuration(v)
				require.NoError(t, err, "service %s: %s", name, arg)
			}
		}
		require.NotEmpty(t, svc.StopGracePeriod, "service %s: no stop_grace_period (Docker's default is 10 s)", name)
		period, err := time.ParseDuration(svc.StopGracePeriod)
		require.NoError(t, err, "service %s: stop_grace_period", name)
		require.GreaterOrEqual(t, period, grace+5*time.Second,
			"service %s: stop_grace_period %s leaves no time past --grace %s", name, period, grace)
	}
	require.Equal(t, 2, workers, "the echo and LaTeXML worker services")
}
