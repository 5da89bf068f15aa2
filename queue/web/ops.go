package web

import (
	"archive/zip"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/archive"
	"github.com/cortexq/cortexq/queue/inspect"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/text"
)

// ---- Dead letters and retries

// maxDeadRows bounds each list of the dead letters page.
const maxDeadRows = 500

func (s *Server) dead(r *http.Request) (view, error) {
	ctx := r.Context()
	dead, deadAt, err := s.deadLetters.get(ctx, s)
	if err != nil {
		return view{}, err
	}
	retries, err := s.inspect.QueuedRetries(ctx, maxDeadRows+1)
	if err != nil {
		return view{}, err
	}
	return view{Page: "dead", Title: "Dead letters and retries", Data: struct {
		Dead               []inspect.DeadLetter
		Retries            []inspect.QueuedRetry
		MoreDead, MoreRetr bool
		Max                int
		DeadAge            string
	}{dead[:min(len(dead), maxDeadRows)], retries[:min(len(retries), maxDeadRows)],
		len(dead) > maxDeadRows, len(retries) > maxDeadRows, maxDeadRows, ageOf(deadAt, time.Now())}}, nil
}

// rerunTask reruns one task (its corpus and service get a new run, as any rerun).
func (s *Server) rerunTask(r *http.Request) (string, error) {
	id, err := strconv.ParseInt(r.PostForm.Get("task"), 10, 64)
	if err != nil || id <= 0 {
		return "", badRequest("task %q: want a positive number", r.PostForm.Get("task"))
	}
	h, err := s.inspect.TaskHistoryMessages(r.Context(), id, -1)
	if err != nil {
		return "", err
	}
	sum, err := s.store.Rerun(r.Context(), lease.RerunScope{CorpusID: h.CorpusID, ServiceID: h.ServiceID,
		TaskIDs: []int64{id}, Note: "web: rerun task " + strconv.FormatInt(id, 10)})
	if err != nil {
		return "", err
	}
	s.deadLetters.forget() // the task may have been one
	return fmt.Sprintf("task %d: %s back to TODO in a new run of corpus %s, service %s", id, plural(sum.Tasks, "task", "tasks"), h.Corpus, h.Service), nil
}

// ---- Workers

// workerState is a worker's liveness: active when it asked for work or answered within the
// last minute, idle within the last idleFor, gone after.
func workerState(lastSeen, now time.Time) string {
	switch age := now.Sub(lastSeen); {
	case age <= time.Minute:
		return "active"
	case age <= idleFor:
		return "idle"
	}
	return "gone"
}

// idleFor is how long a worker not heard from stays idle before it counts as gone.
const idleFor = 15 * time.Minute

// maxWorkerAttempts is how many attempts the page of a worker's attempts lists.
const maxWorkerAttempts = 200

func (s *Server) workerAttempts(r *http.Request) (view, error) {
	worker := r.URL.Query().Get("worker")
	if worker == "" {
		return view{}, badRequest("worker is required")
	}
	atts, err := s.inspect.WorkerAttempts(r.Context(), worker, maxWorkerAttempts)
	if err != nil {
		return view{}, err
	}
	return view{Page: "attempts", Title: "Attempts of " + worker, Data: struct {
		Worker   string
		Attempts []inspect.WorkerAttempt
		Max      int
	}{worker, atts, maxWorkerAttempts}}, nil
}

// ---- The task page's messages and source

// severityRank orders a task's messages: the worst first.
func severityRank(s queue.Severity) int {
	switch s {
	case queue.SeverityFatal:
		return 0
	case queue.SeverityInvalid:
		return 1
	case queue.SeverityError:
		return 2
	case queue.SeverityWarning:
		return 3
	case queue.SeverityInfo:
		return 5
	}
	return 4
}

// shownMessage is a message on the task page, with the link to the source line it names.
type shownMessage struct {
	inspect.RunMessage
	Line         string // /task/N/file?name=F#LN, when the details name a file and line
	DetailsShown string // the details, printable and clipped within the page's budget (textBudget)
}

// fileLine finds "file.tex; line 23" in a message's details (LaTeXML's way of saying where).
var fileLine = regexp.MustCompile(`([A-Za-z0-9_./+-]+\.[A-Za-z0-9]+); line (\d+)`)

// sortMessages splits a task's messages into the problems (worst first, in order within a
// severity) and the infos, each with its source line's link if the source is readable.
func sortMessages(id int64, msgs []inspect.RunMessage, source bool) (problems, infos []shownMessage) {
	for _, m := range msgs {
		sm := shownMessage{RunMessage: m}
		if source && strings.Contains(m.Details, "; line ") {
			if f := fileLine.FindStringSubmatch(m.Details); f != nil {
				sm.Line = link("/task/"+strconv.FormatInt(id, 10)+"/file", "name", f[1]) + "#L" + f[2]
			}
		}
		if m.Severity == queue.SeverityInfo {
			infos = append(infos, sm)
		} else {
			problems = append(problems, sm)
		}
	}
	slices.SortStableFunc(problems, func(a, b shownMessage) int {
		return severityRank(a.Severity) - severityRank(b.Severity)
	})
	return problems, infos
}

// maxSourceShown bounds the source file shown on its page.
const maxSourceShown = 1 << 20

type sourceLine struct {
	N    int
	Text string
}

// sourceFile shows a file of a task's source archive with numbered lines (each an anchor #LN),
// as the task page's "file; line N" links open it. name is a member's path, or the end of one.
func (s *Server) sourceFile(r *http.Request) (view, error) {
	h, err := s.history(r, -1)
	if err != nil {
		return view{}, err
	}
	name := r.URL.Query().Get("name")
	if name == "" {
		return view{}, badRequest("name is required")
	}
	a, err := s.archivesOf(r, h)
	if err != nil {
		return view{}, err
	}
	zr, f, err := openZip(a.base, a.source)
	if err != nil {
		return view{}, httpError{http.StatusNotFound, "task " + strconv.FormatInt(h.ID, 10) + ": no source archive readable here"}
	}
	defer f.Close()
	var member *zip.File
	for _, m := range zr.File {
		if m.Name == name || strings.HasSuffix(m.Name, "/"+path.Base(name)) && member == nil || path.Base(m.Name) == path.Base(name) && member == nil {
			member = m
			if m.Name == name {
				break
			}
		}
	}
	if member == nil {
		return view{}, httpError{http.StatusNotFound, name + ": not in the source archive"}
	}
	rc, err := member.Open()
	if err != nil {
		return view{}, httpError{http.StatusNotFound, member.Name + ": " + err.Error()}
	}
	b, err := io.ReadAll(io.LimitReader(rc, maxSourceShown+1))
	rc.Close()
	if err != nil {
		return view{}, httpError{http.StatusNotFound, member.Name + ": " + err.Error()}
	}
	cut := len(b) > maxSourceShown
	body, _ := htmlCut(text.PrintableLines(string(b[:min(len(b), maxSourceShown)])), maxSourceShown)
	var lines []sourceLine
	for i, l := range strings.Split(strings.TrimSuffix(body, "\n"), "\n") {
		lines = append(lines, sourceLine{N: i + 1, Text: l})
	}
	return view{Page: "file", Title: member.Name + " of task " + strconv.FormatInt(h.ID, 10), Data: struct {
		ID    int64
		Name  string
		Lines []sourceLine
		Cut   bool
	}{h.ID, member.Name, lines, cut}}, nil
}

// openZip opens an archive beneath base as a zip.
func openZip(base, p string) (*zip.Reader, *os.File, error) {
	if p == "" {
		return nil, nil, errNoArchive
	}
	f, err := archive.Open(base, p)
	if err != nil {
		return nil, nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	zr, err := zip.NewReader(f, info.Size())
	if err != nil && zr == nil {
		f.Close()
		return nil, nil, err
	}
	return zr, f, nil
}

var errNoArchive = httpError{http.StatusNotFound, "no archive"}

// taskView shows a task's preview alone, in a page of its own (the task page's "open preview
// in its own tab"): the frame is the same sandboxed one.
func (s *Server) taskView(r *http.Request) (view, error) {
	h, err := s.history(r, -1)
	if err != nil {
		return view{}, err
	}
	p := taskPage{TaskHistory: h}
	s.readArchives(r, &p)
	if p.Preview == "" {
		return view{}, httpError{http.StatusNotFound, "task " + strconv.FormatInt(h.ID, 10) + ": " + noPreview(p)}
	}
	return view{Page: "view", Title: "Preview of task " + strconv.FormatInt(h.ID, 10), Data: p}, nil
}

// noPreview says why a task has no preview.
func noPreview(p taskPage) string {
	switch {
	case p.Service != previewService:
		return "only " + previewService + " results have a preview"
	case p.Status == queue.StatusInvalid:
		return "no preview: the task is Invalid, its source could not be converted (see its messages), so no result was kept"
	case !p.Status.Terminal():
		return "no preview yet: the task has no result in its current run"
	case !p.HasResult:
		return "no preview: no result archive readable here"
	}
	return "no preview: the result archive holds no HTML page"
}

// countUpTo writes n, or "more than max" past it.
func countUpTo(n, max int) string {
	if n > max {
		return "more than " + commas(int64(max))
	}
	return commas(int64(n))
}
