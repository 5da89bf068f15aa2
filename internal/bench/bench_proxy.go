package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/urfave/cli/v2"
)

// benchServeDSN is the connection string the replicas are given: dsn, or with --db-latency the
// one through latencyProxy; stop stops the proxy.
func benchServeDSN(c *cli.Context, dsn string, logf func(string, ...any)) (string, func(), error) {
	if !c.IsSet("db-latency") {
		return dsn, func() {}, nil
	}
	through, stop, err := latencyProxy(dsn, c.Duration("db-latency"))
	if err != nil {
		return "", nil, wired.Usagef(c, "%v", err)
	}
	logf("replicas reach the database through a proxy adding %s each way", c.Duration("db-latency"))
	return through, stop, nil
}

// latencyProxy starts toxiproxy, in this process, between the replicas and the database of dsn,
// adding latency each way (none: the proxy alone, the baseline of a ratio), and returns the
// connection string through it and a function that stops it. The database must be reached over
// TCP: the proxy forwards TCP connections (docs/performance.md#network-latency).
func latencyProxy(dsn string, latency time.Duration) (string, func(), error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return "", nil, fmt.Errorf("--db-latency: %w", err)
	}
	if strings.HasPrefix(cfg.Host, "/") || cfg.Host == "" {
		return "", nil, fmt.Errorf("--db-latency needs a database reached over TCP (--database-url postgres://user@host:port/db), not the unix socket %s: the proxy forwards TCP", cfg.Host)
	}
	zerolog.SetGlobalLevel(zerolog.ErrorLevel) // its toxics log every byte they hold at trace level
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "db", "127.0.0.1:0", net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))))
	if err := srv.Collection.Add(p, true); err != nil {
		return "", nil, fmt.Errorf("--db-latency: start the proxy: %w", err)
	}
	if ms := latency.Milliseconds(); ms > 0 {
		for _, stream := range []string{"upstream", "downstream"} {
			b, _ := json.Marshal(map[string]any{"name": "latency_" + stream, "type": "latency", "stream": stream,
				"toxicity": 1.0, "attributes": map[string]int64{"latency": ms}})
			if _, err := p.Toxics.AddToxicJson(strings.NewReader(string(b))); err != nil {
				p.Stop()
				return "", nil, fmt.Errorf("--db-latency: %w", err)
			}
		}
	}
	through, err := viaAddr(dsn, p.Listen)
	if err != nil {
		p.Stop()
		return "", nil, err
	}
	return through, func() { p.Toxics.ResetToxics(context.Background()); p.Stop() }, nil
}

// viaAddr returns dsn with its host and port replaced by addr (host:port).
func viaAddr(dsn, addr string) (string, error) {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Host = addr
		q := u.Query()
		q.Del("host")
		q.Del("port")
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	return dsn + " host=" + host + " port=" + port, nil // keyword/value: a later keyword wins
}
