package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/puzpuzpuz/xsync/v4"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/allowlist"
	"github.com/cortexq/cortexq/queue/archive"
	"github.com/cortexq/cortexq/queue/catalog"
	"github.com/cortexq/cortexq/queue/hot"
	"github.com/cortexq/cortexq/queue/internal/startstop"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/wire"
)

// core is what the parts of the worker-facing side share: each part gets it at its making,
// with the other parts it works with (the claimers, the upkeep), never through the Server.
type core struct {
	cfg     Config
	store   *lease.Store
	catalog *catalog.Catalog
	hot     *hot.Map // the hot mirror: this replica's leases in flight
	logger  *slog.Logger
	metrics *metrics
	health  *health                       // the database link (dblink.go)
	sec     *security                     // CURVE allow-list, bogus-result budgets (curve.go, guard.go)
	stocks  *stockIDs                     // the ids of the tasks in the ventilator's stock (stock.go)
	fileTag archive.Tag                   // in the names of this process's temp and backup files
	unknown *xsync.Map[string, time.Time] // service names recently not found (service)
	// logLimits are the rate limits of log lines that floods or outages can repeat, shared by
	// the goroutines that log them: at most a line per 5 s each for the whole replica.
	logLimits struct{ dropped, writeFailed, unusableDropped, unusable, fdsLow, late *wire.RateLimiter }
}

// Server is one replica's worker-facing side: the services of its group (Run), made once.
type Server struct {
	*core
	zmq     *zmqContext
	vent    *ventilator // the ventilator, its leasers and its stock (ventilator.go, stock.go)
	sink    *sink       // the receiver and the writers (sink.go)
	claims  *claimers   // the claimers' relay (claim.go)
	upkeep  *upkeep     // the hot mirror's resyncs, the file descriptors' watch
	auth    *auth       // CURVE's ZAP handler and allow-list poller (curve.go)
	dbWatch *dbWatch    // the outage watch (dblink.go)
	group   startstop.Group
	bound   *endpoints
}

// unknownServiceTTL is how long a service name that was not found is answered from memory, so
// a flood of requests for it costs no database hit per message.
const unknownServiceTTL = 5 * time.Second

// writersGrace is how long the sink's writers may still look results up after a stop.
const writersGrace = 10 * time.Second

// hotResync is how often the hot mirror is rebuilt from the database (rows another replica's
// reaper moved on, or whose results another replica took, leave it there); hotResyncMin is
// the least time between two resyncs asked for sooner (resyncSoon).
const (
	hotResync    = 5 * time.Second
	hotResyncMin = 250 * time.Millisecond
)

// Deps are what a Server works through: the lease store, the catalog of services and corpora,
// the CURVE allow-list, and the pool's connection settings, for the outage probe's connection of
// its own (dblink.go).
type Deps struct {
	Store      *lease.Store
	Catalog    *catalog.Catalog
	Keys       *allowlist.List
	ConnConfig *pgx.ConnConfig
}

// New returns a Server working through deps.
func New(deps Deps, cfg Config) (*Server, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	logger := cfg.Logger.With("component", "dispatch")
	c := &core{
		cfg:     cfg,
		store:   deps.Store,
		catalog: deps.Catalog,
		hot:     hot.New(),
		logger:  logger,
		unknown: xsync.NewMap[string, time.Time](),
		health:  newHealth(cfg.OutageBudget, logger, cfg.Registerer),
		fileTag: archive.NewTag(deps.Store.Config().Replica),
		stocks:  newStockIDs(),
	}
	for _, l := range []**wire.RateLimiter{&c.logLimits.dropped, &c.logLimits.writeFailed, &c.logLimits.unusableDropped, &c.logLimits.unusable, &c.logLimits.fdsLow, &c.logLimits.late} {
		*l = wire.NewRateLimiter(5 * time.Second)
	}
	if cfg.MessageSize != wire.MessageSize {
		logger.Warn("payload chunks are not 100,000 bytes: upstream CorTeX workers end a payload at its first frame shorter than 100,000 bytes, so they get cut archives and lose track of the frames; use this size only with workers that read every frame (cortexq worker)",
			"message_size", cfg.MessageSize)
	}
	sec, err := newSecurity(cfg.Security, cfg.Registerer)
	if err != nil {
		return nil, err
	}
	c.sec = sec
	s := &Server{core: c, zmq: &zmqContext{ioThreads: cfg.IOThreads}, bound: newEndpoints(),
		upkeep: newUpkeep(c), auth: &auth{core: c, keys: deps.Keys}, dbWatch: &dbWatch{core: c, connConfig: deps.ConnConfig}}
	s.claims = newClaimers(c)
	s.vent = newVentilator(c, s.claims, s.upkeep)
	s.claims.vent = s.vent
	s.sink = newSink(c, s.claims)
	c.metrics = newMetrics(cfg.Registerer, func() float64 { return float64(c.hot.Len()) },
		func() float64 { return float64(s.claims.parsedBytes.Load()) }, func() float64 { return float64(c.stocks.len()) },
		s.identityEntries)
	c.health.onUp = s.sink.outage.poke
	c.health.heldCounts = s.sink.outage.counts
	return s, nil
}

// identityEntries reports the entries of every table this replica keeps per worker identity or
// per peer (docs/operations.md#fleet-size): each is bounded by the requests waiting, the
// leases in flight or the peers recently charged, never by the identities ever seen.
func (s *Server) identityEntries() map[string]int {
	workers, keys := s.hot.Names()
	s.sec.peersMu.Lock()
	budgets := len(s.sec.peers)
	s.sec.peersMu.Unlock()
	t := &s.vent.tracked
	return map[string]int{
		"waiting": int(t.waiting.Load()), "asking": int(t.asking.Load()),
		"asking_key": int(t.askingKey.Load()), "capped": int(t.capped.Load()),
		"hot_workers": workers, "hot_keys": keys, "budgets": budgets,
	}
}

// InFlight reports how many leases of this replica await a reply.
func (s *Server) InFlight() int { return s.hot.Len() }

// StopLeasing makes every further request get a no-work reply; results are still taken. It is
// the first step of a graceful stop.
func (s *Server) StopLeasing() { s.vent.stopLeasing.Store(true) }

// Endpoints reports the bound ventilator and sink endpoints once Run has bound them.
func (s *Server) Endpoints(ctx context.Context) (ventilator, sink string, err error) {
	return s.bound.wait(ctx)
}

// Drain stops leasing and waits until every lease of this replica has been answered, those of
// lease transactions under way included, or timeout passes. It reports how many leases were still unanswered.
func (s *Server) Drain(ctx context.Context, timeout time.Duration) int {
	s.StopLeasing()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for s.hot.Len() > 0 || s.vent.leasing.Load() > 0 || s.stocks.len() > 0 {
		select {
		case <-deadline.C:
			return s.hot.Len()
		case <-ctx.Done():
			return s.hot.Len()
		case <-tick.C:
		}
	}
	return 0
}

// part is a service of the worker-facing side's group, named for the drain order's test.
type part struct {
	name string
	startstop.Service
}

// parts are the services of one run in their order: each starts after those it relies on and
// stops before them. run ends with the run; fail ends it with a loop's error; failed reports
// whether it did.
func (s *Server) parts(run context.Context, fail context.CancelCauseFunc, failed func() bool) []part {
	return []part{
		{"zmq", s.zmq}, // the ZeroMQ context: terminated last, once every socket is closed
		{"ventilator sockets", s.vent.sockets(s.zmq)},    // the ROUTER and its wake socket
		{"sink socket", s.sink.socket(s.zmq)},            // the PULL socket
		{"curve", s.auth.service(s.zmq, s.vent, s.sink)}, // CURVE on both, before they are bound
		{"bind", s.bound.service(run, s.vent, s.sink)},   // bound, published (Endpoints)
		// The worker counters, flushed once more after the last claim.
		{"worker counters", startstop.Background(func(ctx context.Context) { s.store.RunWorkerFlusher(ctx, time.Second) })},
		{"outage watch", s.dbWatch.service(fail)},               // the outage budget
		{"upkeep", s.upkeep},                                    // the hot mirror's resyncs, the file descriptors
		{"claimers", s.claims.service(s.zmq, fail)},             // stop once every result is handed to them
		{"writers", s.sink.writers(failed)},                     // the writers, the cold lookups, the slow lane, the held results
		{"receiver", s.sink.receiver(fail)},                     // stops taking results once nothing is handed out
		{"attributor", startstop.Background(s.vent.attrib.run)}, // the hand-outs' workers, written last at the stop
		{"ventilator", s.vent.service(s.zmq, fail)},             // the leasers and the loop: stop first, giving the stock back
	}
}

// Run binds the sockets and serves workers until ctx is done. It returns an error when a socket
// cannot be bound or the database stays away longer than the outage budget.
//
// The worker-facing side is one group of services (queue/internal/startstop), started in the
// order of parts and stopped in reverse: that order is the drain order. A service whose loop fails
// ends the run with its error (fail), and the whole group stops in the same order.
func (s *Server) Run(ctx context.Context) error {
	s.logFDLimit()
	run, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	failed := func() bool { return !errors.Is(context.Cause(run), context.Canceled) }
	parts := s.parts(run, fail, failed)
	services := make([]startstop.Service, len(parts))
	for i, p := range parts {
		services[i] = p.Service
	}
	err := s.group.Start(ctx, services...)
	if err != nil {
		return err
	}
	<-run.Done()
	s.group.Stop()
	if cause := context.Cause(run); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return nil
}

// service looks a service up by name, answering names recently not found from memory. A name
// not found is bogus (guard.go): it is charged to the sender (the peer of ctx), and a sender
// past its budget gets no lookup for a name that is not cached (errBogusBudget).
func (s *core) service(ctx context.Context, name string) (catalog.Service, error) {
	if svc, ok := s.catalog.CachedService(name); ok {
		return svc, nil
	}
	now := time.Now()
	if at, ok := s.unknown.Load(name); ok && now.Sub(at) < unknownServiceTTL {
		return catalog.Service{}, fmt.Errorf("service %q: %w", name, queue.ErrNotFound)
	}
	p := peerOf(ctx)
	if s.sec.spent(p, now) {
		s.sec.limited.Inc()
		if n, emit := s.sec.bogusLog.Record(); emit {
			s.logger.Warn("messages for unknown services over budget: answered without a lookup", "count", n,
				"peer", p.budgetName(), "service", name)
		}
		return catalog.Service{}, fmt.Errorf("service %q: %w", name, errBogusBudget)
	}
	s.sec.serviceLookups.Add(1)
	svc, err := s.catalog.Service(ctx, name)
	if errors.Is(err, queue.ErrNotFound) {
		s.sec.charge(p, now)
		if s.unknown.Size() > 10000 {
			s.unknown.Clear()
		}
		s.unknown.Store(name, now)
	} else if err != nil {
		// Only a failure is news about the database: the catalog answers a known service from
		// its cache, and counting that as a success would hide an outage from the budget for
		// as long as workers keep asking.
		s.health.record("lookup", err)
	}
	return svc, err
}

// unusableResult counts and logs (rate-limited) a result that is no usable archive: the task
// stays in flight, answered, and the reaper retries it; the attempt's outcome says unusable.
func (s *core) unusableResult(res wire.Result, reason string, err error) {
	s.metrics.unusable.WithLabelValues(reason).Inc()
	if n, emit := s.logLimits.unusable.Record(); emit {
		s.logger.Warn("unusable result: the task is left to the reaper to retry", "count", n, "reason", reason,
			"task_id", res.TaskID, "worker", res.Identity, "service", res.Service, "bytes", res.Size, "error", err)
	}
}

// Incarnation reports the random name of this process in its temp and backup files' names,
// for archive.SweepConfig.
func (s *Server) Incarnation() string { return s.fileTag.Incarnation() }
