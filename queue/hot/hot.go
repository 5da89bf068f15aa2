// Package hot mirrors the rows this replica leased: an O(1) in-flight count for backpressure and
// a task lookup for the sink's fast path. It does no I/O: the database is the truth, and a task
// it does not mirror is looked up there by the caller.
package hot

import (
	"sync/atomic"

	"github.com/puzpuzpuz/xsync/v4"
)

// Task is what the mirror keeps of one leased task.
type Task struct {
	ID        int64
	Run       int32
	ServiceID int32
	CorpusID  int32
	Entry     string
	// Worker is the worker the task was leased to, as recorded (under CURVE, "key:<name>/…").
	Worker string
	// gen is the mirror's generation when the task was put (see Generation).
	gen uint64
}

// Map is the mirror. The zero value is not usable; call New.
type Map struct {
	tasks *xsync.Map[int64, Task]
	n     atomic.Int64
	gen   atomic.Uint64
}

// New returns an empty Map.
func New() *Map { return &Map{tasks: xsync.NewMap[int64, Task]()} }

// Len reports how many tasks are mirrored, in O(1).
func (m *Map) Len() int { return int(m.n.Load()) }

// Put mirrors t, replacing any entry of the same task without counting it twice.
func (m *Map) Put(t Task) {
	t.gen = m.gen.Add(1)
	if _, loaded := m.tasks.LoadAndStore(t.ID, t); !loaded {
		m.n.Add(1)
	}
}

// Get returns the mirrored task id, if any.
func (m *Map) Get(id int64) (Task, bool) { return m.tasks.Load(id) }

// Delete drops task id; dropping a task not mirrored is a no-op.
func (m *Map) Delete(id int64) {
	if _, loaded := m.tasks.LoadAndDelete(id); loaded {
		m.n.Add(-1)
	}
}

// Generation reports a mark to pass to Reset: tasks put after it survive that Reset.
func (m *Map) Generation() uint64 { return m.gen.Load() }

// Reset replaces the mirror's content with tasks (the database's view of this replica's
// in-flight rows, read after Generation returned since), keeping the entries put after since:
// the snapshot could not see those.
func (m *Map) Reset(tasks []Task, since uint64) {
	want := make(map[int64]Task, len(tasks))
	for _, t := range tasks {
		want[t.ID] = t
	}
	m.tasks.Range(func(id int64, t Task) bool {
		if _, ok := want[id]; !ok && t.gen <= since {
			m.Delete(id)
		}
		return true
	})
	for _, t := range tasks {
		if _, ok := m.tasks.Load(t.ID); !ok {
			m.Put(t)
		}
	}
}
