package jobops

import (
	"context"
	"time"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/jobs"
	"github.com/cortexq/cortexq/queue/verify"
)

// VerifyArgs are a verify job's: as `cortexq verify` (no corpus and service: all).
type VerifyArgs struct {
	Corpus  string `json:"corpus,omitempty"`
	Service string `json:"service,omitempty"`
	Quick   bool   `json:"quick,omitempty"`
}

func (a VerifyArgs) check() error {
	if (a.Corpus == "") != (a.Service == "") {
		return errBothOrNeither
	}
	return nil
}

// runVerify checks the records against the files; the result is the findings by kind. Its
// progress counts the tasks checked (the total is not known beforehand).
func runVerify(ctx context.Context, env jobs.Env, a VerifyArgs, p *jobs.Progress) (any, error) {
	var scope queue.Scope
	if a.Corpus != "" {
		var err error
		if scope, err = scopeOf(ctx, env, a.Corpus, a.Service); err != nil {
			return nil, err
		}
	}
	services, err := env.Base.Catalog.Services(ctx)
	if err != nil {
		return nil, err
	}
	byName := make(map[string]int32, len(services))
	for _, s := range services {
		byName[s.Name] = s.ID
	}
	var vp verify.Progress
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				p.Set(vp.Tasks.Load(), 0)
			}
		}
	}()
	counts, err := verify.Run(ctx, verify.Config{Reader: env.Base.Inspect, Scope: scope, Services: byName, Quick: a.Quick,
		Found: func(verify.Finding) error { return nil }}, &vp)
	p.Set(vp.Tasks.Load(), vp.Tasks.Load())
	return map[string]any{"findings": counts, "tasks": vp.Tasks.Load(), "archives": vp.Archives.Load()}, err
}
