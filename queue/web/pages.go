package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/inspect"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/reports"
	"github.com/cortexq/cortexq/queue/text"
)

// scopeParams reads the required corpus and service of a request and looks them up.
func (s *Server) scopeParams(r *http.Request) (corpus, service string, scope queue.Scope, err error) {
	q := r.URL.Query()
	if r.Method == http.MethodPost {
		q = r.PostForm
	}
	corpus, service = q.Get("corpus"), q.Get("service")
	if corpus == "" || service == "" {
		return "", "", scope, badRequest("corpus and service are required")
	}
	scope, err = s.catalog.LookupScope(r.Context(), corpus, service)
	if errors.Is(err, queue.ErrNotFound) {
		return "", "", scope, httpError{http.StatusNotFound, err.Error()}
	}
	return corpus, service, scope, err
}

// intParam reads an optional integer parameter within [min, max].
func intParam(q url.Values, name string, def, min, max int) (int, error) {
	v := q.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < min || n > max {
		return 0, badRequest("%s %q: want a whole number from %d to %d", name, v, min, max)
	}
	return n, nil
}

// pageParams reads limit (default 100) and offset within the report's caps.
func pageParams(q url.Values) (limit, offset int, err error) {
	if limit, err = intParam(q, "limit", 100, 1, reports.ReportMaxLimit); err != nil {
		return 0, 0, err
	}
	offset, err = intParam(q, "offset", 0, 0, reports.ReportMaxOffset)
	return limit, offset, err
}

// link is a path with a query, its empty values left out.
func link(path string, pairs ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] != "" {
			v.Set(pairs[i], pairs[i+1])
		}
	}
	if len(v) == 0 {
		return path
	}
	return path + "?" + v.Encode()
}

// ---- Overview

type overviewRow struct {
	inspect.Progress
	Sandbox    string // the parent's name, for a sandbox
	Key        string // the row's key in /live
	Throughput sparkline
	PerMinute  int64
	// Share is the corpus's share of its service's leases over the last minute (its fair share
	// as served, docs/semantics.md#fair-share).
	Share string
	// Paused: tasks of it are blocked (cortexq pause); CanPause: it has work left to pause.
	Paused, CanPause bool
}

type liveFigures struct {
	Rows          map[string]liveRow `json:"rows"`
	ActiveWorkers int64              `json:"active_workers"`
	DeadLetters   int64              `json:"dead_letters"`
	Replicas      []liveReplica      `json:"replicas"`
	At            string             `json:"at"`
	// Every is when the browser should ask again, in milliseconds: liveEvery, or the longer
	// wait that keeps reading the figures within LiveBudget.
	Every int64 `json:"every"`
}

type liveRow struct {
	Done, Tasks, TODO, InFlight, Reserved, Queued, DeadLetters int64
	NoProblem, Warning, Error, Fatal, Invalid, Blocked         int64
	PerMinute                                                  int64
	Percent, Share                                             string
	Spark                                                      string // the sparkline's points
}

// leaseShare writes a corpus's share of its service's leases over the last minute.
func leaseShare(p inspect.Progress) string { return fmt.Sprintf("%.1f%%", 100*p.LeaseShare) }

type liveReplica struct {
	Replica, State                      string
	InFlight, Reserved                  int64
	LeasesLastMinute, ResultsLastMinute int64
	LastLeasedAt, LastReaperPass        string
}

func rowKey(p inspect.Progress) string { return fmt.Sprintf("%d-%d", p.CorpusID, p.ServiceID) }

func (s *Server) overview(r *http.Request) (view, error) {
	ctx := r.Context()
	progress, err := s.inspect.TotalsProgress(ctx)
	if err != nil {
		return view{}, err
	}
	sandboxes, err := s.reports.Sandboxes(ctx)
	if err != nil {
		return view{}, err
	}
	parent := map[string]string{}
	for _, sb := range sandboxes {
		parent[sb.Name] = sb.Parent
	}
	trail, err := s.trail(ctx)
	if err != nil {
		return view{}, err
	}
	withActivity(progress, trail)
	through, replicas := trail.through, trail.replicas
	active, err := s.inspect.ActiveWorkers(ctx)
	if err != nil {
		return view{}, err
	}
	reap, reaped, err := s.inspect.LastReapAge(ctx)
	if err != nil {
		return view{}, err
	}
	retries, err := s.inspect.QueuedRetries(ctx, maxDeadRows+1)
	if err != nil {
		return view{}, err
	}
	var rows []overviewRow
	var dead int64
	for _, p := range progress {
		minutes := through[queue.Scope{CorpusID: p.CorpusID, ServiceID: p.ServiceID}]
		rows = append(rows, overviewRow{Progress: p, Sandbox: parent[p.Corpus], Key: rowKey(p),
			Throughput: newSparkline(minutes), PerMinute: p.RepliesLastMinute, Share: leaseShare(p),
			Paused: p.Blocked > 0, CanPause: p.TODO+p.Queued+p.Reserved > 0})
		dead += p.DeadLetters
	}
	hour := make([]int64, inspect.ThroughputMinutes)
	for _, minutes := range through {
		for i, n := range minutes {
			hour[i] += n
		}
	}
	charts := []timeChart{
		newTimeChart("Last hour", hour, 1, 15, func(ago int) string { return agoLabel(ago) }),
		newTimeChart("Last day", trail.day, 15, 24, func(ago int) string { return agoLabel(ago * 15) }),
	}
	lastReap := "never"
	if reaped {
		lastReap = reap.Round(time.Second).String() + " ago"
	}
	return view{Page: "overview", Title: "Overview", Data: struct {
		Rows          []overviewRow
		Replicas      []inspect.ReplicaLoad
		ActiveWorkers int64
		DeadLetters   int64
		Retries       string
		LastReap      string
		Charts        []timeChart
	}{rows, replicas, active, dead, countUpTo(len(retries), maxDeadRows), lastReap, charts}}, nil
}

// agoLabel writes minutes ago for a chart's axis: "now", "-15m", "-6h".
func agoLabel(minutes int) string {
	switch {
	case minutes == 0:
		return "now"
	case minutes%60 == 0:
		return "-" + strconv.Itoa(minutes/60) + "h"
	}
	return "-" + strconv.Itoa(minutes) + "m"
}

// liveEvery is how often a browser refreshes the overview's live figures at the quickest;
// static/live.js slows down to liveSlowest while they do not change.
const liveEvery = 1500 * time.Millisecond

// liveJSON serves the overview's changing figures for static/live.js. They are computed at
// most once per LiveMaxAge however many browsers poll, and never more often than keeps their
// queries under half of LiveBudget of the database's time (the attempts trail's figures, read
// in the background, get the other half): figures that took 100 ms to read are read again after
// 40 s at the earliest (with the default 5 ms a second). Read from task_totals they take about a
// millisecond (docs/web.md#cost-to-the-database).
func (s *Server) liveJSON(w http.ResponseWriter, r *http.Request) {
	s.liveMu.Lock()
	defer s.liveMu.Unlock()
	if s.live == nil || time.Since(s.liveAt) >= s.liveMaxAge() {
		start := time.Now()
		fig, err := s.liveFigures(r)
		if err == nil {
			s.liveCosts = append(s.liveCosts[max(0, len(s.liveCosts)-2):], time.Since(start))
			fig.Every = s.liveMaxAge().Milliseconds()
			s.live, err = json.Marshal(fig)
		}
		if err != nil {
			s.live = nil
			s.liveMu.Unlock()
			s.fail(w, r, err)
			s.liveMu.Lock()
			return
		}
		s.liveAt = time.Now()
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(s.live)
}

// liveMaxAge is how long the last live figures serve: LiveMaxAge, or longer when reading them
// cost more than LiveBudget allows. The cost is the least of the last three reads: one read
// slowed by a busy machine does not stop the figures for minutes; reads that stay dear do.
func (s *Server) liveMaxAge() time.Duration {
	if len(s.liveCosts) == 0 {
		return s.cfg.LiveMaxAge
	}
	cost := slices.Min(s.liveCosts)
	return max(s.cfg.LiveMaxAge, time.Duration(float64(cost)*float64(time.Second)/(float64(s.cfg.LiveBudget)/2)))
}

// trailEvery is how often the figures read from the attempts trail (sparklines, replicas, dead
// letters, the last minute's replies and leases) are read at the quickest: they move by the
// minute, and on millions of attempts they take a second.
const trailEvery = 15 * time.Second

// trailFigures are the overview's figures read from the attempts trail.
type trailFigures struct {
	through  map[queue.Scope][]int64
	replicas []inspect.ReplicaLoad
	activity map[queue.Scope]inspect.Activity
	day      []int64 // replies per quarter hour over the last day
}

// trail returns the figures of the attempts trail. Only the first call waits for them; later
// ones get the last figures read while, once they are older than trailEvery (or than keeps their
// reading within half of LiveBudget), one read in the background replaces them.
func (s *Server) trail(ctx context.Context) (trailFigures, error) {
	s.trailMu.Lock()
	defer s.trailMu.Unlock()
	if s.trailAt.IsZero() {
		start := time.Now()
		t, err := s.readTrail(ctx)
		if err != nil {
			return t, err
		}
		s.trailData, s.trailAt, s.trailCost = t, time.Now(), time.Since(start)
		return t, nil
	}
	wait := max(trailEvery, time.Duration(float64(s.trailCost)*float64(time.Second)/(float64(s.cfg.LiveBudget)/2)))
	if !s.trailBusy && time.Since(s.trailAt) >= wait {
		s.trailBusy = true
		go s.refreshTrail()
	}
	return s.trailData, nil
}

func (s *Server) refreshTrail() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	t, err := s.readTrail(ctx)
	s.trailMu.Lock()
	defer s.trailMu.Unlock()
	s.trailBusy = false
	if err != nil {
		s.logger.Error("overview: reading the attempts trail", "error", err)
		s.trailAt = time.Now() // try again after the same wait
		return
	}
	s.trailData, s.trailAt, s.trailCost = t, time.Now(), time.Since(start)
}

func (s *Server) readTrail(ctx context.Context) (trailFigures, error) {
	var t trailFigures
	var err error
	if t.through, err = s.inspect.Throughput(ctx); err != nil {
		return t, err
	}
	if t.replicas, err = s.inspect.ReplicaLoads(ctx); err != nil {
		return t, err
	}
	if t.activity, err = s.inspect.Activity(ctx); err != nil {
		return t, err
	}
	t.day, err = s.inspect.ThroughputDay(ctx)
	return t, err
}

// withActivity adds the trail's figures to progress read from the totals.
func withActivity(progress []inspect.Progress, t trailFigures) {
	for i, p := range progress {
		a := t.activity[queue.Scope{CorpusID: p.CorpusID, ServiceID: p.ServiceID}]
		progress[i].DeadLetters, progress[i].RepliesLastMinute = a.DeadLetters, a.RepliesLastMinute
		progress[i].LeasesLastMinute, progress[i].LeaseShare = a.LeasesLastMinute, a.LeaseShare
	}
}

func (s *Server) liveFigures(r *http.Request) (liveFigures, error) {
	ctx := r.Context()
	progress, err := s.inspect.TotalsProgress(ctx)
	if err != nil {
		return liveFigures{}, err
	}
	active, err := s.inspect.ActiveWorkers(ctx)
	if err != nil {
		return liveFigures{}, err
	}
	trail, err := s.trail(ctx)
	if err != nil {
		return liveFigures{}, err
	}
	withActivity(progress, trail)
	through, replicas := trail.through, trail.replicas
	out := liveFigures{Rows: map[string]liveRow{}, ActiveWorkers: active, Replicas: []liveReplica{},
		At: time.Now().UTC().Format("15:04:05")}
	for _, p := range progress {
		spark := newSparkline(through[queue.Scope{CorpusID: p.CorpusID, ServiceID: p.ServiceID}])
		out.Rows[rowKey(p)] = liveRow{Done: p.Done(), Tasks: p.Tasks, TODO: p.TODO, InFlight: p.InFlight,
			Reserved: p.Reserved, Queued: p.Queued, DeadLetters: p.DeadLetters, NoProblem: p.NoProblem,
			Warning: p.Warning, Error: p.Error, Fatal: p.Fatal, Invalid: p.Invalid, Blocked: p.Blocked,
			PerMinute: p.RepliesLastMinute, Percent: percent(p.Done(), p.Tasks), Share: leaseShare(p), Spark: spark.Points}
		out.DeadLetters += p.DeadLetters
	}
	for _, rp := range replicas {
		out.Replicas = append(out.Replicas, liveReplica{Replica: text.Printable(rp.Replica), State: rp.State, InFlight: rp.InFlight, Reserved: rp.Reserved,
			LeasesLastMinute: rp.LeasesLastMinute, ResultsLastMinute: rp.ResultsLastMinute,
			LastLeasedAt: stamp(rp.LastLeasedAt), LastReaperPass: stamp(rp.LastReaperPass)})
	}
	return out, nil
}

// ---- Report

// reportStatuses are the report's rows without a severity, in order (as cortexq report).
var reportStatuses = []queue.Status{queue.StatusNoProblem, queue.StatusWarning, queue.StatusError,
	queue.StatusFatal, queue.StatusInvalid, queue.StatusTODO, queue.StatusDispatched, queue.StatusBlocked}

// slice is a report slice as the pages name it, with its links.
type slice struct {
	Corpus, Service, Severity, Category, What string
	// Every: the all-tasks view, a severity's messages in the tasks of every status
	// (docs/reports.md#all-tasks).
	Every bool
}

func (sl slice) pairs() []string {
	all := ""
	if sl.Every {
		all = "1"
	}
	return []string{"corpus", sl.Corpus, "service", sl.Service, "severity", sl.Severity, "category", sl.Category, "what", sl.What, "all", all}
}

// AllFlag is the form value of All.
func (sl slice) AllFlag() string {
	if sl.Every {
		return "1"
	}
	return ""
}

// URL is the report page of the slice.
func (sl slice) URL() string { return link("/report", sl.pairs()...) }

type reportRow struct {
	Name    string
	Tasks   int64
	Msgs    int64
	Percent string
	Bar     int   // the share bar's width, of shareW
	Slice   slice // the slice the row opens (and its rerun button reruns)
	Open    bool  // whether the row opens a deeper level
}

type reportPage struct {
	slice
	Level       string // severity, category, what, messages
	Heading     string
	All, Total  int64
	Rows        []reportRow
	Messages    []shownReportMessage
	Crumbs      []reportRow
	Limit       int
	Offset      int
	Count       int64 // rows in the whole list (categories, whats), for paging
	Prev, Next  string
	SliceStatus string
	// Fold says how fresh the category and what levels' counts (the report rollups) are.
	Fold string
	// ByStatus and AllTasks are the two views' links at this level.
	ByStatus, AllTasks string
	// MessagesLate: the messages were not read by the page's deadline (d, of PageDeadline).
	MessagesLate bool
	PageDeadline time.Duration
	d            *deadline
}

// shownReportMessage is a message of the report's messages level, its details clipped within
// the page's budget (textBudget).
type shownReportMessage struct {
	reports.ReportMessage
	DetailsShown string
}

// MessagesShown are the messages the page lists by its deadline, and Late whether it passed
// (docs/web.md#hostile-results).
func (p reportPage) MessagesShown() iter.Seq[shownReportMessage] { return upTo(p.d, p.Messages) }
func (p reportPage) Late() bool                                  { return p.d.Passed() }

// shareW is the width of a report row's share bar.
const shareW = 120

// shareBar is n of total as a bar's width.
func shareBar(n, total int64) int {
	if total <= 0 || n <= 0 {
		return 0
	}
	return max(1, int(float64(shareW)*float64(n)/float64(total)))
}

// Here is the slice the page shows.
func (p reportPage) Here() slice { return p.slice }

// report serves the report page: tasks by status, messages by severity in every task, or one slice of them.
func (s *Server) report(r *http.Request) (view, error) {
	sl, scope, limit, offset, err := s.reportParams(r)
	if err != nil {
		return view{}, err
	}
	ctx := r.Context()
	counts, err := s.reports.ReportStatuses(ctx, scope)
	if err != nil {
		return view{}, err
	}
	p := newReportPage(sl, counts, limit, offset)
	p.d, p.PageDeadline = pageDeadline(r), s.cfg.PageDeadline
	switch {
	case sl.Severity == "" && sl.Every:
		err = s.reportAllSeverities(ctx, scope, &p)
	case sl.Severity == "":
		err = s.reportByStatus(ctx, scope, counts, &p)
	default:
		err = s.reportSlice(ctx, scope, counts, &p)
	}
	if err != nil {
		return view{}, err
	}
	if offset > 0 {
		p.Prev = link("/report", append(sl.pairs(), "offset", strconv.Itoa(max(0, offset-limit)), "limit", strconv.Itoa(limit))...)
	}
	return view{Page: "report", Title: "Report " + sl.Corpus + " / " + sl.Service, Data: p}, nil
}

// reportParams reads and checks the report page's query: the slice, its scope and the page window.
func (s *Server) reportParams(r *http.Request) (sl slice, scope queue.Scope, limit, offset int, err error) {
	q := r.URL.Query()
	corpus, service, scope, err := s.scopeParams(r)
	if err != nil {
		return sl, scope, 0, 0, err
	}
	if limit, offset, err = pageParams(q); err != nil {
		return sl, scope, 0, 0, err
	}
	sl = slice{Corpus: corpus, Service: service, Severity: strings.ToLower(q.Get("severity")), Category: q.Get("category"), What: q.Get("what")}
	switch v := q.Get("all"); v {
	case "", "0":
	case "1", "true":
		sl.Every = true
	default:
		return sl, scope, 0, 0, badRequest("all %q: want 1 (every task, whatever its status) or 0", v)
	}
	if sl.Severity == string(queue.SeverityInfo) {
		sl.Every = true // infos are only counted in every task
	}
	switch {
	case sl.Category != "" && sl.Severity == "":
		return sl, scope, 0, 0, badRequest("category needs a severity")
	case sl.What != "" && sl.Category == "":
		return sl, scope, 0, 0, badRequest("what needs a category")
	}
	if sl.Every {
		if sl.Severity != "" && !reports.IsAllSeverity(sl.Severity) {
			return sl, scope, 0, 0, badRequest("severity %q: with all, want one of info, warning, error, fatal, invalid", sl.Severity)
		}
	} else if _, err := lease.SelectSlice(sl.Severity, sl.Category, sl.What); err != nil {
		return sl, scope, 0, 0, badRequest("%v", err)
	}
	return sl, scope, limit, offset, nil
}

// newReportPage starts the report page of sl: the totals, the links between the two views and the crumbs.
func newReportPage(sl slice, counts map[queue.Status]int64, limit, offset int) reportPage {
	p := reportPage{slice: sl, Limit: limit, Offset: offset}
	for _, n := range counts {
		p.All += n
	}
	p.Total = p.All - counts[queue.StatusInvalid]
	here := sl
	here.Every = false
	if _, _, ok := queue.ReportSeverity(sl.Severity); sl.Severity == "" || ok {
		p.ByStatus = here.URL()
	}
	here.Every = true
	if sl.Severity == "" || reports.IsAllSeverity(sl.Severity) {
		p.AllTasks = here.URL()
	}
	corpus, service := sl.Corpus, sl.Service
	p.Crumbs = []reportRow{{Name: corpus + " / " + service, Slice: slice{Corpus: corpus, Service: service, Every: sl.Every}}}
	if sl.Severity != "" {
		p.Crumbs = append(p.Crumbs, reportRow{Name: sl.Severity, Slice: slice{corpus, service, sl.Severity, "", "", sl.Every}})
	}
	if sl.Category != "" {
		p.Crumbs = append(p.Crumbs, reportRow{Name: sl.Category, Slice: slice{corpus, service, sl.Severity, sl.Category, "", sl.Every}})
	}
	if sl.What != "" {
		p.Crumbs = append(p.Crumbs, reportRow{Name: sl.What, Slice: sl})
	}
	return p
}

// reportAllSeverities fills p with the messages by severity in every task, whatever its status.
func (s *Server) reportAllSeverities(ctx context.Context, scope queue.Scope, p *reportPage) error {
	p.Level, p.Heading = "severity", "Messages by severity, in every task whatever its status"
	sevs, err := s.reports.ReportAllSeverities(ctx, scope)
	if err != nil {
		return err
	}
	for _, sev := range reports.AllSeverities {
		row := sevs[sev]
		p.Rows = append(p.Rows, reportRow{Name: string(sev), Tasks: row.Tasks, Msgs: row.Messages, Percent: percent(row.Tasks, p.All),
			Bar: shareBar(row.Tasks, p.All), Slice: slice{p.Corpus, p.Service, string(sev), "", "", true}, Open: true})
	}
	return nil
}

// reportByStatus fills p with the tasks by status, each terminal status a link to its categories.
func (s *Server) reportByStatus(ctx context.Context, scope queue.Scope, counts map[queue.Status]int64, p *reportPage) error {
	p.Level, p.Heading = "severity", "Tasks by status"
	msgs, err := s.reports.ReportStatusMessages(ctx, scope)
	if err != nil {
		return err
	}
	for _, st := range reportStatuses {
		n := queue.StatusCount(counts, st)
		row := reportRow{Name: statusName(st), Tasks: n, Msgs: msgs[st], Percent: percent(n, p.Total), Bar: shareBar(n, p.Total)}
		if st == queue.StatusInvalid {
			row.Percent, row.Bar = "-", 0
		}
		if st.Terminal() {
			row.Slice, row.Open = slice{p.Corpus, p.Service, statusName(st), "", "", false}, true
		}
		p.Rows = append(p.Rows, row)
	}
	return nil
}

// reportSlice fills p with one severity's categories, one category's whats, or one what's messages.
func (s *Server) reportSlice(ctx context.Context, scope queue.Scope, counts map[queue.Status]int64, p *reportPage) error {
	sl := p.slice
	var status queue.Status
	var severity queue.Severity
	var of int64
	if sl.Every {
		// Shares of every task: counting the severity's tasks first would cost another pass.
		severity, of = queue.Severity(sl.Severity), p.All
		p.SliceStatus = fmt.Sprintf("messages of severity %s in every task whatever its status; percentages of all the tasks", sl.Severity)
	} else {
		status, severity, _ = queue.ReportSeverity(sl.Severity)
		of = counts[status]
		p.SliceStatus = fmt.Sprintf("%s tasks %s", commas(of), sl.Severity)
	}
	rs := reports.Slice{Scope: scope, Status: status, Severity: severity, Category: sl.Category, What: sl.What, Limit: p.Limit, Offset: p.Offset}
	if sl.What != "" {
		return s.reportMessages(ctx, rs, p)
	}
	return s.reportNames(ctx, rs, of, p)
}

// reportMessages fills p with the messages of one what and their tasks.
// They are read within the page's deadline: past it the page says so instead.
func (s *Server) reportMessages(ctx context.Context, rs reports.Slice, p *reportPage) error {
	p.Level, p.Heading = "messages", "Messages and their tasks"
	dctx, cancel := p.d.within(ctx)
	defer cancel()
	read := s.reports.ReportMessages
	if p.Every {
		read = s.reports.ReportAllMessages
	}
	msgs, err := read(dctx, rs)
	if p.MessagesLate = p.d.missed(ctx, err); p.MessagesLate {
		return nil
	}
	if err != nil {
		return err
	}
	b := newTextBudget()
	for _, m := range msgs {
		p.Messages = append(p.Messages, shownReportMessage{ReportMessage: m, DetailsShown: b.clipLines(m.Details)})
	}
	if len(p.Messages) == p.Limit && p.Offset+p.Limit <= reports.ReportMaxOffset {
		p.Next = link("/report", append(p.pairs(), "offset", strconv.Itoa(p.Offset+p.Limit), "limit", strconv.Itoa(p.Limit))...)
	}
	return nil
}

// reportNames fills p with the categories of a severity or the whats of a category, shares of of tasks.
func (s *Server) reportNames(ctx context.Context, rs reports.Slice, of int64, p *reportPage) (err error) {
	sl := p.slice
	var rows []reports.ReportRow
	if sl.Category == "" {
		p.Level, p.Heading = "category", "Categories of "+sl.Severity
	} else {
		p.Level, p.Heading = "what", "Whats of "+sl.Category
	}
	switch {
	case sl.Every:
		rows, p.Count, err = s.reports.ReportAllNames(ctx, rs)
	case sl.Category == "":
		rows, p.Count, err = s.reports.ReportCategories(ctx, rs)
	default:
		rows, p.Count, err = s.reports.ReportWhats(ctx, rs)
	}
	if err != nil {
		return err
	}
	if !sl.Every {
		fold, err := s.reports.ReportFoldState(ctx)
		if err != nil {
			return err
		}
		p.Fold = foldAge(fold)
	}
	for _, row := range rows {
		next := slice{sl.Corpus, sl.Service, sl.Severity, row.Name, "", sl.Every}
		if sl.Category != "" {
			next = slice{sl.Corpus, sl.Service, sl.Severity, sl.Category, row.Name, sl.Every}
		}
		p.Rows = append(p.Rows, reportRow{Name: row.Name, Tasks: row.Tasks, Msgs: row.Messages,
			Percent: percent(row.Tasks, of), Bar: shareBar(row.Tasks, of), Slice: next, Open: true})
	}
	if int64(p.Offset+p.Limit) < p.Count && p.Offset+p.Limit <= reports.ReportMaxOffset {
		p.Next = link("/report", append(sl.pairs(), "offset", strconv.Itoa(p.Offset+p.Limit), "limit", strconv.Itoa(p.Limit))...)
	}
	return nil
}

// foldAge says how fresh the report rollups are, as cortexq report says it.
func foldAge(f reports.FoldState) string {
	s := fmt.Sprintf("Counts as of no fold yet (%s changes wait for one).", commas(f.Pending))
	if f.FoldedAt != nil {
		s = fmt.Sprintf("Counts as of the fold %s ago (%s changes wait for the next).", f.Age.Round(time.Second), commas(f.Pending))
	}
	if note := f.StandbyNote(); note != "" {
		s += " On " + note + "."
	}
	return s
}

// statusName is a status's name in reports: in_flight for dispatched.
func statusName(s queue.Status) string {
	if s == queue.StatusDispatched {
		return "in_flight"
	}
	return s.String()
}

// ---- Runs and diffs

type runRow struct {
	reports.Run
	Bar  []barPart
	Done int64
}

type runsPage struct {
	Corpus, Service string
	Runs            []runRow
	Chart           runChart
	From, To        int64
	Matrix          *diffMatrix
}

func (s *Server) runs(r *http.Request) (view, error) {
	corpus, service, scope, err := s.scopeParams(r)
	if err != nil {
		return view{}, err
	}
	runs, err := s.reports.Runs(r.Context(), scope)
	if err != nil {
		return view{}, err
	}
	p := runsPage{Corpus: corpus, Service: service, Chart: newRunChart(runs)}
	for _, run := range runs {
		p.Runs = append(p.Runs, runRow{Run: run})
	}
	q := r.URL.Query()
	if q.Get("from") != "" || q.Get("to") != "" {
		d, err := diffParams(q, scope, runs)
		if err != nil {
			return view{}, err
		}
		cells, err := s.reports.DiffMatrix(r.Context(), d)
		if err != nil {
			return view{}, err
		}
		p.From, p.To = d.From, d.To
		p.Matrix = newDiffMatrix(corpus, service, d, cells)
	}
	return view{Page: "runs", Title: "Runs " + corpus + " / " + service, Data: p}, nil
}

// diffParams reads from (a closed run of the scope) and to (a later run of it; 0 or "current":
// the open one).
func diffParams(q url.Values, scope queue.Scope, runs []reports.Run) (reports.DiffRuns, error) {
	d := reports.DiffRuns{Scope: scope}
	known := map[int64]reports.Run{}
	for _, r := range runs {
		known[r.ID] = r
	}
	from, err := strconv.ParseInt(q.Get("from"), 10, 64)
	if err != nil {
		return d, badRequest("from %q: want a run id", q.Get("from"))
	}
	if run, ok := known[from]; !ok || run.EndedAt == nil {
		return d, badRequest("from %d: not a closed run of this corpus and service", from)
	}
	d.From = from
	if to := q.Get("to"); to != "" && to != "current" && to != "0" {
		n, err := strconv.ParseInt(to, 10, 64)
		if err != nil {
			return d, badRequest("to %q: want a run id or current", to)
		}
		run, ok := known[n]
		switch {
		case !ok:
			return d, badRequest("to %d: not a run of this corpus and service", n)
		case n <= from:
			return d, badRequest("to %d: want a run after from %d", n, from)
		case run.EndedAt != nil:
			d.To = n
		}
	}
	return d, nil
}

// diffStatuses are the matrix's rows and columns.
var diffStatuses = []queue.Status{queue.StatusNoProblem, queue.StatusWarning, queue.StatusError, queue.StatusFatal,
	queue.StatusInvalid, queue.StatusTODO, queue.StatusDispatched, queue.StatusBlocked}

type diffMatrix struct {
	Cols []string
	Rows []diffMatrixRow
}

type diffMatrixRow struct {
	From  string
	Cells []diffMatrixCell
}

type diffMatrixCell struct {
	Tasks int64
	URL   string
	Same  bool
}

func newDiffMatrix(corpus, service string, d reports.DiffRuns, cells []reports.DiffCell) *diffMatrix {
	m := &diffMatrix{}
	for _, st := range diffStatuses {
		m.Cols = append(m.Cols, statusName(st))
	}
	to := strconv.FormatInt(d.To, 10)
	index := func(st queue.Status) int {
		if st <= queue.StatusBlocked {
			st = queue.StatusBlocked
		}
		for i, x := range diffStatuses {
			if x == st {
				return i
			}
		}
		return -1
	}
	grid := make([][]int64, len(diffStatuses)+1) // the last row: not a task then
	for i := range grid {
		grid[i] = make([]int64, len(diffStatuses))
	}
	for _, c := range cells {
		row := len(diffStatuses)
		if c.From != nil {
			row = index(*c.From)
		}
		if col := index(c.To); row >= 0 && col >= 0 {
			grid[row][col] += c.Tasks
		}
	}
	for i, cells := range grid {
		from, fromName := "new", "(new task)"
		if i < len(diffStatuses) {
			from, fromName = strconv.Itoa(int(diffStatuses[i])), statusName(diffStatuses[i])
		}
		row := diffMatrixRow{From: fromName}
		for j, n := range cells {
			c := diffMatrixCell{Tasks: n, Same: i == j}
			if n > 0 {
				c.URL = link("/runs/cell", "corpus", corpus, "service", service, "from", strconv.FormatInt(d.From, 10),
					"to", to, "fs", from, "ts", strconv.Itoa(int(diffStatuses[j])))
			}
			row.Cells = append(row.Cells, c)
		}
		m.Rows = append(m.Rows, row)
	}
	return m
}

// statusParam reads a status number of the diff matrix.
func statusParam(v string) (queue.Status, error) {
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, badRequest("status %q: want a status number", v)
	}
	for _, st := range diffStatuses {
		if int(st) == n {
			return st, nil
		}
	}
	return 0, badRequest("status %d: not a status", n)
}

func (s *Server) diffCell(r *http.Request) (view, error) {
	corpus, service, scope, err := s.scopeParams(r)
	if err != nil {
		return view{}, err
	}
	q := r.URL.Query()
	runs, err := s.reports.Runs(r.Context(), scope)
	if err != nil {
		return view{}, err
	}
	d, err := diffParams(q, scope, runs)
	if err != nil {
		return view{}, err
	}
	var from *queue.Status
	if fs := q.Get("fs"); fs != "new" {
		st, err := statusParam(fs)
		if err != nil {
			return view{}, err
		}
		from = &st
	}
	to, err := statusParam(q.Get("ts"))
	if err != nil {
		return view{}, err
	}
	limit, offset, err := pageParams(q)
	if err != nil {
		return view{}, err
	}
	tasks, err := s.reports.DiffCellTasks(r.Context(), d, from, to, limit, offset)
	if err != nil {
		return view{}, err
	}
	fromName := "(new task)"
	if from != nil {
		fromName = statusName(*from)
	}
	base := []string{"corpus", corpus, "service", service, "from", q.Get("from"), "to", q.Get("to"), "fs", q.Get("fs"), "ts", q.Get("ts"), "limit", strconv.Itoa(limit)}
	var prev, next string
	if offset > 0 {
		prev = link("/runs/cell", append(base, "offset", strconv.Itoa(max(0, offset-limit)))...)
	}
	if len(tasks) == limit && offset+limit <= reports.ReportMaxOffset {
		next = link("/runs/cell", append(base, "offset", strconv.Itoa(offset+limit))...)
	}
	return view{Page: "cell", Title: "Diff cell", Data: struct {
		Corpus, Service, FromStatus, ToStatus string
		From, To                              int64
		Tasks                                 []reports.DiffTask
		Back, Prev, Next                      string
	}{corpus, service, fromName, statusName(to), d.From, d.To, tasks,
		link("/runs", "corpus", corpus, "service", service, "from", q.Get("from"), "to", q.Get("to")), prev, next}}, nil
}

// ---- Workers

type workerRow struct {
	inspect.WorkerSeen
	inspect.WorkerOutcomes
	LastSeen *time.Time
	State    string // active, idle or gone (workerState)
	// LeasesHour and PerMin are its leases over the last hour and the results per minute they
	// got (answered ones over 60 minutes).
	LeasesHour int64
	PerMin     string
	Attempts   string // the page of its attempts
	Leases     []inspect.LeaseOut
}

// maxWorkerRows is how many workers the workers page lists.
const maxWorkerRows = 500

func (s *Server) workers(r *http.Request) (view, error) {
	ctx := r.Context()
	acts, err := s.inspect.Workers(ctx, maxWorkerRows)
	if err != nil {
		return view{}, err
	}
	outcomes, outcomesAt, err := s.outcomes.get(ctx, s)
	if err != nil {
		return view{}, err
	}
	leases, err := s.inspect.LeasesOut(ctx, 2000)
	if err != nil {
		return view{}, err
	}
	names := make([]string, 0, len(acts))
	for _, a := range acts {
		names = append(names, a.Worker)
	}
	hours, err := s.inspect.WorkerHours(ctx, names)
	if err != nil {
		return view{}, err
	}
	now, err := s.inspect.Now(ctx)
	if err != nil {
		return view{}, err
	}
	held := map[string][]inspect.LeaseOut{}
	for _, l := range leases {
		k := l.Worker + "\x00" + l.Service
		held[k] = append(held[k], l)
	}
	var rows []workerRow
	counts := map[string]int{}
	for _, a := range acts {
		row := workerRow{WorkerSeen: a, WorkerOutcomes: outcomes[inspect.WorkerKey{Worker: a.Worker, ServiceID: a.ServiceID}], Leases: held[a.Worker+"\x00"+a.Service], State: "gone",
			Attempts: link("/workers/attempts", "worker", a.Worker)}
		row.LastSeen = a.LastRequest
		if a.LastResult != nil && (row.LastSeen == nil || a.LastResult.After(*row.LastSeen)) {
			row.LastSeen = a.LastResult
		}
		if row.LastSeen != nil {
			row.State = workerState(*row.LastSeen, now)
		}
		h := hours[a.Worker]
		row.LeasesHour = h.Leases
		row.PerMin = strconv.FormatFloat(float64(h.Answered)/60, 'f', 1, 64)
		counts[row.State]++
		rows = append(rows, row)
	}
	return view{Page: "workers", Title: "Workers", Data: struct {
		Workers            []workerRow
		Leases             int
		Active, Idle, Gone int
		OutcomesAge        string
	}{rows, len(leases), counts["active"], counts["idle"], counts["gone"], ageOf(outcomesAt, time.Now())}}, nil
}

// ageOf says how old a figure read at t is, by the second: "" when fresh (under a second).
func ageOf(t, now time.Time) string {
	if d := now.Sub(t); d >= time.Second {
		return d.Round(time.Second).String()
	}
	return ""
}
