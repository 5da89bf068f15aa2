package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	zmq "github.com/pebbe/zmq4"
	"github.com/puzpuzpuz/xsync/v4"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/allowlist"
	"github.com/cortexq/cortexq/queue/archive"
	"github.com/cortexq/cortexq/queue/catalog"
	"github.com/cortexq/cortexq/queue/hot"
	"github.com/cortexq/cortexq/queue/lease"
	"github.com/cortexq/cortexq/queue/wire"
)

// Server is one replica's worker-facing side: ventilator, sink, writers and claimers.
type Server struct {
	cfg     Config
	store   *lease.Store
	catalog *catalog.Catalog
	keys    *allowlist.List
	hot     *hot.Map
	logger  *slog.Logger
	metrics *metrics
	health  *health
	outage  *outageHeld // results held while the database is away (outage.go)
	// connConfig is the pool's connection configuration, for the outage probe's own (dblink.go).
	connConfig *pgx.ConnConfig
	sec        *security   // CURVE allow-list, bogus-result budgets (curve.go, guard.go)
	fileTag    archive.Tag // in the names of this process's temp and backup files

	stopLeasing atomic.Bool
	// backpressured is set when the ventilator held hand-outs back for the sink's backlog
	// (ventilator.serve): the claimer that next shrinks the backlog wakes the ventilator's loop,
	// whose waiting requests would otherwise wait for a poll interval.
	backpressured atomic.Bool
	// claimShare is the replicas' demand over this replica's, all services together, as
	// float64 bits (ventilator.shares): the claimer waits for its batch ClaimFlush times this
	// (claimWait). Zero: 1.
	claimShare atomic.Uint64
	// leasing counts the ventilator's reservation jobs (reserve, release, check) not yet
	// delivered: Drain waits for them too; stocked counts the tasks in its stock, reserved and
	// not handed out. attrib writes the hand-outs' workers (attribute.go).
	leasing   atomic.Int32
	stocks    *stockIDs
	attrib    *attributor
	unknown   *xsync.Map[string, time.Time] // service names recently not found
	claimIn   chan *item
	unwritten *semaphore.Weighted // bytes of received results not yet written (resultsHeldMax)
	// coldReqs carries the writers' lookups of tasks not mirrored to the batcher, and slow
	// holds the results of peers past their bogus budget (guard.go).
	coldReqs chan lookup
	slow     slowLane
	// resyncNow asks maintain for a resync of the hot mirror soon; resyncs counts those begun
	// and those done, so that a request held for the next one knows when it is over.
	resyncNow chan struct{}
	resyncs   struct{ begun, done atomic.Uint64 }
	// tracked are the sizes of the ventilator's per-identity tables, published by its loop for
	// the cortexq_identity_entries gauges (metrics.go).
	tracked struct{ waiting, asking, askingKey, capped atomic.Int64 }
	// parsed is the budget of parsed reports not yet claimed (Config.MaxParsedBytes), in
	// parsedWeight; parsedBytes is what is taken of it, for the metric.
	parsed      *semaphore.Weighted
	parsedBytes atomic.Int64
	// fdsPeak is the most file descriptors open since the C heap was last trimmed
	// (trimMemory), under trimMu: maintain's goroutine checks it, and so may a test or an
	// operator's call of watchFDs.
	trimMu  sync.Mutex
	fdsPeak int
	// logLimits are the rate limits of log lines that floods or outages can repeat, shared by
	// the goroutines that log them: at most a line per 5 s each for the whole replica.
	logLimits struct{ dropped, writeFailed, unusableDropped, unusable, fdsLow, late *wire.RateLimiter }
	// claiming keeps the claimers off each other's tasks (claimlocks.go); claimFront is held
	// by the claimer gathering and reading a batch (the relay: Server.claimer).
	claiming   claimLocks
	claimFront sync.Mutex

	mu        sync.Mutex
	endpoints [2]string
	bound     chan struct{}
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
	s := &Server{
		cfg:        cfg,
		store:      deps.Store,
		catalog:    deps.Catalog,
		keys:       deps.Keys,
		hot:        hot.New(),
		logger:     cfg.Logger.With("component", "dispatch"),
		unknown:    xsync.NewMap[string, time.Time](),
		bound:      make(chan struct{}),
		health:     newHealth(cfg.OutageBudget, cfg.Logger.With("component", "dispatch"), cfg.Registerer),
		outage:     newOutageHeld(cfg.OutageHeldResults, cfg.OutageHeldBytes, cfg.Registerer),
		connConfig: deps.ConnConfig,
		unwritten:  semaphore.NewWeighted(resultsHeldMax),
		// One resync asked for is enough for every request that asks meanwhile.
		resyncNow: make(chan struct{}, 1),
		parsed:    semaphore.NewWeighted(cfg.MaxParsedBytes),
		fileTag:   archive.NewTag(deps.Store.Config().Replica),
		stocks:    newStockIDs(),
	}
	for _, l := range []**wire.RateLimiter{&s.logLimits.dropped, &s.logLimits.writeFailed, &s.logLimits.unusableDropped, &s.logLimits.unusable, &s.logLimits.fdsLow, &s.logLimits.late} {
		*l = wire.NewRateLimiter(5 * time.Second)
	}
	if cfg.MessageSize != wire.MessageSize {
		s.logger.Warn("payload chunks are not 100,000 bytes: upstream CorTeX workers end a payload at its first frame shorter than 100,000 bytes, so they get cut archives and lose track of the frames; use this size only with workers that read every frame (cortexq worker)",
			"message_size", cfg.MessageSize)
	}
	sec, err := newSecurity(cfg.Security, cfg.Registerer)
	if err != nil {
		return nil, err
	}
	s.sec = sec
	s.metrics = newMetrics(cfg.Registerer, func() float64 { return float64(s.hot.Len()) },
		func() float64 { return float64(s.parsedBytes.Load()) }, func() float64 { return float64(s.stocks.len()) },
		s.identityEntries)
	s.attrib = newAttributor(s)
	s.health.onUp = s.outage.poke
	s.health.heldCounts = s.outage.counts
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
	return map[string]int{
		"waiting": int(s.tracked.waiting.Load()), "asking": int(s.tracked.asking.Load()),
		"asking_key": int(s.tracked.askingKey.Load()), "capped": int(s.tracked.capped.Load()),
		"hot_workers": workers, "hot_keys": keys, "budgets": budgets,
	}
}

// InFlight reports how many leases of this replica await a reply.
func (s *Server) InFlight() int { return s.hot.Len() }

// StopLeasing makes every further request get a no-work reply; results are still taken. It is
// the first step of a graceful stop.
func (s *Server) StopLeasing() { s.stopLeasing.Store(true) }

// Endpoints reports the bound ventilator and sink endpoints once Run has bound them.
func (s *Server) Endpoints(ctx context.Context) (ventilator, sink string, err error) {
	select {
	case <-s.bound:
	case <-ctx.Done():
		return "", "", ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.endpoints[0], s.endpoints[1], nil
}

// Drain stops leasing and waits until every lease of this replica has been answered, those of
// lease transactions under way included, or timeout passes. It reports how many leases were still unanswered.
func (s *Server) Drain(ctx context.Context, timeout time.Duration) int {
	s.StopLeasing()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for s.hot.Len() > 0 || s.leasing.Load() > 0 || s.stocks.len() > 0 {
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

// Run binds the sockets and serves workers until ctx is done. It returns an error when a socket
// cannot be bound or the database stays away longer than the outage budget.
func (s *Server) Run(ctx context.Context) error {
	s.logFDLimit()
	zctx, err := zmq.NewContext()
	if err != nil {
		return fmt.Errorf("zeromq context: %w", err)
	}
	defer zctx.Term()
	if err := zctx.SetIoThreads(s.cfg.IOThreads); err != nil {
		return fmt.Errorf("zeromq context: %w", err)
	}
	v, err := s.newVentilator(zctx)
	if err != nil {
		return err
	}
	defer v.close()
	pull, err := s.newSink(zctx)
	if err != nil {
		return err
	}
	defer pull.Close()
	stopSecurity, err := s.secure(ctx, zctx, v.router, pull)
	if err != nil {
		return err
	}
	defer stopSecurity()
	if err := s.bind(ctx, v.router, pull); err != nil {
		return err
	}
	return s.serve(ctx, zctx, v, pull)
}

// newSink makes the sink's PULL socket.
func (s *Server) newSink(zctx *zmq.Context) (*zmq.Socket, error) {
	pull, err := zctx.NewSocket(zmq.PULL)
	if err != nil {
		return nil, fmt.Errorf("sink socket: %w", err)
	}
	maxMsg := sinkFrameMax(s.cfg.MaxResultBytes)
	for _, set := range []func() error{
		func() error { return pull.SetLinger(0) },
		func() error { return pull.SetBacklog(listenBacklog) },
		func() error { return pull.SetRcvtimeo(pollInterval) },
		func() error { return pull.SetMaxmsgsize(maxMsg) },
		func() error { return setKeepalive(pull, s.cfg.TCPKeepaliveIdle) },
		func() error { return setHeartbeat(pull, s.cfg.HeartbeatInterval, s.cfg.HeartbeatTimeout) },
	} {
		if err := set(); err != nil {
			pull.Close()
			return nil, fmt.Errorf("sink socket options: %w", err)
		}
	}
	return pull, nil
}

// bind binds the ventilator and the sink, and publishes their endpoints (Endpoints).
func (s *Server) bind(ctx context.Context, router, pull *zmq.Socket) error {
	if err := bindRetry(ctx, router, s.cfg.VentilatorAddr, s.cfg.BindRetry); err != nil {
		return fmt.Errorf("ventilator: %w", err)
	}
	if err := bindRetry(ctx, pull, s.cfg.SinkAddr, s.cfg.BindRetry); err != nil {
		return fmt.Errorf("sink: %w", err)
	}
	s.mu.Lock()
	s.endpoints = [2]string{lastEndpoint(router), lastEndpoint(pull)}
	s.mu.Unlock()
	close(s.bound)
	s.logger.Info("serving workers", "ventilator", s.endpoints[0], "sink", s.endpoints[1],
		"max_in_flight", s.cfg.MaxInFlight)
	return nil
}

// serve runs the loops on the bound sockets until ctx is done or one fails, then stops them in
// order: the receiver, ventilator and leasers first, then the writers, the lookups, the
// claimers (which take every result still held) and the worker counters' last flush.
func (s *Server) serve(ctx context.Context, zctx *zmq.Context, v *ventilator, pull *zmq.Socket) error {
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// A loop that fails stops the others: the replica exits with its error rather than, say,
	// taking results while no request is answered.
	var g errgroup.Group
	goStop := func(loop func() error) {
		g.Go(func() error {
			err := loop()
			if err != nil {
				cancel(err)
			}
			return err
		})
	}

	// Worker counters are written once a second, outside the lease and claim transactions, and
	// once more after the last claim.
	flushCtx, stopFlush := context.WithCancel(context.WithoutCancel(ctx))
	var flusher sync.WaitGroup
	flusher.Go(func() { s.store.RunWorkerFlusher(flushCtx, time.Second) })

	// Sink: receiver → writers → claimers.
	inbox := make(chan inbound, 256)
	s.claimIn = make(chan *item, s.cfg.ClaimBatch*2)
	goStop(func() error { return s.receiver(runCtx, pull, inbox) })
	waitSink := s.startSink(runCtx, cancel, zctx, v, inbox)
	// Ventilator and its leasers.
	var leasers sync.WaitGroup
	for range s.cfg.Leasers {
		leasers.Go(func() {
			if err := v.runLeaser(runCtx, zctx); err != nil {
				cancel(err)
			}
		})
	}
	var attributing sync.WaitGroup
	attributing.Go(func() { s.attrib.run(runCtx) })
	goStop(func() error { return v.run(runCtx) })
	// Hot mirror resync; the database link's watch and the outage budget (dblink.go).
	goStop(func() error { return s.maintain(runCtx) })
	goStop(func() error { return s.watchDB(runCtx, cancel) })

	err := g.Wait()
	leasers.Wait()
	attributing.Wait()
	waitSink()
	stopFlush()
	flusher.Wait()
	if cause := context.Cause(runCtx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// startSink starts the sink's writers, lookups and claimers on the results the receiver puts in
// inbox; waitSink returns once the receiver has closed inbox and they have all ended, every
// result taken claimed or dropped.
func (s *Server) startSink(runCtx context.Context, cancel context.CancelCauseFunc, zctx *zmq.Context, v *ventilator, inbox chan inbound) (waitSink func()) {
	// The writers place the results the receiver took; they end when it closes inbox. On a
	// stop their lookups still reach the database for writersGrace (the results of tasks this
	// replica does not mirror need one); on a failure, such as an outage, they drop the rest
	// at once, for the reaper.
	wctx, stopWriters := context.WithCancel(context.WithoutCancel(runCtx))
	stopAfter := context.AfterFunc(runCtx, func() {
		if !errors.Is(context.Cause(runCtx), context.Canceled) {
			stopWriters()
			return
		}
		time.AfterFunc(writersGrace, stopWriters)
	})
	s.coldReqs = make(chan lookup, s.cfg.Writers)
	var writers, lookups, claimers sync.WaitGroup
	lookups.Go(func() { s.lookupBatches(wctx, s.coldReqs) })
	slowStop := make(chan struct{})
	lookups.Go(func() { s.runSlowLane(wctx, s.claimIn, slowStop) })
	for range s.cfg.Writers {
		writers.Go(func() { s.writer(wctx, inbox, s.claimIn) })
	}
	writers.Go(func() { s.replayHeld(wctx, runCtx.Done(), s.claimIn) })
	for range s.cfg.Claimers {
		claimers.Go(func() {
			err := v.withPoke(zctx, func(poke func()) { s.claimer(runCtx, s.claimIn, poke) })
			if err != nil {
				cancel(err)
				s.claimer(runCtx, s.claimIn, func() {}) // the results still need their claims
			}
		})
	}
	return func() {
		writers.Wait()
		close(s.coldReqs)
		close(slowStop)
		lookups.Wait()
		close(s.claimIn)
		claimers.Wait()
		stopAfter()
		stopWriters()
	}
}

// sinkFrameMax is the sink's ZMQ_MAXMSGSIZE: a frame larger than this cuts its sender's
// connection. It lets a single frame of a result of up to twice the cap through, so that such a
// result is recorded Invalid (cortex/result_too_large) rather than lost with the connection;
// and it never exceeds math.MaxInt32, since a larger frame would reach us silently cut to that
// length (libzmq's and pebbe's receive report sizes as a C int).
func sinkFrameMax(maxResult int64) int64 {
	return min(satAdd(maxResult, maxResult), math.MaxInt32)
}

// maintain resyncs the hot mirror, every hotResync and when asked (resyncSoon), and watches
// the file descriptors.
func (s *Server) maintain(ctx context.Context) error {
	tick := time.NewTicker(hotResync)
	defer tick.Stop()
	var last time.Time
	var soon <-chan time.Time // the resync asked for, once hotResyncMin after the last
	fds := time.NewTicker(fdsWatch)
	defer fds.Stop()
	s.watchFDs()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-fds.C:
			s.watchFDs()
		case <-s.resyncNow:
			if soon == nil {
				soon = time.After(hotResyncMin - time.Since(last))
			}
		case <-soon:
			soon = nil
			s.resync(ctx)
			last = time.Now()
		case <-tick.C:
			s.resync(ctx)
			last = time.Now()
		}
	}
}

// resync rebuilds the hot mirror from this replica's in-flight rows in the database.
func (s *Server) resync(ctx context.Context) {
	s.resyncs.begun.Add(1)
	defer s.resyncs.done.Add(1)
	since := s.hot.Generation()
	rctx, cancel := context.WithTimeout(ctx, s.cfg.DBTimeout)
	defer cancel()
	rows, err := s.store.InFlightRows(rctx)
	s.health.record("resync", err)
	if err != nil {
		return
	}
	tasks := make([]hot.Task, len(rows))
	for i, r := range rows {
		tasks[i] = hot.Task{Task: r.Task, Worker: r.Worker}
		if s.sec.curve {
			tasks[i].Key = lease.KeyOfWorker(r.Worker)
		}
	}
	s.hot.Reset(tasks, since)
}

// resyncSoon asks for a resync of the hot mirror within hotResyncMin, and reports how many
// resyncs will have been done once it is over (compare resyncs.done).
func (s *Server) resyncSoon() uint64 {
	after := s.resyncs.begun.Load() + 1
	select {
	case s.resyncNow <- struct{}{}:
	default: // one is asked for already
	}
	return after
}

// service looks a service up by name, answering names recently not found from memory. A name
// not found is bogus (guard.go): it is charged to the sender (the peer of ctx), and a sender
// past its budget gets no lookup for a name that is not cached (errBogusBudget).
func (s *Server) service(ctx context.Context, name string) (catalog.Service, error) {
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

// noteUnusable records, through the claimers, that a lease's worker got no payload.
func (s *Server) noteUnusable(l lease.Lease) {
	it := &item{result: lease.Result{TaskID: l.TaskID, Worker: l.Worker, ServiceID: l.ServiceID, Kind: lease.KindUnusable}}
	select {
	case s.claimIn <- it:
	default: // the claimers are full: the reaper still moves the task on at its deadline
		if n, emit := s.logLimits.unusableDropped.Record(); emit {
			s.logger.Warn("claimers busy: a lease whose worker got no payload is left to its deadline",
				"count", n, "task_id", l.TaskID, "worker", l.Worker)
		}
	}
}

// unusableResult counts and logs (rate-limited) a result that is no usable archive: the task
// stays in flight, answered, and the reaper retries it; the attempt's outcome says unusable.
func (s *Server) unusableResult(res wire.Result, reason string, err error) {
	s.metrics.unusable.WithLabelValues(reason).Inc()
	if n, emit := s.logLimits.unusable.Record(); emit {
		s.logger.Warn("unusable result: the task is left to the reaper to retry", "count", n, "reason", reason,
			"task_id", res.TaskID, "worker", res.Identity, "service", res.Service, "bytes", res.Size, "error", err)
	}
}

// Incarnation reports the random name of this process in its temp and backup files' names,
// for archive.SweepConfig.
func (s *Server) Incarnation() string { return s.fileTag.Incarnation() }
