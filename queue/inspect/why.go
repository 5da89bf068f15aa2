package inspect

import (
	"context"
	"fmt"
	"time"

	"github.com/cortexq/cortexq/queue/internal/pgtx"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// Cause names a reason a corpus is not progressing (docs/operations.md, "Why is a corpus not
// moving?").
type Cause string

// The causes Why can name.
const (
	CauseFinished     Cause = "finished"       // nothing TODO or dispatched: not stuck, done
	CausePaused       Cause = "paused"         // tasks blocked by cortexq pause
	CausePriority     Cause = "priority"       // another corpus of a higher priority has TODO tasks
	CauseWeight       Cause = "weight"         // its weight is a small share of its priority's
	CauseNoWorkers    Cause = "no_workers"     // no worker asked for the service in the last minute
	CauseWorkersAtCap Cause = "workers_at_cap" // every worker asking holds its cap of leases
	CauseNoReaper     Cause = "no_reaper"      // no reaper pass for three intervals
	CauseNoFold       Cause = "no_fold"        // changes wait for a fold that does not come
	CauseDeadLetters  Cause = "dead_letters"   // tasks dead-lettered in the last hour
	CauseReplicaGone  Cause = "replica_gone"   // a replica's heartbeats stopped without a clean stop
)

// Reason is one cause found, with what shows it and the command that acts on it.
type Reason struct {
	Cause    Cause  `json:"cause"`
	Evidence string `json:"evidence"`
	Fix      string `json:"fix"`
}

// WhyOptions are what Why compares the facts with.
type WhyOptions struct {
	Corpus, Service string // names, for the commands it suggests
	CorpusID        int32
	ServiceID       int32
	// WorkerCap is the replicas' --max-in-flight-per-worker; ReapInterval and FoldInterval
	// their --reap-interval and --fold-interval.
	WorkerCap                  int
	ReapInterval, FoldInterval time.Duration
}

// WeightStarvedBelow is the share of its priority's weights under which a corpus is reported
// starved by weight (its leases come that slowly while the others have work).
const WeightStarvedBelow = 0.05

// Why reports the reasons a corpus's tasks of a service are not progressing, each with its
// evidence and fix; none when nothing holds it back that the database can show.
func (r *Reader) Why(ctx context.Context, o WhyOptions) ([]Reason, error) {
	f, err := dbsqlc.New(r.pool).WhyFacts(ctx, dbsqlc.WhyFactsParams{CorpusID: o.CorpusID, ServiceID: o.ServiceID,
		Cap: int32(o.WorkerCap), GoneAfterSeconds: ReplicaGoneAfter.Seconds(), Now: r.injectedNow()})
	if err != nil {
		return nil, pgtx.Wrap("why", err)
	}
	return whyReasons(o, f), nil
}

// whyReasons reads the facts, in the order an operator should act on them.
func whyReasons(o WhyOptions, f dbsqlc.WhyFactsRow) []Reason {
	scope := fmt.Sprintf("--corpus %s --service %s", o.Corpus, o.Service)
	var out []Reason
	add := func(c Cause, fix, evidence string, args ...any) {
		out = append(out, Reason{Cause: c, Evidence: fmt.Sprintf(evidence, args...), Fix: fix})
	}
	if f.ReplicasGone != "" {
		add(CauseReplicaGone, "check the replica's log and its connection to the database; restart it (its leases are rows: nothing to recover)",
			"replicas whose heartbeat stopped without a clean stop (database unreachable from them, or dead), for how long: %s", f.ReplicasGone)
	}
	if f.Todo == 0 && f.Dispatched == 0 && f.Blocked == 0 {
		add(CauseFinished, "cortexq rerun "+scope+" (to run it again)", "no task TODO, dispatched or blocked")
		return out
	}
	if f.Blocked > 0 {
		add(CausePaused, "cortexq resume "+scope, "%d tasks blocked (paused), %d TODO", f.Blocked, f.Todo)
	}
	if f.Todo > 0 && f.HigherPriority != "" {
		add(CausePriority, fmt.Sprintf("cortexq corpus set %s --service %s --priority N (N at least theirs)", o.Corpus, o.Service),
			"priority %d; corpora of a higher priority with TODO tasks are served first: %s", f.Priority, f.HigherPriority)
	}
	if share := float64(f.Weight) / float64(int64(f.Weight)+f.RivalWeight); f.Todo > 0 && f.HigherPriority == "" && share < WeightStarvedBelow {
		add(CauseWeight, fmt.Sprintf("cortexq corpus set %s --service %s --weight N", o.Corpus, o.Service),
			"weight %d of %d at priority %d: about %.1f%% of the service's leases while the others have TODO tasks",
			f.Weight, int64(f.Weight)+f.RivalWeight, f.Priority, 100*share)
	}
	if f.Todo > 0 && f.WorkersAsking == 0 {
		last := "never (a worker is on record once it leased a task)"
		if f.LastRequest.Unix() != 0 {
			last = fmt.Sprintf("%s ago", f.Now.Sub(f.LastRequest).Round(time.Second))
		}
		add(CauseNoWorkers, fmt.Sprintf("start workers: cortexq worker ... --service %s --ventilator ... --sink ...", o.Service),
			"no worker asked for service %s in the last minute; the last request: %s", o.Service, last)
	}
	if f.Todo > 0 && f.WorkersAsking > 0 && f.WorkersAtCap >= f.WorkersAsking {
		add(CauseWorkersAtCap, "answer or expire the leases (cortexq status shows them), start more workers, or raise serve --max-in-flight-per-worker",
			"all %d workers that asked in the last minute hold %d or more unanswered leases (the cap)", f.WorkersAsking, o.WorkerCap)
	}
	if reapAge := f.Now.Sub(f.LastReap); f.Dispatched > 0 && (f.LastReap.Unix() == 0 || reapAge > 3*o.ReapInterval) {
		add(CauseNoReaper, "start a replica (cortexq serve): one is elected leader, and any reaps in a missing leader's stead",
			"no reaper pass for %s (interval %s): expired leases are not retried", ageOr(f.LastReap, f.Now), o.ReapInterval)
	}
	if f.FoldPending > 0 && (f.FoldedAt == nil || f.Now.Sub(*f.FoldedAt) > 3*o.FoldInterval) {
		folded := time.Time{}
		if f.FoldedAt != nil {
			folded = *f.FoldedAt
		}
		add(CauseNoFold, "start a replica (cortexq serve), or cortexq fold",
			"%d changes wait for a report fold, the last %s ago: reports and the dashboard lag (dispatch does not)", f.FoldPending, ageOr(folded, f.Now))
	}
	if f.DeadLettersHour > 0 {
		add(CauseDeadLetters, fmt.Sprintf("cortexq report %s --severity fatal; fix the workers, then cortexq rerun %s --severity fatal", scope, scope),
			"%d attempts leased in the last hour ended dead-lettered (%d dead letters held): its tasks fail on every attempt", f.DeadLettersHour, f.DeadLetters)
	}
	return out
}

// ageOr is how long ago t was, or "ever" for none.
func ageOr(t, now time.Time) string {
	if t.IsZero() || t.Unix() == 0 {
		return "ever"
	}
	return now.Sub(t).Round(time.Second).String()
}
