package dispatch

import "sync"

// claimLocks keeps two claims of this replica (Config.Claimers) off the same task at once. The
// database orders their decisions by the task's row lock, but not what a claim does with files
// outside its transaction: a claim that rolled back puts the archives it published back after
// its ROLLBACK, when another claim may already hold the task and have published over them.
type claimLocks struct {
	mu   sync.Mutex
	held map[int64]chan struct{} // closed when its claim is over
}

// lock waits until no other claim holds any task of batch, then holds them all; it returns the
// tasks for unlock. All or none are taken, so two claims never wait for each other.
func (l *claimLocks) lock(batch []*item) []int64 {
	ids := make([]int64, len(batch))
	for i, it := range batch {
		ids[i] = it.result.TaskID
	}
	for {
		l.mu.Lock()
		var busy chan struct{}
		for _, id := range ids {
			if c, ok := l.held[id]; ok {
				busy = c
				break
			}
		}
		if busy == nil {
			if l.held == nil {
				l.held = map[int64]chan struct{}{}
			}
			mine := make(chan struct{})
			for _, id := range ids {
				l.held[id] = mine
			}
			l.mu.Unlock()
			return ids
		}
		l.mu.Unlock()
		<-busy
	}
}

// unlock releases the tasks lock returned.
func (l *claimLocks) unlock(ids []int64) {
	l.mu.Lock()
	var mine chan struct{}
	for _, id := range ids {
		if c, ok := l.held[id]; ok {
			mine = c
			delete(l.held, id)
		}
	}
	l.mu.Unlock()
	if mine != nil {
		close(mine)
	}
}
