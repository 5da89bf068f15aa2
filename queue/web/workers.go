package web

// The workers page (/workers) and a worker's attempts (/workers/attempts).

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/cortexq/cortexq/queue/inspect"
)

type workerRow struct {
	inspect.WorkerSeen
	inspect.WorkerOutcomes
	LastSeen *time.Time
	State    string // active, idle or gone (workerState)
	// LeasesHour and PerMin are its leases over the last hour and the results per minute they
	// got (answered ones over 60 minutes).
	LeasesHour int64
	PerMin     string
	PerMinute  float64
	Attempts   string // the page of its attempts
	Leases     []inspect.LeaseOut
}

// maxWorkerRows is how many workers the workers page lists.
const maxWorkerRows = 500

// workerList is the workers page's data: each worker's row, the leases out, the workers by
// state and how old the outcomes are (read in the background).
type workerList struct {
	Workers            []workerRow
	Leases             int
	Active, Idle, Gone int
	outcomesAt         time.Time
}

// readWorkers reads the workers page's data (the page and the API both show it).
func (s *Server) readWorkers(ctx context.Context) (workerList, error) {
	var out workerList
	acts, err := s.inspect.Workers(ctx, maxWorkerRows)
	if err != nil {
		return out, err
	}
	outcomes, outcomesAt, err := s.outcomes.get(ctx, s)
	if err != nil {
		return out, err
	}
	leases, err := s.inspect.LeasesOut(ctx, 2000)
	if err != nil {
		return out, err
	}
	names := make([]string, 0, len(acts))
	for _, a := range acts {
		names = append(names, a.Worker)
	}
	hours, err := s.inspect.WorkerHours(ctx, names)
	if err != nil {
		return out, err
	}
	now, err := s.inspect.Now(ctx)
	if err != nil {
		return out, err
	}
	held := map[string][]inspect.LeaseOut{}
	for _, l := range leases {
		k := l.Worker + "\x00" + l.Service
		held[k] = append(held[k], l)
	}
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
		row.LeasesHour, row.PerMinute = h.Leases, float64(h.Answered)/60
		row.PerMin = strconv.FormatFloat(row.PerMinute, 'f', 1, 64)
		counts[row.State]++
		out.Workers = append(out.Workers, row)
	}
	out.Leases, out.Active, out.Idle, out.Gone, out.outcomesAt = len(leases), counts["active"], counts["idle"], counts["gone"], outcomesAt
	return out, nil
}

func (s *Server) workers(r *http.Request) (view, error) {
	list, err := s.readWorkers(r.Context())
	if err != nil {
		return view{}, err
	}
	return view{Page: "workers", Title: "Workers", Data: struct {
		workerList
		OutcomesAge string
	}{list, ageOf(list.outcomesAt, time.Now())}}, nil
}

// ageOf says how old a figure read at t is, by the second: "" when fresh (under a second).
func ageOf(t, now time.Time) string {
	if d := now.Sub(t); d >= time.Second {
		return d.Round(time.Second).String()
	}
	return ""
}

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
