package web

// Where a run's time went (docs/stages.md): the "time" view of a run (/runs/time) and its JSON
// (/runs/time.json, and the API's .../stages), for a run of a corpus and service or a service over all its corpora.

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/api"
	"github.com/cortexq/cortexq/queue/reports"
)

// stageRowsWeb bounds the attempts a time view reads: the newest 200,000 (about 8 MB).
const stageRowsWeb = 200_000

// timePage is the time view: the stage summary and the slowest tasks.
type timePage struct {
	Corpus, Service string
	Run             int64 // 0: the service over all corpora
	Summary         reports.StageSummary
	Rows            [][]string
	Note            string
	SlowestHeader   []string
	Slowest         []reports.TaskStages
	SlowestRows     [][]string
}

// readTime reads the time view's figures: service (required), corpus and run (a run of the
// corpus and service; 0 or none: its current run; no corpus: the service over all corpora) and
// slowest (how many of the slowest tasks, default 100).
func (s *Server) readTime(r *http.Request) (timePage, error) {
	q := r.URL.Query()
	p := timePage{Corpus: q.Get("corpus"), Service: q.Get("service")}
	slowest, err := intParam(q, "slowest", 100, 0, 10_000)
	if err != nil {
		return p, err
	}
	sc, err := s.timeScope(r, &p)
	if err != nil {
		return p, err
	}
	sc.MaxRows = stageRowsWeb
	tasks, truncated, err := s.reports.StageTasks(r.Context(), sc)
	if err != nil {
		return p, err
	}
	p.Summary = reports.SummarizeStages(tasks)
	p.Summary.Truncated = truncated
	p.Rows, p.Note = reports.StageRows(p.Summary), reports.StageNote(p.Summary)
	p.Slowest = reports.SlowestTasks(tasks, slowest)
	p.SlowestHeader, p.SlowestRows = reports.SlowestHeader, reports.SlowestRows(p.Slowest)
	return p, nil
}

// timeScope finds the scope of the time view and fills in p.Run.
func (s *Server) timeScope(r *http.Request, p *timePage) (reports.StageScope, error) {
	q := r.URL.Query()
	if p.Service == "" {
		return reports.StageScope{}, badRequest("service is required")
	}
	if p.Corpus == "" {
		svc, err := s.catalog.Service(r.Context(), p.Service)
		if errors.Is(err, queue.ErrNotFound) {
			return reports.StageScope{}, httpError{code: http.StatusNotFound, msg: err.Error()}
		}
		return reports.StageScope{ServiceID: svc.ID}, err
	}
	_, _, scope, err := s.scopeParams(r)
	if err != nil {
		return reports.StageScope{}, err
	}
	if v := q.Get("run"); v != "" && v != "current" && v != "0" {
		if p.Run, err = strconv.ParseInt(v, 10, 64); err != nil {
			return reports.StageScope{}, badRequest("run %q: want a run id or current", v)
		}
	} else {
		runs, err := s.reports.Runs(r.Context(), scope)
		if err != nil {
			return reports.StageScope{}, err
		}
		if len(runs) == 0 {
			return reports.StageScope{}, httpError{code: http.StatusNotFound, msg: "no run of this corpus and service"}
		}
		p.Run = runs[len(runs)-1].ID
	}
	sc, err := s.reports.RunStageScope(r.Context(), p.Run)
	if errors.Is(err, queue.ErrNotFound) || err == nil && (sc.CorpusID != scope.CorpusID || sc.ServiceID != scope.ServiceID) {
		return sc, httpError{code: http.StatusNotFound, msg: fmt.Sprintf("run %d: not a run of this corpus and service", p.Run)}
	}
	return sc, err
}

// runTime is the time view's page.
func (s *Server) runTime(r *http.Request) (view, error) {
	p, err := s.readTime(r)
	if err != nil {
		return view{}, err
	}
	title := "Time " + p.Service
	if p.Corpus != "" {
		title = fmt.Sprintf("Time %s / %s, run %d", p.Corpus, p.Service, p.Run)
	}
	return view{Page: "time", Title: title, Data: p}, nil
}

// runTimeJSON answers the time view's figures as JSON (durations in milliseconds).
func (s *Server) runTimeJSON(w http.ResponseWriter, r *http.Request) {
	p, err := s.readTime(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	b, err := json.Marshal(p.answer())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b)
}

// answer is the time view's figures as the API answers them.
func (p timePage) answer() api.Stages {
	return api.Stages{Corpus: p.Corpus, Service: p.Service, Run: p.Run, Summary: p.Summary, Slowest: p.Slowest}
}

// apiStages is the time view for the API: a run of the path's corpus and service (?run=, the
// current one by default), or, with no corpus in the path, the service over all its corpora;
// ?slowest= as the view's.
func (s *Server) apiStages(r *http.Request) (any, error) {
	q := r.URL.Query()
	q.Del("corpus")
	q.Set("service", r.PathValue("service"))
	if corpus := r.PathValue("corpus"); corpus != "" {
		q.Set("corpus", corpus)
	}
	r = r.Clone(r.Context())
	r.URL.RawQuery = q.Encode()
	p, err := s.readTime(r)
	if err != nil {
		return nil, err
	}
	return p.answer(), nil
}
