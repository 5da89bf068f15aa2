package web

// The report drill-down (/report): statuses, severities, categories, kinds, the messages of a
// kind and the tasks that hold them, read from the fold's rollups (docs/reports.md).

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/reports"
)

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
