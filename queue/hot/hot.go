// Package hot mirrors the rows this replica leased: an O(1) in-flight count for backpressure,
// the unanswered leases of each worker and key for their caps, and a task lookup for the
// sink's fast path. It does no I/O: the database is the truth, and a task it does not mirror
// is looked up there by the caller.
package hot

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/puzpuzpuz/xsync/v4"

	"github.com/cortexq/cortexq/queue"
)

// Task is what the mirror keeps of one leased task.
type Task struct {
	queue.Task
	// Worker is the worker the task is leased to, and Key the name of the CURVE key it
	// authenticated with ("" in plain mode): the mirror counts each one's tasks.
	Worker string
	Key    string
	// Pending marks a hand-out whose attribution has not been written yet: the database does
	// not show it in flight, so Reset keeps it until Attributed clears the mark.
	Pending bool
	// HandedOut is when this replica sent the task to Worker (its monotonic clock).
	HandedOut time.Time
	// Reserved is when this replica's reservation of the task came back, and SourceSent when its
	// source was queued on the worker's socket (monotonic clock; zero: unknown): the stages'
	// marks (docs/stages.md).
	Reserved, SourceSent time.Time
	// gen is the mirror's generation when the task was put (see Generation).
	gen uint64
	// answered is set once its worker's reply came in (Answered): it no longer counts against
	// the worker's cap, though it stays mirrored until its claim.
	answered bool
}

// Replied reports whether t's worker replied (Answered): its result waits for its claim.
func (t Task) Replied() bool { return t.answered }

// Map is the mirror. The zero value is not usable; call New.
type Map struct {
	tasks *xsync.Map[int64, Task]
	n     atomic.Int64
	// replied counts the answered tasks (Replied).
	replied atomic.Int64
	gen     atomic.Uint64

	// heldMu guards the tasks counted per worker and per key; a name with none is not kept.
	heldMu  sync.Mutex
	workers map[string]int
	keys    map[string]int
}

// New returns an empty Map.
func New() *Map {
	return &Map{tasks: xsync.NewMap[int64, Task](), workers: map[string]int{}, keys: map[string]int{}}
}

// Len reports how many tasks are mirrored, in O(1).
func (m *Map) Len() int { return int(m.n.Load()) }

// Held reports how many mirrored tasks are leased to worker.
func (m *Map) Held(worker string) int {
	m.heldMu.Lock()
	defer m.heldMu.Unlock()
	return m.workers[worker]
}

// HeldByKey reports how many mirrored tasks are leased to workers of key.
func (m *Map) HeldByKey(key string) int {
	m.heldMu.Lock()
	defer m.heldMu.Unlock()
	return m.keys[key]
}

// Names reports how many workers and keys the mirror counts tasks for: only those holding an
// unanswered lease, so the counts are bounded by the leases in flight, never by the workers
// ever seen.
func (m *Map) Names() (workers, keys int) {
	m.heldMu.Lock()
	defer m.heldMu.Unlock()
	return len(m.workers), len(m.keys)
}

// Replied reports how many mirrored tasks were answered and wait for their claim: the sink's
// backlog.
func (m *Map) Replied() int { return int(m.replied.Load()) }

// count adds d to the tasks of t's worker and key, unless t was answered; an answered task
// counts in replied instead.
func (m *Map) count(t Task, d int) {
	if t.answered {
		m.replied.Add(int64(d))
		return
	}
	m.heldMu.Lock()
	defer m.heldMu.Unlock()
	add := func(counts map[string]int, name string) {
		if name == "" {
			return
		}
		if n := counts[name] + d; n > 0 {
			counts[name] = n
		} else {
			delete(counts, name)
		}
	}
	add(m.workers, t.Worker)
	add(m.keys, t.Key)
}

// Put mirrors t, replacing any entry of the same task without counting it twice.
func (m *Map) Put(t Task) {
	t.gen = m.gen.Add(1)
	prev, loaded := m.tasks.LoadAndStore(t.TaskID, t)
	if loaded {
		m.count(prev, -1)
	} else {
		m.n.Add(1)
	}
	m.count(t, 1)
}

// Sent notes when task id's source was queued for its worker (Task.SourceSent).
func (m *Map) Sent(id int64, at time.Time) {
	m.tasks.Compute(id, func(t Task, loaded bool) (Task, xsync.ComputeOp) {
		if !loaded {
			return t, xsync.CancelOp
		}
		t.SourceSent = at
		return t, xsync.UpdateOp
	})
}

// Answered notes that worker replied for task id: the task stops counting against worker's
// cap and its key's, and stays mirrored until its claim. A reply from another worker, or for a
// task not mirrored, changes nothing. It returns the task's entry as it is (mirrored false:
// none), whoever it is leased to: what the sink knows of the task without the database.
func (m *Map) Answered(id int64, worker string) (t Task, mirrored bool) {
	marked := false
	m.tasks.Compute(id, func(cur Task, loaded bool) (Task, xsync.ComputeOp) {
		t, mirrored = cur, loaded
		if !loaded || cur.answered || cur.Worker != worker {
			return cur, xsync.CancelOp
		}
		marked = true
		cur.answered = true
		return cur, xsync.UpdateOp
	})
	if marked {
		m.count(t, -1)
		m.replied.Add(1)
	}
	return t, mirrored
}

// Attributed clears the Pending mark of task id (its attribution was written, or found the
// reservation gone): from now on the database's view decides whether it stays (Reset).
func (m *Map) Attributed(id int64) {
	m.tasks.Compute(id, func(t Task, loaded bool) (Task, xsync.ComputeOp) {
		if !loaded || !t.Pending {
			return t, xsync.CancelOp
		}
		t.Pending = false
		return t, xsync.UpdateOp
	})
}

// Get returns the mirrored task id, if any.
func (m *Map) Get(id int64) (Task, bool) { return m.tasks.Load(id) }

// Delete drops task id; dropping a task not mirrored is a no-op.
func (m *Map) Delete(id int64) {
	if prev, loaded := m.tasks.LoadAndDelete(id); loaded {
		m.n.Add(-1)
		m.count(prev, -1)
	}
}

// Generation reports a mark to pass to Reset: tasks put after it survive that Reset.
func (m *Map) Generation() uint64 { return m.gen.Load() }

// Reset replaces the mirror's content with tasks (the database's view of this replica's
// in-flight rows, read after Generation returned since), keeping the entries put after since:
// the snapshot could not see those. The counts per worker and key follow: a lease that expired
// or was answered through another replica stops counting against its worker here.
func (m *Map) Reset(tasks []Task, since uint64) {
	want := make(map[int64]Task, len(tasks))
	for _, t := range tasks {
		want[t.TaskID] = t
	}
	m.tasks.Range(func(id int64, t Task) bool {
		if _, ok := want[id]; !ok && t.gen <= since && !t.Pending {
			m.Delete(id)
		}
		return true
	})
	for _, t := range tasks {
		if _, ok := m.tasks.Load(t.TaskID); !ok {
			m.Put(t)
		}
	}
}
