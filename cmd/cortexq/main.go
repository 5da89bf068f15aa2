// Command cortexq dispatches tasks to CorTeX workers, with every piece of dispatch state in
// PostgreSQL. Each command lives in a file of its own that defines a xxxCommand function; add it
// to commands() below. Commands reach the database through openBase (or databaseURL), which
// honours --database-url and falls back to the embedded cluster in --home.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/lmittmann/tint"
	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/internal/bench"
	"github.com/cortexq/cortexq/internal/version"
	"github.com/cortexq/cortexq/migrations"
	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/base"
	"github.com/cortexq/cortexq/queue/pgembed"
	"github.com/cortexq/cortexq/queue/text"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newApp().RunContext(ctx, os.Args)
	stop()
	if err != nil && !errors.Is(err, errHelpShown) {
		fmt.Fprintf(os.Stderr, "cortexq: %s\n", printable(oneLine(err.Error())))
		if hint := poolerHint(err); hint != "" {
			fmt.Fprintf(os.Stderr, "cortexq: %s\n", hint)
		}
		var u usageError
		if errors.As(err, &u) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// engines wires the bench and demo engines (internal/bench) to the CLI.
var engines = bench.Wiring{EnvVars: envVars, Usagef: usagef, DatabaseURL: databaseURL, OpenBase: openBase,
	DatabaseURLFlag: flagDatabaseURL, PoolerFlag: flagPooler, TuneGC: tuneGC, MetricsMaxAge: metricsMaxAge,
	HomeFlag: flagHome, PGBinFlag: flagPGBin, LatexmlService: latexmlService, Bar: bar, IsTerminal: isTerminal, Printable: printable}

// commands lists the app's commands, one file each.
func commands() []*cli.Command {
	return []*cli.Command{
		bench.DemoCommand(engines),
		bench.Command(engines),
		serveCommand(),
		workerCommand(),
		dbCommand(),
		migrateCommand(),
		serviceCommand(),
		importCommand(),
		activateCommand(),
		extendCommand(),
		deactivateCommand(),
		rerunCommand(),
		reportCommand(),
		foldCommand(),
		runsCommand(),
		pruneCommand(),
		diffCommand(),
		sandboxCommand(),
		corpusCommand(),
		pauseCommand(),
		resumeCommand(),
		statusCommand(),
		taskCommand(),
		webCommand(),
		healthcheckCommand(),
		keysCommand(),
		sweepCommand(),
		versionCommand(),
		verifyCommand(),
		whyCommand(),
		auditCommand(),
		tokenCommand(),
	}
}

func newApp() *cli.App {
	app := &cli.App{
		Name:  "cortexq",
		Usage: "dispatch tasks to CorTeX workers, with every piece of dispatch state in PostgreSQL",
		Description: "Without --database-url (or $DATABASE_URL) every command uses the embedded PostgreSQL in --home,\n" +
			"created, migrated and started on first use (see cortexq db --help).\n" +
			"Global options go before the command: cortexq --log-level debug status.\n" +
			"serve, worker, bench and demo run Go's garbage collector with GOGC=400 unless $GOGC is set,\n" +
			"and serve holds its heap to 192 MiB (a soft limit) unless $GOMEMLIMIT is set\n" +
			"(see docs/configuration.md).",
		Flags:                globalFlags(),
		Commands:             commands(),
		Before:               setUp,
		HideHelpCommand:      true,
		EnableBashCompletion: false,
		// Errors are printed once, on one line, by main; nothing exits from inside the app.
		ExitErrHandler: func(*cli.Context, error) {},
		Action:         groupAction,
	}
	setUpVersion(app)
	app.OnUsageError = onUsageError
	var walk func([]*cli.Command, string)
	walk = func(cmds []*cli.Command, prefix string) {
		for _, cmd := range cmds {
			if cmd.OnUsageError == nil {
				cmd.OnUsageError = onUsageError
			}
			if len(cmd.Subcommands) > 0 && cmd.Action == nil {
				cmd.Action = groupAction
			}
			cmd.HideHelpCommand = true
			if cmd.Action != nil && len(cmd.Subcommands) == 0 && cmd.Before == nil {
				cmd.Before = checkTextInput
			}
			if _, ok := auditedCommands[prefix+cmd.Name]; ok && cmd.Action != nil {
				cmd.Action = audited(cmd.Action)
			}
			walk(cmd.Subcommands, prefix+cmd.Name+" ")
		}
	}
	walk(app.Commands, "")
	return app
}

// envVars names a flag's environment variable: CORTEXQ_ and the suffix.
func envVars(suffix string) []string { return []string{"CORTEXQ_" + suffix} }

// Global flags.
const (
	flagDatabaseURL = "database-url"
	flagHome        = "home"
	flagPGBin       = "pg-bin"
	flagLogLevel    = "log-level"
	flagLogFormat   = "log-format"
)

func globalFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{
			Name:    flagDatabaseURL,
			Usage:   "PostgreSQL connection string; empty: the embedded cluster in --home",
			EnvVars: []string{"CORTEXQ_DATABASE_URL", "DATABASE_URL"},
		},
		&cli.StringFlag{
			Name:    flagDatabaseURLFile,
			Usage:   "read the connection string from this file (a Docker or systemd secret; surrounding blanks ignored) instead of --database-url",
			EnvVars: envVars("DATABASE_URL_FILE"),
		},
		poolerFlag(),
		&cli.StringFlag{
			Name:    flagHome,
			Usage:   "directory of the embedded PostgreSQL cluster, used without --database-url",
			Value:   "./.cortexq",
			EnvVars: envVars("HOME"),
		},
		&cli.StringFlag{
			Name:    flagPGBin,
			Usage:   "directory of the PostgreSQL binaries for the embedded cluster; empty: the newest /usr/lib/postgresql/*/bin, pg_config or PATH",
			EnvVars: envVars("PG_BIN"),
		},
		&cli.StringFlag{
			Name:    flagLogLevel,
			Usage:   "log level: debug, info, warn or error",
			Value:   "info",
			EnvVars: envVars("LOG_LEVEL"),
		},
		&cli.BoolFlag{
			Name:    "local",
			Usage:   "print times (and log them) in the local time zone instead of UTC; either way each carries its zone",
			EnvVars: envVars("LOCAL_TIME"),
		},
		&cli.StringFlag{
			Name:    flagLogFormat,
			Usage:   "log format on stderr: text or json",
			Value:   "text",
			EnvVars: envVars("LOG_FORMAT"),
		},
	}
}

// setUp configures slog from the global flags.
func setUp(c *cli.Context) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.String(flagLogLevel))); err != nil {
		return usageError{fmt.Errorf("--log-level %q: want debug, info, warn or error", c.String(flagLogLevel)), "cortexq"}
	}
	if c.Bool("local") {
		printZone = time.Local
	}
	if err := databaseURLFromFile(c); err != nil {
		return err
	}
	var h slog.Handler
	switch c.String(flagLogFormat) {
	case "text":
		h = tint.NewTextHandler(os.Stderr, &tint.Options{Level: level, TimeFormat: time.DateTime + " MST", NoColor: !isTerminal(os.Stderr),
			ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
				if a.Key == slog.TimeKey && len(groups) == 0 && a.Value.Kind() == slog.KindTime {
					a.Value = slog.TimeValue(a.Value.Time().In(printZone))
				}
				return a
			}})
	case "json":
		h = slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level})
	default:
		return usageError{fmt.Errorf("--log-format %q: want text or json", c.String(flagLogFormat)), "cortexq"}
	}
	slog.SetDefault(slog.New(h))
	return nil
}

func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// usageError is a mistake in the command line: reported with a pointer to the help, exit code 2.
type usageError struct {
	err  error
	help string // the command whose --help to read
}

func (e usageError) Error() string { return fmt.Sprintf("%v (see %s --help)", e.err, e.help) }
func (e usageError) Unwrap() error { return e.err }

func onUsageError(c *cli.Context, err error, _ bool) error {
	return usageError{err, helpName(c)}
}

// usagef reports a usage error of the command of c.
func usagef(c *cli.Context, format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...), helpName(c)}
}

// helpName is the full name of c's command, "cortexq import" say.
func helpName(c *cli.Context) string {
	if c.Command != nil && c.Command.HelpName != "" {
		return c.Command.HelpName
	}
	return c.App.Name
}

// groupAction runs for the app or a command group without a subcommand: help, or an error for an
// unknown command.
func groupAction(c *cli.Context) error {
	if c.Args().Present() {
		return usagef(c, "unknown command %q", c.Args().First())
	}
	return cli.ShowSubcommandHelp(c)
}

// positional returns the positional arguments of c's command, applying the flags given after the
// first of them (cli v2 stops parsing flags there): `cortexq service add echo --lease-timeout 90s`.
// Call it first in an action. A -h or --help among them shows the command's help and returns
// errHelpShown.
func positional(c *cli.Context) ([]string, error) {
	var out []string
	args := c.Args().Slice()
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			out = append(out, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			out = append(out, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name == "h" || name == "help" {
			if err := cli.ShowCommandHelp(c.Lineage()[1], c.Command.Name); err != nil {
				return nil, err
			}
			return nil, errHelpShown
		}
		f := lookupFlag(c.Command.Flags, name)
		if f == nil && len(a) == z85KeyLen {
			out = append(out, a) // a Z85 public key may begin with '-'
			continue
		}
		if f == nil {
			return nil, usagef(c, "flag provided but not defined: %s", a)
		}
		if !hasValue {
			if v, ok := f.(interface{ TakesValue() bool }); ok && !v.TakesValue() {
				value = "true"
			} else {
				if i+1 == len(args) {
					return nil, usagef(c, "flag needs an argument: %s", a)
				}
				i++
				value = args[i]
			}
		}
		if err := c.Set(name, value); err != nil {
			return nil, usagef(c, "invalid value %q for flag %s: %v", value, a, err)
		}
	}
	return out, nil
}

// z85KeyLen is the length of a CURVE key in Z85 text.
const z85KeyLen = 40

// errHelpShown ends an action whose help positional printed.
var errHelpShown = errors.New("help shown")

func lookupFlag(flags []cli.Flag, name string) cli.Flag {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	return nil
}

// noArgs is positional for commands that take none.
func noArgs(c *cli.Context) error {
	args, err := positional(c)
	if err == nil && len(args) > 0 {
		err = usagef(c, "unexpected argument %q", args[0])
	}
	return err
}

// required checks that flags are set (cli's Required flags dump the whole help on stdout).
func required(c *cli.Context, names ...string) error {
	for _, n := range names {
		if c.String(n) == "" {
			return usagef(c, "--%s is required", n)
		}
	}
	return nil
}

// printable escapes what a terminal would act on in text from the database or from workers
// (text.Printable, which the web dashboard's pages use too).
func printable(s string) string { return text.Printable(s) }

// oneLine folds a message onto one line: its lines joined with "; ", leaving out lines that
// repeat what is already said (pgx repeats a host's error for each connection attempt).
func oneLine(s string) string {
	var out string
	for _, line := range strings.Split(s, "\n") {
		line = strings.Join(strings.Fields(line), " ")
		switch {
		case line == "" || strings.Contains(out, line):
		case out == "":
			out = line
		case strings.HasSuffix(out, ":"):
			out += " " + line
		default:
			out += "; " + line
		}
	}
	return out
}

// embedded returns the embedded cluster of --home, which creates its database with the migrations.
func embedded(c *cli.Context) (*pgembed.Cluster, error) {
	return pgembed.New(pgembed.Config{
		Dir:       c.String(flagHome),
		BinDir:    c.String(flagPGBin),
		SetupFunc: migrations.Up,
		Logger:    slog.Default(),
	})
}

// readOnlyCommands only read the database: run where no embedded cluster exists (the wrong
// directory, a mistyped --home), they say so instead of creating an empty one and reporting
// that it is empty.
var readOnlyCommands = map[string]bool{
	"status": true, "task show": true, "service list": true, "keys list": true,
	"migrate status": true, "migrate down": true, "db url": true, "db psql": true, "db grant-audit": true, "db grant-replica": true,
	"report": true, "runs": true, "diff": true, "sandbox list": true, "web": true, "audit": true, "token list": true,
}

// databaseURL returns --database-url, or the embedded cluster's, starting it (and creating and
// migrating it on first use, unless the command only reads) if need be.
func databaseURL(c *cli.Context) (string, error) {
	if u := c.String(flagDatabaseURL); u != "" {
		return u, nil
	}
	cl, err := embedded(c)
	if err != nil {
		return "", err
	}
	if name := strings.TrimPrefix(helpName(c), c.App.Name+" "); readOnlyCommands[name] && !cl.Initialized() {
		return "", fmt.Errorf("no embedded PostgreSQL in %s: %q only reads a database, so it does not create one. "+
			"Run it where the cluster is (or give --home, or --database-url); "+
			"\"cortexq db start\" or a command that writes, such as import, creates the cluster", cl.Dir(), "cortexq "+name)
	}
	if _, err := cl.Start(c.Context); err != nil {
		return "", err
	}
	slog.Debug("using the embedded PostgreSQL", "dir", cl.Dir())
	return cl.DSN(), nil
}

// connect opens a pool on the database and checks that it answers. The session settings tune
// asks for are made as --pooler allows (poolerTune).
func connect(c *cli.Context, tune ...func(*pgxpool.Config)) (*pgxpool.Pool, error) {
	dsn, err := databaseURL(c)
	if err != nil {
		return nil, err
	}
	mode, err := pooler(c)
	if err != nil {
		return nil, err
	}
	var wanted map[string]string
	pool, err := connectDSN(c.Context, dsn, append(tune[:len(tune):len(tune)], dropOnReadOnly, poolerTune(dsn, mode, &wanted))...)
	if err != nil {
		return nil, err
	}
	if mode == poolerTransaction {
		warnSettings(c.Context, pool, wanted)
	}
	return pool, nil
}

// connectDSN opens a pool on dsn, its configuration adjusted by each of tune, and checks that
// the database answers.
func connectDSN(ctx context.Context, dsn string, tune ...func(*pgxpool.Config)) (*pgxpool.Pool, error) {
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("database url: %w", err)
	}
	base.TuneNetwork(pcfg) // dead connections found and dropped (docs/operations.md#networks)
	for _, t := range tune {
		t(pcfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to the database: %w", err)
	}
	return pool, nil
}

// checkMigrated refuses a database whose schema is behind this binary (migrations.Check).
func checkMigrated(ctx context.Context, pool *pgxpool.Pool) error {
	err := migrations.Check(ctx, pool, slog.Default())
	if tooOld := (*migrations.TooOldError)(nil); errors.As(err, &tooOld) {
		return fmt.Errorf("%w (this is cortexq %s)", err, version.Release())
	}
	return err
}

// openBase connects and returns the composition root (queue/base) on the database: its rooms,
// and Lease for a command that leases; close closes its pool. Each of tune adjusts the pool's
// configuration first (lease.TunePool for a store that serves workers). A database whose schema
// is behind this binary is refused with the command that fixes it, not met later with
// "relation does not exist".
func openBase(c *cli.Context, tune ...func(*pgxpool.Config)) (root *base.Base, close func(), err error) {
	pool, err := connect(c, tune...)
	if err != nil {
		return nil, nil, err
	}
	if err := checkMigrated(c.Context, pool); err != nil {
		pool.Close()
		return nil, nil, err
	}
	return base.New(pool, nil, slog.Default()), pool.Close, nil
}

// onScope runs fn for the corpus and service named by the required --corpus and --service, on
// the database the commands use.
func onScope(c *cli.Context, fn func(*base.Base, queue.Scope) error) error {
	if err := noArgs(c); err != nil {
		return err
	}
	if err := required(c, flagCorpus, flagService); err != nil {
		return err
	}
	root, done, err := openBase(c)
	if err != nil {
		return err
	}
	defer done()
	scope, err := scopeOf(c, root)
	if err != nil {
		return err
	}
	return fn(root, scope)
}

// scopeOf looks up the corpus and service named by --corpus and --service.
func scopeOf(c *cli.Context, root *base.Base) (queue.Scope, error) {
	return root.Catalog.LookupScope(c.Context, c.String(flagCorpus), c.String(flagService))
}

// Flags shared by commands.
const (
	flagCorpus  = "corpus"
	flagService = "service"
)

func corpusFlag(usage string) cli.Flag {
	return &cli.StringFlag{Name: flagCorpus, Usage: usage, EnvVars: envVars("CORPUS")}
}

func serviceFlag(usage string) cli.Flag {
	return &cli.StringFlag{Name: flagService, Usage: usage, EnvVars: envVars("SERVICE")}
}

// printZone is the zone the CLI prints times in: UTC, or the local one with --local.
var printZone = time.UTC

// zoned formats t in printZone with layout, followed by the zone's name.
func zoned(t time.Time, layout string) string {
	return t.In(printZone).Format(layout + " MST")
}

// flagDatabaseURLFile names the file --database-url is read from.
const flagDatabaseURLFile = "database-url-file"

// databaseURLFromFile sets --database-url from --database-url-file, refusing both at once.
func databaseURLFromFile(c *cli.Context) error {
	path := c.String(flagDatabaseURLFile)
	if path == "" {
		return nil
	}
	if c.String(flagDatabaseURL) != "" {
		return usageError{fmt.Errorf("give --database-url or --database-url-file, not both"), "cortexq"}
	}
	u, err := readSecretFile(path)
	if err != nil {
		return fmt.Errorf("--database-url-file: %w", err)
	}
	return c.Set(flagDatabaseURL, u)
}

// readSecretFile reads a one-value secret file (a connection string, a token): its content
// without surrounding blanks, which must not be empty.
func readSecretFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return v, nil
}
