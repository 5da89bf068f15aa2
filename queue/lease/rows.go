// Dispatch rows: their states, deadlines and the helpers that read and copy them.

package lease

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// Row states of dispatch.state.
const (
	// StateReserved: held by a replica for a hand-out until its deadline, no worker yet.
	StateReserved = "reserved"
	StateInFlight = "in_flight"
	StateSettling = "settling"
)

// leaseDeadline is when a lease of d started at leasedAt expires: its attempt's share of the
// lease grows with each retry, (retries + 1) × lease. sql/lease.sql's Attribute computes the
// same in SQL; nothing else does.
func leaseDeadline(d *dbsqlc.Dispatch, leasedAt time.Time) time.Time {
	return leasedAt.Add(time.Duration(d.Retries+1) * time.Duration(d.LeaseTimeoutSeconds) * time.Second)
}

// leaseSeconds is a service's lease as a row captures it at its first reservation: whole seconds,
// at least one. Both reservation paths store it; leaseDeadline and Attribute multiply it.
func leaseSeconds(timeout time.Duration) int32 { return int32(max(timeout/time.Second, 1)) }

func cloneRow(d *dbsqlc.Dispatch) *dbsqlc.Dispatch {
	c := *d
	c.AttemptWorkers = slices.Clone(d.AttemptWorkers)
	return &c
}

func encodeCause(msgs []queue.Message) json.RawMessage {
	if len(msgs) == 0 {
		return nil
	}
	b, err := json.Marshal(msgs)
	if err != nil {
		return nil
	}
	return b
}

func ptrTime(t time.Time) *time.Time { return &t }
