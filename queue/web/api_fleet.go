package web

import (
	"net/http"
	"time"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/api"
)

// The fleet's reads: workers, leases, dead letters, retries and replicas, from the workers,
// dead letters and overview pages' reads.

func (s *Server) apiWorkers(r *http.Request) (any, error) {
	list, err := s.readWorkers(r.Context())
	if err != nil {
		return nil, err
	}
	out := api.Workers{Workers: make([]api.Worker, 0, len(list.Workers)), Leases: list.Leases, Active: list.Active, Idle: list.Idle, Gone: list.Gone}
	for _, w := range list.Workers {
		out.Workers = append(out.Workers, api.Worker{Worker: w.Worker, Service: w.Service, State: w.State, FirstSeen: w.FirstSeen,
			LastSeen: w.LastSeen, Dispatched: w.Dispatched, Results: w.Results, Accepted: w.Accepted, Expired: w.Expired,
			LeasesHour: w.LeasesHour, LeasesNow: len(w.Leases), ResultsRate: w.PerMinute})
	}
	return out, nil
}

func (s *Server) apiWorkerAttempts(r *http.Request) (any, error) {
	worker := r.URL.Query().Get("worker")
	if worker == "" {
		return nil, api.Paramf("worker is required")
	}
	atts, err := s.inspect.WorkerAttempts(r.Context(), worker, maxWorkerAttempts)
	if err != nil {
		return nil, err
	}
	out := api.WorkerAttempts{Worker: worker, Attempts: make([]api.WorkerAttempt, 0, len(atts))}
	for _, a := range atts {
		w := api.WorkerAttempt{TaskID: a.TaskID, Corpus: a.Corpus, Service: a.Service, Entry: a.Entry, Run: a.Run, Attempt: a.Attempt,
			Replica: a.Replica, LeasedAt: a.LeasedAt, AnsweredAt: a.AnsweredAt, Outcome: a.Outcome}
		if a.Status != nil {
			w.Status = api.StatusName(queue.Status(*a.Status))
		}
		out.Attempts = append(out.Attempts, w)
	}
	return out, nil
}

// maxAPILeases is how many leases GET /api/v1/leases lists (the workers page's).
const maxAPILeases = 2000

func (s *Server) apiLeases(r *http.Request) (any, error) {
	leases, err := s.inspect.LeasesOut(r.Context(), maxAPILeases)
	if err != nil {
		return nil, err
	}
	out := api.Leases{Leases: make([]api.Lease, 0, len(leases))}
	for _, l := range leases {
		out.Leases = append(out.Leases, api.Lease{TaskID: l.TaskID, Corpus: l.Corpus, Service: l.Service, Entry: l.Entry, Run: l.Run,
			Attempt: l.Attempt, Worker: l.Worker, Replica: l.Replica, LeasedAt: l.LeasedAt, Deadline: l.Deadline})
	}
	return out, nil
}

func (s *Server) apiDeadLetters(r *http.Request) (any, error) {
	dead, at, err := s.deadLetters.get(r.Context(), s)
	if err != nil {
		return nil, err
	}
	out := api.DeadLetters{DeadLetters: []api.DeadLetter{}, More: len(dead) > maxDeadRows, AgeSeconds: time.Since(at).Round(time.Millisecond).Seconds()}
	for _, d := range dead[:min(len(dead), maxDeadRows)] {
		out.DeadLetters = append(out.DeadLetters, api.DeadLetter{TaskID: d.TaskID, Corpus: d.Corpus, Service: d.Service, Entry: d.Entry,
			Run: d.Run, Cause: d.Cause, LastLeasedAt: d.LastLeasedAt})
	}
	return out, nil
}

func (s *Server) apiRetries(r *http.Request) (any, error) {
	retries, err := s.inspect.QueuedRetries(r.Context(), maxDeadRows+1)
	if err != nil {
		return nil, err
	}
	out := api.Retries{Retries: []api.Retry{}, More: len(retries) > maxDeadRows}
	for _, q := range retries[:min(len(retries), maxDeadRows)] {
		out.Retries = append(out.Retries, api.Retry{TaskID: q.TaskID, Corpus: q.Corpus, Service: q.Service, Entry: q.Entry, Run: q.Run,
			Retries: q.Retries, LastCause: q.LastCause, LeasedAt: q.LeasedAt})
	}
	return out, nil
}

func (s *Server) apiReplicas(r *http.Request) (any, error) {
	fig, _, err := s.trail.get(r.Context(), s)
	if err != nil {
		return nil, err
	}
	out := api.Replicas{Replicas: make([]api.Replica, 0, len(fig.replicas))}
	for _, rp := range fig.replicas {
		out.Replicas = append(out.Replicas, api.Replica{Replica: rp.Replica, State: rp.State, InFlight: rp.InFlight, Reserved: rp.Reserved,
			LeasesLastMinute: rp.LeasesLastMinute, ResultsLastMinute: rp.ResultsLastMinute, LastLeasedAt: rp.LastLeasedAt,
			LastReaperPass: rp.LastReaperPass, SeenAt: rp.SeenAt})
	}
	return out, nil
}
