// Package verify compares what the database records with a corpus's files (`cortexq verify`,
// docs/operations.md "Backup and restore"): a finished task whose result archive is missing, or
// of another size or content than its claim recorded; a result archive no task accounts for; a
// source archive changed or gone since its import. It reads the tasks a page at a time and walks
// the corpora's directories one at a time, so its memory does not grow with their number.
package verify

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/archive"
	"github.com/cortexq/cortexq/queue/inspect"
)

// Kind is what is wrong.
type Kind string

// The kinds of inconsistency, in the order a report lists them.
const (
	Missing       Kind = "missing"        // a finished task's result archive is not there
	SizeDiffers   Kind = "size_differs"   // it is there, of another size than recorded (truncated, replaced)
	Altered       Kind = "altered"        // of the recorded size, another SHA-256
	Orphan        Kind = "orphan"         // a result archive no task accounts for
	SourceMissing Kind = "source_missing" // a task's source archive is gone
	SourceChanged Kind = "source_changed" // of another size or modification time than when imported
)

// Kinds lists every Kind in report order.
var Kinds = []Kind{Missing, SizeDiffers, Altered, Orphan, SourceMissing, SourceChanged}

// Finding is one inconsistency. TaskID is 0 for an orphan.
type Finding struct {
	Kind      Kind   `json:"kind"`
	TaskID    int64  `json:"task_id,omitempty"`
	CorpusID  int32  `json:"corpus_id"`
	ServiceID int32  `json:"service_id"`
	Entry     string `json:"entry,omitempty"`
	Path      string `json:"path"`
	Detail    string `json:"detail"`
	// SourceSize and SourceMtime are the source as it is now (SourceChanged), for a requeue to
	// record.
	SourceSize  int64     `json:"-"`
	SourceMtime time.Time `json:"-"`
}

// Requeueable reports whether running the task again mends the finding.
func (f Finding) Requeueable() bool { return f.TaskID != 0 && f.Kind != SourceMissing }

// Config says what to verify and where findings go.
type Config struct {
	Reader *inspect.Reader
	// Scope limits it to a corpus and a service (zero: all).
	Scope queue.Scope
	// Services are every service's id by name: a walk tells result archives from sources by them.
	Services map[string]int32
	// Quick compares sizes only; otherwise an archive of the recorded size is read for its digest.
	Quick bool
	// Workers is how many files are checked at once (default 4).
	Workers int
	// PageSize is how many tasks are read a query (default 5,000).
	PageSize int
	// Found is called for each finding, one call at a time.
	Found func(Finding) error
}

// Progress counts what a Run has done so far; read it while Run works.
type Progress struct {
	Tasks    atomic.Int64 // tasks checked
	Archives atomic.Int64 // result archives found on disk
	Bytes    atomic.Int64 // bytes read for digests
	Found    atomic.Int64 // findings
}

// Run checks the tasks of cfg.Scope against the files, then walks the corpora's directories for
// archives no task accounts for, and returns the count of findings by kind.
func Run(ctx context.Context, cfg Config, p *Progress) (map[Kind]int64, error) {
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = 5000
	}
	r := &run{cfg: cfg, p: p, counts: map[Kind]int64{}}
	if err := r.tasks(ctx); err != nil {
		return r.counts, err
	}
	if err := r.walkCorpora(ctx); err != nil {
		return r.counts, err
	}
	return r.counts, nil
}

type run struct {
	cfg    Config
	p      *Progress
	mu     sync.Mutex // serializes Found and counts
	counts map[Kind]int64
}

func (r *run) found(f Finding) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts[f.Kind]++
	r.p.Found.Add(1)
	return r.cfg.Found(f)
}

// tasks checks every task of the scope, a page at a time, cfg.Workers files at once.
func (r *run) tasks(ctx context.Context) error {
	after := int64(0)
	for {
		page, err := r.cfg.Reader.VerifyTasks(ctx, r.cfg.Scope, after, r.cfg.PageSize)
		if err != nil {
			return err
		}
		if len(page) == 0 {
			return nil
		}
		after = page[len(page)-1].ID
		if err := r.checkPage(ctx, page); err != nil {
			return err
		}
	}
}

func (r *run) checkPage(ctx context.Context, page []inspect.VerifyTask) error {
	next := atomic.Int64{}
	errs := make([]error, r.cfg.Workers)
	var wg sync.WaitGroup
	for w := range r.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(len(page)) || ctx.Err() != nil {
					return
				}
				if err := r.checkTask(&page[i]); err != nil {
					errs[w] = err
					return
				}
				r.p.Tasks.Add(1)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return ctx.Err()
}

// checkTask compares one task's source and result archive with what is recorded.
func (r *run) checkTask(t *inspect.VerifyTask) error {
	base := Finding{TaskID: t.ID, CorpusID: t.CorpusID, ServiceID: t.ServiceID, Entry: t.Entry}
	if t.SourceSize != nil && t.SourceMtime != nil {
		f := base
		f.Path = t.Entry
		st, err := os.Stat(t.Entry)
		switch {
		case err != nil:
			f.Kind, f.Detail = SourceMissing, statError(err)
		case st.Size() != *t.SourceSize || !sameTime(st.ModTime(), *t.SourceMtime):
			f.Kind = SourceChanged
			f.Detail = fmt.Sprintf("imported %d bytes modified %s, now %d bytes modified %s", *t.SourceSize,
				t.SourceMtime.UTC().Format(time.RFC3339Nano), st.Size(), st.ModTime().UTC().Format(time.RFC3339Nano))
			f.SourceSize, f.SourceMtime = st.Size(), st.ModTime()
		}
		if f.Kind != "" {
			if err := r.found(f); err != nil {
				return err
			}
		}
	}
	if !t.HasResult || t.ResultSize != nil && *t.ResultSize < 0 {
		return nil // no archive expected (not finished, dead-lettered, or none kept)
	}
	path := archive.ResultPath(t.CorpusPath, t.Entry, t.Service, t.SandboxID)
	if path == "" {
		return nil
	}
	f := base
	f.Path = path
	f.Kind, f.Detail = r.checkResult(path, t.ResultSize, t.ResultDigest)
	if f.Kind == "" {
		return nil
	}
	return r.found(f)
}

// checkResult compares a result archive with its recorded size and digest (nil: not recorded).
func (r *run) checkResult(path string, size *int64, digest []byte) (Kind, string) {
	st, err := os.Stat(path)
	if err != nil {
		return Missing, statError(err)
	}
	if size == nil {
		return "", "" // recorded by a replica of an earlier release: only its presence is known
	}
	if st.Size() != *size {
		return SizeDiffers, fmt.Sprintf("recorded %d bytes, found %d", *size, st.Size())
	}
	if r.cfg.Quick || digest == nil {
		return "", ""
	}
	sum, n, err := fileDigest(path)
	r.p.Bytes.Add(n)
	if err != nil {
		return Missing, err.Error()
	}
	if string(sum) != string(digest) {
		return Altered, fmt.Sprintf("recorded sha256 %s, found %s", hex.EncodeToString(digest), hex.EncodeToString(sum))
	}
	return "", ""
}

func fileDigest(path string) ([]byte, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return nil, n, fmt.Errorf("read %s: %w", path, err)
	}
	return h.Sum(nil), n, nil
}

// sameTime compares modification times to the microsecond, the database's precision.
func sameTime(a, b time.Time) bool {
	return a.Truncate(time.Microsecond).Equal(b.Truncate(time.Microsecond))
}

func statError(err error) string {
	if errors.Is(err, fs.ErrNotExist) {
		return "no such file"
	}
	return err.Error()
}
