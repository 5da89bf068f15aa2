package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/queuetest"
)

// killLoopTasks is the corpus of TestFaultKillLoopCrashFreeze: CORTEXQ_FAULT_LOOP_TASKS sets
// another (the developers' five-minute run of docs/operations.md#one-process-a-name).
func killLoopTasks(t *testing.T) int {
	n := 6000
	if v := os.Getenv("CORTEXQ_FAULT_LOOP_TASKS"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(t, err, "CORTEXQ_FAULT_LOOP_TASKS")
	}
	return n
}

// killLoopFaults are the faults of TestFaultKillLoopCrashFreeze's second run, of kill, crash and
// freeze: all three unless CORTEXQ_FAULT_LOOP_FAULTS names some (to measure what each costs).
func killLoopFaults(t *testing.T) map[string]bool {
	v := os.Getenv("CORTEXQ_FAULT_LOOP_FAULTS")
	if v == "" {
		v = "kill,crash,freeze"
	}
	faults := map[string]bool{}
	for _, f := range strings.Split(v, ",") {
		require.Contains(t, []string{"kill", "crash", "freeze"}, f, "CORTEXQ_FAULT_LOOP_FAULTS")
		faults[f] = true
	}
	return faults
}

// TestFaultKillLoopCrashFreeze converts one corpus with three replicas and no faults, then the
// same-sized corpus while a random replica is killed with kill -9 and started again at once
// every 2 s (each restart taking its name back at once), PostgreSQL crashes (an immediate
// stop, then a start) a third of the way, and a replica is frozen for 8 s two thirds of the way:
// every task ends converted, each final result recorded exactly once. Both throughputs are
// logged: the restarts must not starve dispatch.
func TestFaultKillLoopCrashFreeze(t *testing.T) {
	skipShortFault(t)
	tasks, faults := killLoopTasks(t), killLoopFaults(t)
	cluster := queuetest.NewCluster(t)
	run := func(name string, chaos bool) (float64, int) {
		rig := newFaultRig(t, cluster.NewDB(t))
		rig.stage(name, "", tasks, faultKillPayload)
		for i := range faultKillReplicas {
			rig.addReplica(fmt.Sprintf("%s%d", name, i+1), "--sync-archives=false", "--db-outage-budget", "120s")
		}
		rig.startReplicas()
		rig.startWorkers(2, 6)
		start := time.Now()
		var (
			kills, frozenAt int
			crashed         bool
			nextKill        = start.Add(2 * time.Second)
			frozen          *replicaProc
			thaw            time.Time
		)
		rig.waitFor(name+": every task terminal", 15*time.Minute, allTerminal, func(p faultProgress) {
			if !chaos {
				return
			}
			now := time.Now()
			switch {
			case faults["crash"] && !crashed && p.terminal >= tasks/3:
				crashed = true
				down := time.Now()
				cluster.Crash(t)
				cluster.Start(t)
				t.Logf("%s: PostgreSQL crashed and started again (crash recovery included) in %s", name, time.Since(down).Round(time.Millisecond))
			case faults["freeze"] && frozen == nil && frozenAt == 0 && p.terminal >= 2*tasks/3:
				frozen, frozenAt, thaw = rig.replicas[rand.IntN(len(rig.replicas))], p.terminal, now.Add(8*time.Second)
				cmd, _ := frozen.current()
				if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
					// The process the kill loop just killed, not yet started again: freeze
					// another at the next look.
					t.Logf("%s: no freeze of %s this time: %v", name, frozen.name, err)
					frozen, frozenAt = nil, 0
				}
			case frozen != nil && now.After(thaw):
				cmd, _ := frozen.current()
				require.NoError(t, cmd.Process.Signal(syscall.SIGCONT))
				frozen = nil
			}
			if faults["kill"] && now.After(nextKill) {
				if rp := rig.replicas[rand.IntN(len(rig.replicas))]; rp != frozen {
					rp.kill9()
					rp.start()
					kills++
				}
				nextKill = now.Add(2 * time.Second)
			}
		})
		rate := float64(tasks) / time.Since(start).Seconds()
		p, a := rig.checkFinished()
		require.Equal(t, tasks, p.noProblem, "%s: every task converted", name)
		for _, rp := range rig.replicas {
			require.True(t, rp.running(), "%s still running", rp.name)
		}
		t.Logf("%s: %d tasks at %.0f tasks/s, %d kills; %d attempts, %d leases expired", name, tasks, rate, kills,
			a.attempts, a.expired)
		rig.stopAll()
		return rate, kills
	}
	calm, _ := run("calm", false)
	chaos, kills := run("chaos", true)
	if faults["kill"] {
		require.Positive(t, kills)
	}
	t.Logf("fault numbers: kill loop: %d tasks, 3 replicas, 12 workers; %.0f tasks/s without faults, %.0f with %d kills, "+
		"crash %v, 8 s freeze %v (%.2f of it)", tasks, calm, chaos, kills, faults["crash"], faults["freeze"], chaos/calm)
}
