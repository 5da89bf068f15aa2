package catalog

import (
	"context"
	"fmt"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/internal/pgtx"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// Fair share (docs/semantics.md#fair-share): reservations serve the TODO tasks of a service's
// corpora of the highest priority first, and within a priority the corpora in proportion to
// their weights (sql/lease.sql ReserveFresh, cursor.go).

// Bounds of a corpus's fair-share weight and priority (the CHECKs of corpus_shares).
const (
	WeightMin, WeightMax     = 1, 1_000_000
	PriorityMin, PriorityMax = -1_000_000, 1_000_000
	// WeightDefault and PriorityDefault are a corpus's share until one is set.
	WeightDefault, PriorityDefault = 1, 0
	// SandboxPriority is the priority a sandbox starts at unless told otherwise: above the
	// corpora's default, so that a sandbox's tasks go before any backlog of theirs.
	SandboxPriority = 1
)

// Share is the fair share of a corpus and service.
type Share struct {
	Corpus   string `json:"corpus"`
	Service  string `json:"service"`
	Sandbox  bool   `json:"sandbox"`
	Weight   int32  `json:"weight"`
	Priority int32  `json:"priority"`
	TODO     int64  `json:"todo"`
	// LeasesLastMinute counts the attempts leased over the last minute, and LeaseShare is their
	// part of all of the service's (0 to 1).
	LeasesLastMinute int64   `json:"leases_last_minute"`
	LeaseShare       float64 `json:"lease_share_last_minute"`
}

// CheckShare reports a weight or priority out of bounds; nil leaves a value unchanged.
func CheckShare(weight, priority *int32) error {
	if weight != nil && (*weight < WeightMin || *weight > WeightMax) {
		return fmt.Errorf("weight %d: want %d to %d", *weight, WeightMin, WeightMax)
	}
	if priority != nil && (*priority < PriorityMin || *priority > PriorityMax) {
		return fmt.Errorf("priority %d: want %d to %d", *priority, PriorityMin, PriorityMax)
	}
	return nil
}

// SetShare sets the weight and priority of a corpus and service (nil: unchanged, or the
// default) and returns both as they now stand. The corpus and service must exist; the corpus
// need not have tasks of the service yet. Replicas apply it from their next reservation on.
func (c *Catalog) SetShare(ctx context.Context, scope queue.Scope, weight, priority *int32) (w, p int32, err error) {
	if err := CheckShare(weight, priority); err != nil {
		return 0, 0, err
	}
	row, err := dbsqlc.New(c.pool).CorpusShareSet(ctx, scope.ServiceID, scope.CorpusID, weight, priority)
	if err != nil {
		return 0, 0, pgtx.Wrap("set share", err)
	}
	return row.Weight, row.Priority, nil
}

// Shares lists the fair share of every corpus and service that has (or had) tasks or a share set,
// or only those of a service (empty: any), highest priority first.
func (c *Catalog) Shares(ctx context.Context, service string) ([]Share, error) {
	var svc *string
	if service != "" {
		svc = &service
	}
	rows, err := dbsqlc.New(c.pool).CorpusShareList(ctx, svc)
	if err != nil {
		return nil, pgtx.Wrap("shares", err)
	}
	out := make([]Share, len(rows))
	for i, r := range rows {
		out[i] = Share{Corpus: r.Corpus, Service: r.Service, Sandbox: r.Sandbox, Weight: r.Weight, Priority: r.Priority,
			TODO: r.Todo, LeasesLastMinute: r.LeasesLastMinute, LeaseShare: r.LeaseShareLastMinute}
	}
	return out, nil
}
