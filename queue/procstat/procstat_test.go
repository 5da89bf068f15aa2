package procstat

import (
	"testing"
	"time"
)

// TestCPUTimeGrowsWithWork: spinning for 300 ms adds CPU time to this process and to the
// machine's busy time.
func TestCPUTimeGrowsWithWork(t *testing.T) {
	machine0, ok := Machine()
	if !ok {
		t.Fatal("/proc/stat is unreadable")
	}
	self0 := Process("self")
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
	}
	machine1, ok := Machine()
	if !ok {
		t.Fatal("/proc/stat is unreadable")
	}
	self1 := Process("self")
	// Clock ticks are 10 ms; stolen time is not counted, so allow for a slow virtual machine.
	if self1-self0 < 0.05 {
		t.Errorf("this process's CPU time grew %.2f s in 300 ms of spinning", self1-self0)
	}
	if machine1-machine0 < 0.05 {
		t.Errorf("the machine's busy time grew %.2f s in 300 ms of spinning", machine1-machine0)
	}
	if Process("0") != 0 {
		t.Error("a process that does not exist has CPU time")
	}
}
