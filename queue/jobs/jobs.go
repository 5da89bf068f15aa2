package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/cortexq/cortexq/queue/base"
)

// Env is what an operation works with: the database's rooms.
type Env struct {
	Base *base.Base
}

// Op is one kind of operation a job runs.
type Op struct {
	Kind string
	// Check validates the arguments before the job is enqueued (nil: any JSON object).
	Check func(args json.RawMessage) error
	// Run does the work, reporting to p; its result is stored as the job's result.
	Run func(ctx context.Context, env Env, args json.RawMessage, p *Progress) (any, error)
}

// Define makes an Op of kind from run, whose arguments A are decoded from the job's JSON
// (unknown fields refused); check, if set, validates them before the job is enqueued.
func Define[A any](kind string, check func(A) error, run func(ctx context.Context, env Env, args A, p *Progress) (any, error)) Op {
	decode := func(raw json.RawMessage) (A, error) {
		var a A
		if len(raw) == 0 {
			raw = json.RawMessage("{}")
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&a); err != nil {
			return a, fmt.Errorf("%s arguments: %w", kind, err)
		}
		if check != nil {
			if err := check(a); err != nil {
				return a, fmt.Errorf("%s arguments: %w", kind, err)
			}
		}
		return a, nil
	}
	return Op{
		Kind: kind,
		Check: func(raw json.RawMessage) error {
			_, err := decode(raw)
			return err
		},
		Run: func(ctx context.Context, env Env, raw json.RawMessage, p *Progress) (any, error) {
			a, err := decode(raw)
			if err != nil {
				return nil, err
			}
			return run(ctx, env, a, p)
		},
	}
}

// Registry holds the operations a runner works and an enqueuer accepts, by kind.
type Registry struct{ ops map[string]Op }

// NewRegistry holds ops; a kind given twice panics (a programming error).
func NewRegistry(ops ...Op) *Registry {
	r := &Registry{ops: make(map[string]Op, len(ops))}
	for _, op := range ops {
		if _, dup := r.ops[op.Kind]; dup || op.Kind == "" || op.Run == nil {
			panic("jobs: bad or repeated kind " + op.Kind)
		}
		r.ops[op.Kind] = op
	}
	return r
}

// Kinds lists the registered kinds, sorted.
func (r *Registry) Kinds() []string {
	ks := make([]string, 0, len(r.ops))
	for k := range r.ops {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Check validates a job of kind with args before it is enqueued.
func (r *Registry) Check(kind string, args json.RawMessage) error {
	op, ok := r.ops[kind]
	if !ok {
		return fmt.Errorf("%w %q (known: %v)", ErrUnknownKind, kind, r.Kinds())
	}
	if op.Check != nil {
		return op.Check(args)
	}
	return nil
}

// ErrUnknownKind is a job kind no operation is registered for.
var ErrUnknownKind = errors.New("unknown job kind")

// errCancelled is the cause of an attempt's context cancelled on request.
var errCancelled = errors.New("job cancelled")

// errLost is the cause of an attempt's context cancelled because the job is no longer its own
// (marked interrupted by a sweep after a stall, and handed to another attempt).
var errLost = errors.New("job no longer this attempt's")

// Progress is what an operation reports: how far it is (done of total) and the cursor it resumes
// from. The runner persists it with each heartbeat; Checkpoint persists it at once.
type Progress struct {
	mu          sync.Mutex
	done, total int64
	cursor      json.RawMessage
	resumed     json.RawMessage
	dirty       bool
	persist     func(ctx context.Context) error // nil: report only (foreground)
}

// SetTotal sets how much there is to do.
func (p *Progress) SetTotal(n int64) {
	p.mu.Lock()
	p.total = n
	p.mu.Unlock()
}

// Add counts n more done.
func (p *Progress) Add(n int64) {
	p.mu.Lock()
	p.done += n
	p.mu.Unlock()
}

// Set sets done and total at once: the adapter for an operation's own progress callback.
func (p *Progress) Set(done, total int64) {
	p.mu.Lock()
	p.done, p.total = done, total
	p.mu.Unlock()
}

// Counts returns done and total.
func (p *Progress) Counts() (done, total int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done, p.total
}

// Cursor decodes into v the cursor an earlier attempt persisted; false when there is none.
func (p *Progress) Cursor(v any) (bool, error) {
	p.mu.Lock()
	raw := p.resumed
	p.mu.Unlock()
	if len(raw) == 0 || string(raw) == "null" {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return false, fmt.Errorf("resume cursor: %w", err)
	}
	return true, nil
}

// Checkpoint records cursor (the point a later attempt resumes from: everything before it is
// done and committed) and persists it with the progress now.
func (p *Progress) Checkpoint(ctx context.Context, cursor any) error {
	raw, err := json.Marshal(cursor)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	p.mu.Lock()
	p.cursor, p.dirty = raw, true
	persist := p.persist
	p.mu.Unlock()
	if persist == nil {
		return nil
	}
	return persist(ctx)
}

// snapshot returns done, total and the cursor to persist (nil if unchanged since the last).
func (p *Progress) snapshot() (done, total int64, cursor json.RawMessage) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.dirty {
		cursor, p.dirty = p.cursor, false
	}
	return p.done, p.total, cursor
}

// Rate is the attempt's speed in units done per second, and the time left at that speed (0 when
// unknown).
func Rate(done, total, attemptDone int64, runFor time.Duration) (perSec float64, eta time.Duration) {
	if runFor <= 0 || done <= attemptDone {
		return 0, 0
	}
	perSec = float64(done-attemptDone) / runFor.Seconds()
	if total > done {
		eta = time.Duration(float64(total-done) / perSec * float64(time.Second))
	}
	return perSec, eta
}
