package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/cortexq/cortexq/queue/wire"
)

// httpAddrDefault is where serve answers /metrics and /healthz: loopback, since neither needs
// to be reachable from elsewhere unless the operator says so.
const httpAddrDefault = "127.0.0.1:9464"

// serveHTTP serves /metrics (reg) and /healthz (pool) on addr until the returned func is
// called. It warns when addr reaches beyond loopback.
func serveHTTP(addr string, reg prometheus.Gatherer, pool *pgxpool.Pool, logger *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--http %s: %w", addr, err)
	}
	if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() {
		logger.Warn("/metrics and /healthz served beyond loopback: any host that reaches it can read them; bind --http to 127.0.0.1 unless a scraper elsewhere needs it",
			"http", ln.Addr().String())
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", metricsHandler(reg))
	mux.Handle("/healthz", healthzHandler(pool, logger))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	logger.Info("metrics", "http", ln.Addr().String())
	return func() { _ = hs.Close() }, nil
}

// metricsHandler serves reg's metrics, gathered at most once per metricsMaxAge: a scrape then
// costs the encoding only, however often clients ask (a collection reads the database and /proc).
func metricsHandler(reg prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(&cachedGatherer{g: reg, maxAge: metricsMaxAge}, promhttp.HandlerOpts{})
}

// metricsMaxAge is how old the metrics a scrape returns may be.
const metricsMaxAge = time.Second

// cachedGatherer answers Gather from its last gathering while it is younger than maxAge.
// Concurrent scrapes wait for one gathering rather than each running their own.
type cachedGatherer struct {
	g      prometheus.Gatherer
	maxAge time.Duration
	mu     sync.Mutex
	at     time.Time
	mfs    []*dto.MetricFamily
	err    error
}

// Gather implements prometheus.Gatherer. The families returned are shared: read only.
func (c *cachedGatherer) Gather() ([]*dto.MetricFamily, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() || time.Since(c.at) >= c.maxAge {
		c.mfs, c.err = c.g.Gather()
		c.at = time.Now()
	}
	return c.mfs, c.err
}

// healthzHandler answers 200 "ok" while the database answers a ping, else 503 "database
// unreachable". The error itself (socket paths, user names) goes to the log, rate-limited.
func healthzHandler(pool *pgxpool.Pool, logger *slog.Logger) http.Handler {
	failed := wire.NewRateLimiter(5 * time.Second)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := pool.Ping(ctx); err != nil {
			if n, emit := failed.Record(); emit {
				logger.Warn("/healthz: database unreachable", "count", n, "error", err)
			}
			http.Error(w, "database unreachable", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
}
