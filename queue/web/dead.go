package web

// The dead letters page (/dead): tasks whose last attempt expired, and queued retries.

import (
	"net/http"
	"time"

	"github.com/cortexq/cortexq/queue/inspect"
)

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
