package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// importProgress shows how far an import is as it goes, on stderr: on a terminal a line
// redrawn a few times a second (a bar when the count to come is known, as with --from-list),
// elsewhere a line every --progress-every (5 s), so a log shows a long import is alive.
type importProgress struct {
	what     string // what is counted: "import", "activate", ...
	out      io.Writer
	terminal bool
	total    atomic.Int64 // -1: unknown (a walk)
	began    time.Time
	n        atomic.Int64
	done     chan struct{}
	wg       sync.WaitGroup
}

func newImportProgress(out io.Writer, total int64, every time.Duration) *importProgress {
	return newProgress(out, "import", total, every)
}

// newProgress is newImportProgress for any long operation, what naming it.
func newProgress(out io.Writer, what string, total int64, every time.Duration) *importProgress {
	p := &importProgress{what: what, out: out, done: make(chan struct{}), began: time.Now()}
	p.total.Store(total)
	if f, ok := out.(*os.File); ok && isTerminal(f) {
		p.terminal, every = true, 250*time.Millisecond
	}
	if every <= 0 {
		return p
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.done:
				return
			case <-t.C:
				p.print()
			}
		}
	}()
	return p
}

// add counts entries read.
func (p *importProgress) add(n int64) { p.n.Add(n) }

func (p *importProgress) count() int64 { return p.n.Load() }

// set is a catalog.ProgressFunc: done of total (-1: unknown).
func (p *importProgress) set(done, total int64) {
	p.n.Store(done)
	p.total.Store(total)
}

func (p *importProgress) line() string {
	n, total, took := p.n.Load(), p.total.Load(), time.Since(p.began)
	rate := float64(n) / max(took.Seconds(), 1e-3)
	if total >= 0 {
		return fmt.Sprintf("%s %s %s/%s entries, %.0f/s, %s", p.what, bar(n, total, 30), commas(n), commas(total), rate, took.Round(time.Second))
	}
	return fmt.Sprintf("%s: %s entries found and added so far, %.0f/s, %s", p.what, commas(n), rate, took.Round(time.Second))
}

func (p *importProgress) print() {
	if p.terminal {
		fmt.Fprintf(p.out, "\r\033[K%s", p.line())
		return
	}
	fmt.Fprintln(p.out, p.line())
}

// stop ends the display (on a terminal, its last state stays on its line).
func (p *importProgress) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	close(p.done)
	p.wg.Wait()
	if p.terminal {
		p.print()
		fmt.Fprintln(p.out)
	}
}
