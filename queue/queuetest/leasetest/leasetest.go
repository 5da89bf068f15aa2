// Package leasetest drives a lease.Store in the tests of the packages that use one (dispatch,
// reaper, inspect, reports, cmd), with steps production takes apart: Lease reserves, hands out
// and attributes at once; Claim takes the claim's steps with a publish step only. The lease
// package's own tests have the same steps in queue/lease/export_test.go (they cannot import a
// package that imports lease).
package leasetest

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cortexq/cortexq/queue/lease"
)

// Request asks for one task for each of Workers, all of one service.
type Request struct {
	ServiceID int32
	// LeaseTimeout is the service's lease; zero takes the store's default.
	LeaseTimeout time.Duration
	// Workers are the requesting workers' identities, one task each at most.
	Workers []string
}

// Lease leases tasks of one service to the requesting workers, as a replica's dispatcher would
// over some milliseconds: Reserve as many tasks as there are workers, hand them out, Attribute
// the hand-outs, and Release what no worker could take (a task whose earlier run a worker left
// worked). A worker gets at most one task. Every lease returned is committed.
func Lease(ctx context.Context, store *lease.Store, req Request) ([]lease.Lease, error) {
	if len(req.Workers) == 0 {
		return nil, nil
	}
	reserved, err := store.Reserve(ctx, lease.ReserveRequest{ServiceID: req.ServiceID, LeaseTimeout: req.LeaseTimeout, Max: len(req.Workers)})
	if err != nil {
		return nil, err
	}
	workers := slices.Clone(req.Workers)
	var hs []lease.HandOut
	var left []lease.Reserved
	type key struct {
		task int64
		run  int32
	}
	byKey := make(map[key]*lease.Reserved, len(reserved))
	for i := range reserved {
		r := &reserved[i]
		byKey[key{r.TaskID, r.Run}] = r
		j := slices.IndexFunc(workers, r.For)
		if j < 0 {
			left = append(left, *r)
			continue
		}
		hs = append(hs, r.HandOut(workers[j]))
		workers = slices.Delete(workers, j, j+1)
	}
	leases, err := store.Attribute(ctx, hs)
	if err != nil {
		return leases, err
	}
	if _, err := store.Release(ctx, left); err != nil {
		return leases, fmt.Errorf("release reservations no worker could take: %w", err)
	}
	for i := range leases {
		r := byKey[key{leases[i].TaskID, leases[i].Run}]
		leases[i].CorpusID, leases[i].Entry, leases[i].Retry, leases[i].LastCause = r.CorpusID, r.Entry, r.Retry, r.LastCause
	}
	return leases, nil
}

// Claim decides a batch of replies, of distinct tasks, in the steps production takes
// (lease.Store.BeginClaim, the publishes, lease.Claim.Commit with those that failed),
// with publish, if not nil, as the publish step.
func Claim(ctx context.Context, store *lease.Store, results []lease.Result, publish lease.PublishFunc) ([]lease.Decision, error) {
	c, err := store.BeginClaim(ctx, results, nil)
	if err != nil {
		return nil, err
	}
	defer c.Rollback()
	unpublished := map[*lease.Decision]error{}
	if publish != nil {
		for _, d := range c.ToPublish {
			if err := publish(d); err != nil {
				unpublished[d] = err
			}
		}
	}
	return c.Commit(ctx, unpublished)
}
