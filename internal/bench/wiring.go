// Package bench is the engine of `cortexq bench` and `cortexq demo` (demo.go, demo_latexml.go).
// The bench it stages corpora, runs replicas (`cortexq
// serve` subprocesses) and workers, or a simulated fleet of worker identities (--fleet), and
// reports throughput, latency, CPU and memory, against River's own queue when asked
// (--vs-river). docs/performance.md has its numbers. The staging helpers (StageCorpus,
// EnsureService, ByteIdentical) serve `cortexq demo` and the CLI's tests too. The CLI wires it
// (Command): what it takes from the CLI is in Wiring.
package bench

import (
	"os"
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
	// PoolerFlag names the global flag that says what pooler stands in front of the database
	// (none, session or transaction): the replicas get it, and the bench's own pools follow it.
	PoolerFlag string
	// TuneGC sets the garbage collector as serve's.
	TuneGC func()
	// MetricsMaxAge is how old the metrics a replica's /metrics answers may be.
	MetricsMaxAge time.Duration

	// For the demo: the flags its hints repeat, the service of LaTeXML conversions, and the
	// CLI's progress bar, terminal test and printable form of worker text.
	HomeFlag, PGBinFlag string
	LatexmlService      string
	Bar                 func(done, total int64, width int) string
	IsTerminal          func(f *os.File) bool
	Printable           func(s string) string
}

// wired is the CLI's wiring, set by Command.
var wired Wiring

// Command is `cortexq bench`, wired to the CLI by wiring.
func Command(wiring Wiring) *cli.Command {
	wired = wiring
	return withFleet(benchCommand())
}

// DemoCommand is `cortexq demo`, wired to the CLI by wiring.
func DemoCommand(wiring Wiring) *cli.Command {
	wired = wiring
	return demoCommand()
}
