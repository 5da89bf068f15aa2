package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/internal/startstop"
	"github.com/cortexq/cortexq/queue/wire"
)

// The database link as this replica sees it (docs/operations.md#networks): every database call
// reports how it went (health.record), and a probe pings the database while no call succeeds.
// An outage is announced once, in one log line, when a probe fails, a call runs out its
// deadline, or calls have failed for outageAfter with no success between; while it lasts, a
// summary line every outageSummary says what failed and what is held; its end is one more
// line. Calls that fail outside an outage are logged at most once per 5 s. Nothing is logged
// per request.

// Timings of the link's watch.
const (
	// outageAfter is how long calls must fail, with no success, before an outage is announced.
	outageAfter = time.Second
	// outageSummary is how often a summary line is logged while the database stays away.
	outageSummary = 10 * time.Second
	// probeEvery is how often the database is pinged when no call has succeeded for that long.
	probeEvery = time.Second
	// probeTimeoutMax bounds a probe: with probeEvery, a silent link is found within about 4 s
	// of the last call that succeeded.
	probeTimeoutMax = 3 * time.Second
)

// health tracks whether the database answers: for the outage budget, the reachability gauge
// and the outage's log lines.
type health struct {
	budget time.Duration
	logger *slog.Logger

	mu          sync.Mutex
	failSince   time.Time   // the first failure since the last success; zero: none
	lastOK      time.Time   // the last success
	err         error       // the last failure
	errOp       string      // what failed last
	down        atomic.Bool // an outage is announced and not over (read without mu)
	downAt      time.Time   // when it was announced
	lastSummary time.Time
	failed      map[string]int // calls failed in this outage (or since the last line), by what
	heldAtDown  int64          // results held and refused when it was announced
	refusedAt   int64
	otherErrs   *wire.RateLimiter // failures outside an outage

	up         prometheus.Gauge
	reconnects prometheus.Counter
	// onUp runs when the database is back, and must not block: held results are claimed.
	onUp func()
	// heldCounts reports the results held now, and held and refused so far (results.go).
	heldCounts func() (now int, held, refused int64)
}

func newHealth(budget time.Duration, logger *slog.Logger, reg prometheus.Registerer) *health {
	h := &health{budget: budget, logger: logger, lastOK: time.Now(), failed: map[string]int{},
		otherErrs:  wire.NewRateLimiter(5 * time.Second),
		up:         prometheus.NewGauge(prometheus.GaugeOpts{Name: "cortexq_db_up", Help: "1 while this replica reaches its database, 0 during an outage it noticed (a probe or its calls failed)."}),
		reconnects: prometheus.NewCounter(prometheus.CounterOpts{Name: "cortexq_db_reconnects_total", Help: "Outages of the database this replica rode out: each time it came back after the replica found it away."}),
		onUp:       func() {},
		heldCounts: func() (int, int64, int64) { return 0, 0, 0 },
	}
	h.up.Set(1)
	if reg != nil {
		_ = reg.Register(h.up) // a second server in one process keeps the first one's
		_ = reg.Register(h.reconnects)
	}
	return h
}

// record takes the outcome of a database call of op (reserve, claim, attribute, ...). A missing
// row is an answer, not a failure.
func (h *health) record(op string, err error) {
	if err != nil && errors.Is(err, queue.ErrNotFound) {
		err = nil
	}
	if errors.Is(err, context.Canceled) {
		return // stopping: says nothing about the database
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	if err == nil {
		h.lastOK, h.failSince, h.err = now, time.Time{}, nil
		if h.down.Load() {
			h.backLocked(now, op)
		}
		return
	}
	if h.failSince.IsZero() {
		h.failSince = now
	}
	h.err, h.errOp = err, op
	h.failed[op]++
	if h.down.Load() {
		return
	}
	// A call that ran out its deadline waited that long for the database: announced at once.
	if now.Sub(h.failSince) >= outageAfter || errors.Is(err, context.DeadlineExceeded) {
		h.downLocked(now)
		return
	}
	if op == "probe" {
		return // announced by probeFailed
	}
	if n, emit := h.otherErrs.Record(); emit {
		h.logger.Warn("database call failed", "op", op, "count", n, "error", err)
	}
}

// downLocked announces an outage.
func (h *health) downLocked(now time.Time) {
	h.down.Store(true)
	h.downAt, h.lastSummary = now, now
	h.up.Set(0)
	_, h.heldAtDown, h.refusedAt = h.heldCounts()
	h.logger.Error("database unreachable: no new leases; results are held in memory and claimed once it is back; the replica exits if it stays away past the outage budget",
		"failed", h.errOp, "error", h.err, "failing_for", now.Sub(h.failSince).Round(time.Millisecond),
		"outage_budget", h.budget)
}

// backLocked announces the end of an outage and claims the held results.
func (h *health) backLocked(now time.Time, op string) {
	held, total, refused := h.heldCounts()
	h.logger.Info("database reachable again: leasing and claiming resume", "answered", op,
		"down_for", now.Sub(h.downAt).Round(time.Millisecond), "calls_failed", h.failedText(),
		"results_held", total-h.heldAtDown, "results_refused", refused-h.refusedAt, "held_now", held)
	h.down.Store(false)
	clear(h.failed)
	h.up.Set(1)
	h.reconnects.Inc()
	h.onUp()
}

// failedText is the outage's failed calls, by what: "claim=3 reserve=120".
func (h *health) failedText() string {
	var b strings.Builder
	for _, op := range slices.Sorted(maps.Keys(h.failed)) {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", op, h.failed[op])
	}
	return b.String()
}

// watch is the periodic check, every 250 ms: it announces an outage whose calls stopped
// reporting, logs the summary that is due, and reports whether a probe is due.
func (h *health) watch() (probe bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	if !h.down.Load() && !h.failSince.IsZero() && now.Sub(h.failSince) >= outageAfter {
		h.downLocked(now)
	}
	if h.down.Load() && now.Sub(h.lastSummary) >= outageSummary {
		h.lastSummary = now
		held, total, refused := h.heldCounts()
		h.logger.Warn("database still unreachable", "down_for", now.Sub(h.downAt).Round(time.Second),
			"calls_failed", h.failedText(), "results_held", total-h.heldAtDown, "results_refused", refused-h.refusedAt,
			"held_now", held, "last_error", h.err, "outage_budget_left", h.budgetLeftLocked(now).Round(time.Second))
	}
	return now.Sub(h.lastOK) >= probeEvery
}

// budgetLeftLocked is how long the outage may still last before the replica gives up.
func (h *health) budgetLeftLocked(now time.Time) time.Duration {
	if h.budget <= 0 || h.failSince.IsZero() {
		return 0
	}
	return max(h.budget-now.Sub(h.failSince), 0)
}

// probeFailed announces an outage at once: a probe is the one call whose failure says the
// database is away, whatever else was waiting.
func (h *health) probeFailed(err error) {
	h.record("probe", err)
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.down.Load() && err != nil {
		h.downLocked(time.Now())
	}
}

func (h *health) expired() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.budget > 0 && !h.failSince.IsZero() && time.Since(h.failSince) > h.budget
}

func (h *health) lastErr() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// prober pings the database on a connection of its own, outside the pool: a pool whose
// connections all wait on calls (busy, or on a silent link) must not delay the probe, nor
// make a busy database look away. One probe runs at a time.
type prober struct {
	cfg  *pgx.ConnConfig
	conn *pgx.Conn
}

// ping pings the database, connecting first if need be; a connection that failed is closed.
func (p *prober) ping(ctx context.Context) error {
	if p.conn == nil {
		c, err := pgx.ConnectConfig(ctx, p.cfg.Copy())
		if err != nil {
			return err
		}
		p.conn = c
	}
	if err := p.conn.Ping(ctx); err != nil {
		p.close()
		return err
	}
	return nil
}

// close closes the probe's connection, if any, waiting at most a second on its peer.
func (p *prober) close() {
	if p.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = p.conn.Close(ctx)
	p.conn = nil
}

// probe pings the database, within probeTimeoutMax, and records the outcome.
func (s *dbWatch) probe(ctx context.Context, p *prober) {
	pctx, cancel := context.WithTimeout(ctx, min(s.cfg.DBTimeout, probeTimeoutMax))
	defer cancel()
	err := p.ping(pctx)
	if ctx.Err() != nil {
		return // stopping: says nothing about the database
	}
	if err != nil {
		s.health.probeFailed(err)
		return
	}
	s.health.record("probe", nil)
}

// dbWatch is the service of the outage watch (watchDB): it probes the database while no call
// succeeds and ends the run once the outage budget is spent.
type dbWatch struct {
	*core
	connConfig *pgx.ConnConfig // the pool's, for the probe's connection of its own
}

func (s *dbWatch) service(fail context.CancelCauseFunc) startstop.Service {
	return &loops{n: 1, fail: fail, run: func(ctx context.Context) error { return s.watchDB(ctx, fail) }}
}

// watchDB watches the database link every 250 ms (health.watch), probing it while no call
// succeeds, and stops the server when the database has been away longer than the outage budget.
// It runs apart from the calls it watches, so a call that hangs delays nothing here.
func (s *dbWatch) watchDB(ctx context.Context, stop context.CancelCauseFunc) error {
	check := time.NewTicker(250 * time.Millisecond)
	defer check.Stop()
	var probing atomic.Bool
	var probes sync.WaitGroup
	p := &prober{cfg: s.connConfig}
	defer p.close()
	defer probes.Wait()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-check.C:
		}
		if s.health.watch() && !probing.Load() {
			probing.Store(true)
			probes.Go(func() { defer probing.Store(false); s.probe(ctx, p) })
		}
		if s.health.expired() {
			err := fmt.Errorf("database unreachable for longer than the outage budget (%s): %w",
				s.health.budget, s.health.lastErr())
			stop(err)
			return err
		}
	}
}
