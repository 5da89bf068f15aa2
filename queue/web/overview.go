package web

// The overview page (/) and its live figures (/live), read from the totals ledger and the
// attempts trail within a budget of the database's time (docs/web.md#cost-to-the-database).

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/inspect"
	"github.com/cortexq/cortexq/queue/text"
)

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

// overviewFigures is what the overview page and its live figures both read: the progress of
// each corpus and service (from the totals, with the trail's activity), the attempts trail's
// figures and the workers active in the last minute.
type overviewFigures struct {
	progress []inspect.Progress
	trail    trailFigures
	active   int64
}

func (s *Server) readOverview(ctx context.Context) (overviewFigures, error) {
	var f overviewFigures
	var err error
	if f.progress, err = s.inspect.TotalsProgress(ctx); err != nil {
		return f, err
	}
	if f.active, err = s.inspect.ActiveWorkers(ctx); err != nil {
		return f, err
	}
	if f.trail, _, err = s.trail.get(ctx, s); err != nil {
		return f, err
	}
	withActivity(f.progress, f.trail)
	return f, nil
}

// overview is the overview page (/).
func (s *Server) overview(r *http.Request) (view, error) {
	ctx := r.Context()
	fig, err := s.readOverview(ctx)
	if err != nil {
		return view{}, err
	}
	progress, trail, active := fig.progress, fig.trail, fig.active
	sandboxes, err := s.reports.Sandboxes(ctx)
	if err != nil {
		return view{}, err
	}
	parent := map[string]string{}
	for _, sb := range sandboxes {
		parent[sb.Name] = sb.Parent
	}
	through, replicas := trail.through, trail.replicas
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
// static/live.js slows down to its slowest pace (4 s) while they do not change.
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
	return s.readEvery(s.cfg.LiveMaxAge, slices.Min(s.liveCosts))
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

// readTrail reads the figures of the attempts trail (kept by Server.trail).
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

// liveFigures are the overview's changing figures (/live).
func (s *Server) liveFigures(r *http.Request) (liveFigures, error) {
	fig, err := s.readOverview(r.Context())
	if err != nil {
		return liveFigures{}, err
	}
	progress, active := fig.progress, fig.active
	through, replicas := fig.trail.through, fig.trail.replicas
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
