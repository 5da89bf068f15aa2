package web

import (
	"errors"
	"iter"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/api"
	"github.com/cortexq/cortexq/queue/archive"
	"github.com/cortexq/cortexq/queue/inspect"
)

// previewService is the service whose results hold an HTML page to preview.
const previewService = "tex_to_html"

// maxTaskMessages is how many messages the task page lists (cortexq task show lists all).
const maxTaskMessages = 1000

// maxPreviewMember bounds a preview member served from a result archive.
const maxPreviewMember = 64 << 20

func taskID(r *http.Request) (int64, error) {
	v := r.PathValue("id")
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id <= 0 {
		return 0, badRequest("task id %q: want a positive number", v)
	}
	return id, nil
}

// archives are where a task's source and result archives lie, with its corpus's path.
type archives struct {
	base, source, result string
}

// taskArchives reads the request's task and where its archives lie.
func (s *Server) taskArchives(r *http.Request) (inspect.TaskHistory, archives, error) {
	h, err := s.history(r, -1)
	if err != nil {
		return h, archives{}, err
	}
	a, err := s.archivesOf(r, h)
	return h, a, err
}

func (s *Server) archivesOf(r *http.Request, h inspect.TaskHistory) (archives, error) {
	corpus, err := s.catalog.Corpus(r.Context(), h.CorpusID)
	if err != nil {
		return archives{}, err
	}
	base := corpus.Path
	return archives{base: base, source: h.Entry, result: archive.ResultPath(base, h.Entry, h.Service, corpus.SandboxID)}, nil
}

// history reads the task of the request's path, with at most messages of its messages (below 0:
// none; only the task page lists them).
func (s *Server) history(r *http.Request, messages int) (inspect.TaskHistory, error) {
	id, err := taskID(r)
	if err != nil {
		return inspect.TaskHistory{}, err
	}
	h, err := s.inspect.TaskHistoryMessages(r.Context(), id, messages)
	if errors.Is(err, queue.ErrNotFound) {
		return h, httpError{code: http.StatusNotFound, msg: "task " + strconv.FormatInt(id, 10) + ": no such task"}
	}
	return h, err
}

type timelineBar struct {
	X, W, Y       int
	Label, Class  string
	Worker, Title string
}

type taskPage struct {
	inspect.TaskHistory
	Timeline   []timelineBar
	TimelineH  int
	Shown      []inspect.RunMessage // the first maxTaskMessages messages
	Problems   []shownMessage       // of those, all but the infos, the worst first
	Infos      []shownMessage       // the infos, folded
	More       bool                 // there are more
	Preview    string               // the preview frame's URL, if any
	NoPreview  string               // why there is none, for a tex_to_html task
	HasResult  bool
	HasSource  bool
	ReportBack string
	// CurrentRun is the run of the corpus and service the task's current run belongs to, and
	// AttemptRuns each attempt's: the runs page's numbers (docs/web.md#runs).
	CurrentRun  int64
	AttemptRuns []int64
	RunsURL     string
	// MessagesLate: the messages were not read by the page's deadline (d, of PageDeadline).
	MessagesLate bool
	PageDeadline time.Duration
	d            *deadline
}

// ProblemsShown and InfosShown are the messages the page lists by its deadline, and Late
// whether it passed (docs/web.md#hostile-results).
func (p taskPage) ProblemsShown() iter.Seq[shownMessage] { return upTo(p.d, p.Problems) }
func (p taskPage) InfosShown() iter.Seq[shownMessage]    { return upTo(p.d, p.Infos) }
func (p taskPage) Late() bool                            { return p.d.Passed() }

func (s *Server) task(r *http.Request) (view, error) {
	h, err := s.history(r, -1)
	if err != nil {
		return view{}, err
	}
	p := taskPage{ReportBack: link("/report", "corpus", h.Corpus, "service", h.Service),
		d: pageDeadline(r), PageDeadline: s.cfg.PageDeadline}
	ctx, cancel := p.d.within(r.Context())
	h.Messages, err = s.inspect.TaskMessages(ctx, h.ID, maxTaskMessages+1)
	cancel()
	if p.MessagesLate = p.d.missed(r.Context(), err); err != nil && !p.MessagesLate {
		return view{}, err
	}
	p.TaskHistory = h
	p.Shown = h.Messages[:min(len(h.Messages), maxTaskMessages)]
	p.More = len(h.Messages) > len(p.Shown)
	runs, err := s.reports.Runs(r.Context(), queue.Scope{CorpusID: h.CorpusID, ServiceID: h.ServiceID})
	if err != nil {
		return view{}, err
	}
	p.RunsURL = link("/runs", "corpus", h.Corpus, "service", h.Service)
	if len(runs) > 0 {
		p.CurrentRun = runs[len(runs)-1].ID
	}
	for _, a := range h.Attempts {
		p.AttemptRuns = append(p.AttemptRuns, api.RunAt(runs, a.LeasedAt))
	}
	p.Timeline, p.TimelineH = timeline(h.Attempts, p.AttemptRuns, time.Now())
	s.readArchives(r, &p)
	p.Problems, p.Infos = sortMessages(h.ID, p.Shown, p.HasSource)
	b := newTextBudget()
	for _, list := range [][]shownMessage{p.Problems, p.Infos} {
		for i := range list {
			list[i].DetailsShown = b.clipLines(list[i].Details)
		}
	}
	if p.Preview == "" && h.Service == previewService {
		p.NoPreview = noPreview(p)
	}
	return view{Page: "task", Title: "Task " + strconv.FormatInt(h.ID, 10), Data: p}, nil
}

// readArchives notes which of a task's archives are readable here, and its preview's URL.
func (s *Server) readArchives(r *http.Request, p *taskPage) {
	a, err := s.archivesOf(r, p.TaskHistory)
	if err != nil {
		return
	}
	p.HasSource = regular(a.base, a.source)
	p.HasResult = a.result != "" && regular(a.base, a.result)
	if p.HasResult && p.Service == previewService {
		if m := previewMember(a); m != "" {
			p.Preview = s.cfg.PreviewOrigin + "/task/" + strconv.FormatInt(p.ID, 10) + "/preview/" + memberURL(m)
		}
	}
}

// memberURL escapes an archive member's path for a URL, segment by segment.
func memberURL(member string) string {
	parts := strings.Split(member, "/")
	for i, s := range parts {
		parts[i] = url.PathEscape(s)
	}
	return strings.Join(parts, "/")
}

func regular(base, p string) bool {
	if p == "" {
		return false
	}
	f, err := archive.Open(base, p)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// timeline lays a task's attempts out as bars: one row each, from leased to answered (or now),
// labelled with the run of the corpus each belongs to (runs, as runAt gives them).
func timeline(attempts []inspect.Attempt, runs []int64, now time.Time) ([]timelineBar, int) {
	if len(attempts) == 0 {
		return nil, 0
	}
	start, end := attempts[0].LeasedAt, attempts[0].LeasedAt
	for _, a := range attempts {
		if a.LeasedAt.Before(start) {
			start = a.LeasedAt
		}
		e := now
		if a.AnsweredAt != nil {
			e = *a.AnsweredAt
		}
		if e.After(end) {
			end = e
		}
	}
	span := end.Sub(start)
	if span <= 0 {
		span = time.Millisecond
	}
	const width = 600
	var bars []timelineBar
	for i, a := range attempts {
		e, class, outcome := now, "running", "running"
		if a.AnsweredAt != nil {
			e = *a.AnsweredAt
		}
		if a.Outcome != "" {
			class, outcome = a.Outcome, a.Outcome
		}
		x := int(float64(a.LeasedAt.Sub(start)) / float64(span) * width)
		w := max(int(float64(e.Sub(a.LeasedAt))/float64(span)*width), 2)
		bars = append(bars, timelineBar{X: x, W: min(w, width-x+2), Y: i * 22, Class: "o-" + cssName(class),
			Label:  "run #" + strconv.FormatInt(runs[i], 10) + " attempt " + strconv.Itoa(int(a.Attempt)) + ": " + outcome,
			Worker: a.Worker, Title: a.Worker + " on " + a.Replica + ", " + e.Sub(a.LeasedAt).Round(time.Millisecond).String()})
	}
	return bars, len(attempts) * 22
}

// cssName keeps the letters of s, for a class name.
func cssName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r == '_' {
			return r
		}
		return -1
	}, s)
}

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
		return view{}, httpError{code: http.StatusNotFound, msg: "task " + strconv.FormatInt(h.ID, 10) + ": " + noPreview(p)}
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
