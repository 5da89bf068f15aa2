package web

import (
	"cmp"
	"context"
	"errors"
	"iter"
	"net/http"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/cortexq/cortexq/queue/text"
)

// The bounds of a page's work (docs/web.md#hostile-results): what a page does grows with what it
// shows, never faster, and stops at the page's deadline.

// deadline is a page's: Config.PageDeadline after it got its slot. Past it the parts of the page
// whose work grows with what results hold (a task's or a what's messages, a log's lines) stop,
// and the page says so.
type deadline struct {
	at     time.Time
	passed atomic.Bool
}

type deadlineKey struct{}

// withDeadline gives r a page deadline d from now.
func withDeadline(r *http.Request, d time.Duration) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), deadlineKey{}, &deadline{at: time.Now().Add(d)}))
}

// pageDeadline is r's page deadline (every page that has one is made in a slot).
func pageDeadline(r *http.Request) *deadline {
	if d, ok := r.Context().Value(deadlineKey{}).(*deadline); ok {
		return d
	}
	return &deadline{at: time.Now().Add(2 * time.Second)}
}

// Passed reports whether the deadline has passed; once it has, it stays passed for the page.
func (d *deadline) Passed() bool {
	if d.passed.Load() {
		return true
	}
	if time.Now().After(d.at) {
		d.passed.Store(true)
		return true
	}
	return false
}

// within returns ctx ending at the deadline, for a read the page can do without.
func (d *deadline) within(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithDeadline(ctx, d.at)
}

// missed reports whether a read within the deadline failed with err because the deadline passed
// (not because the client went away): the page then goes on without it.
func (d *deadline) missed(parent context.Context, err error) bool {
	if err == nil || parent.Err() != nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) || !time.Now().Before(d.at) {
		d.passed.Store(true)
		return true
	}
	return false
}

// upTo yields list's items until the deadline passes.
func upTo[T any](d *deadline, list []T) iter.Seq[T] {
	return func(yield func(T) bool) {
		for _, x := range list {
			if d.Passed() || !yield(x) {
				return
			}
		}
	}
}

// Budgets of the lists of messages (the task page's, a what's on the report page): each
// message's details at most detailsHTML bytes of HTML, and once a page has shown listHTML of
// them, spentHTML each.
const (
	detailsHTML = 2048
	listHTML    = 512 << 10
	spentHTML   = 256
)

// textBudget clips the texts of a list within its budget.
type textBudget struct{ left int }

func newTextBudget() *textBudget { return &textBudget{left: listHTML} }

// clipLines is clipLines (text kept printable, line breaks kept, a marker where cut) within
// detailsHTML, or spentHTML once the budget is spent.
func (b *textBudget) clipLines(s string) string {
	n := detailsHTML
	if b.left < n {
		n = spentHTML
	}
	out := clipWith(text.PrintableLines, n, s)
	b.left -= htmlLen(out)
	return out
}

// htmlLen is the bytes s takes once html/template escapes it (as htmlCut counts them).
func htmlLen(s string) int {
	n := 0
	for _, r := range s {
		switch r {
		case '<', '>':
			n += 4
		case '&', '"', '\'', '+':
			n += 5
		case 0:
			n += 3
		default:
			n += utf8.RuneLen(r)
		}
	}
	return n
}

// maxSharing bounds the shared pages (shared) alive at once: each holds its bytes (at most
// maxPageBytes, a log page about 1 MB) until every client of it has them.
const maxSharing = 16

// flight is a page being made for every identical request that arrives meanwhile.
type flight struct {
	done    chan struct{}
	code    int
	header  http.Header
	body    []byte
	writers int // the requests still to write it (under Server.flightsMu)
}

// pageRecorder is the http.ResponseWriter a shared page is made into.
type pageRecorder struct {
	header http.Header
	code   int
	body   []byte
}

func (p *pageRecorder) Header() http.Header { return p.header }
func (p *pageRecorder) WriteHeader(code int) {
	if p.code == 0 {
		p.code = code
	}
}
func (p *pageRecorder) Write(b []byte) (int, error) {
	p.WriteHeader(http.StatusOK)
	p.body = append(p.body, b...)
	return len(b), nil
}

// shared makes a log page once for the identical requests (the same URL, the same session) that
// arrive while it is made: a page asked for by many at once costs one page's work, and the
// requests that follow wait for no slot of their own. The page is made into memory and written
// from there to each in pieces of 32 KiB; at most maxSharing such pages are alive at once, past
// them a page is made as any other (docs/web.md#hostile-results).
func (s *Server) shared(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, session, _ := s.session(r)
		key := r.URL.RequestURI() + "\x00" + session
		s.flightsMu.Lock()
		f, following := s.flights[key]
		if !following {
			select {
			case s.sharing <- struct{}{}:
			default:
				s.flightsMu.Unlock()
				h(w, r)
				return
			}
			f = &flight{done: make(chan struct{}), code: http.StatusInternalServerError}
			s.flights[key] = f
		}
		f.writers++
		s.flightsMu.Unlock()
		defer s.leave(f)
		if !following {
			s.makeShared(h, r, key, f)
		}
		select {
		case <-f.done:
		case <-r.Context().Done():
			return
		}
		for k, v := range f.header {
			w.Header()[k] = v
		}
		w.WriteHeader(f.code)
		for b := f.body; len(b) > 0; b = b[min(len(b), 32<<10):] {
			if _, err := w.Write(b[:min(len(b), 32<<10)]); err != nil {
				return
			}
		}
	}
}

// leave notes that a request is done with f: the last one frees its place.
func (s *Server) leave(f *flight) {
	s.flightsMu.Lock()
	f.writers--
	last := f.writers == 0
	s.flightsMu.Unlock()
	if last {
		<-s.sharing
	}
}

// makeShared makes f's page: for the requests that follow it too, so the page goes on if the
// first client goes away (it is bounded all the same: its slot, its deadline).
func (s *Server) makeShared(h http.HandlerFunc, r *http.Request, key string, f *flight) {
	defer func() {
		s.flightsMu.Lock()
		delete(s.flights, key)
		s.flightsMu.Unlock()
		close(f.done)
	}()
	rec := &pageRecorder{header: http.Header{}}
	h(rec, r.WithContext(context.WithoutCancel(r.Context())))
	f.code, f.header, f.body = cmp.Or(rec.code, http.StatusOK), rec.header, rec.body
}
