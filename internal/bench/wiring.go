// Package bench is the engine of `cortexq bench`: it stages corpora, runs replicas (`cortexq
// serve` subprocesses) and workers, or a simulated fleet of worker identities (--fleet), and
// reports throughput, latency, CPU and memory, against River's own queue when asked
// (--vs-river). docs/performance.md has its numbers. The staging helpers (StageCorpus,
// EnsureService, ByteIdentical) serve `cortexq demo` and the CLI's tests too. The CLI wires it
// (Command): what it takes from the CLI is in Wiring.
package bench

import (
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/queue/base"
)

// Wiring is what the bench takes from the CLI that runs it.
type Wiring struct {
	// EnvVars names the environment variables of a flag (CORTEXQ_<suffix>).
	EnvVars func(suffix string) []string
	// Usagef is a usage error, with the command's help named.
	Usagef func(c *cli.Context, format string, args ...any) error
	// DatabaseURL is the database the commands use; OpenBase connects to it (queue/base).
	DatabaseURL func(c *cli.Context) (string, error)
	OpenBase    func(c *cli.Context, tune ...func(*pgxpool.Config)) (*base.Base, func(), error)
	// DatabaseURLFlag names the global flag of DatabaseURL.
	DatabaseURLFlag string
	// TuneGC sets the garbage collector as serve's.
	TuneGC func()
	// MetricsMaxAge is how old the metrics a replica's /metrics answers may be.
	MetricsMaxAge time.Duration
}

// w is the CLI's wiring, set by Command.
var w Wiring

// Command is `cortexq bench`, wired to the CLI by wiring.
func Command(wiring Wiring) *cli.Command {
	w = wiring
	return withFleet(benchCommand())
}
