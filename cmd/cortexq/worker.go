package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/worker"
	"github.com/cortexq/cortexq/worker/sandbox"
)

func workerCommand() *cli.Command {
	flags := func() []cli.Flag {
		return []cli.Flag{
			&cli.StringFlag{Name: "ventilator", Usage: "the dispatcher's task endpoint; several replicas: comma-separated", Value: worker.VentilatorDefault, EnvVars: envVars("WORKER_VENTILATOR")},
			&cli.StringFlag{Name: "sink", Usage: "the dispatcher's result endpoint; several replicas: comma-separated", Value: worker.SinkDefault, EnvVars: envVars("WORKER_SINK")},
			&cli.BoolFlag{Name: "pair-endpoints", Usage: "with several replicas, take the i-th --ventilator and the i-th --sink as one replica's, so that a result goes back to the replica that handed its task out (lists of equal length); false: results go to the sinks in turn", Value: true, EnvVars: envVars("WORKER_PAIR_ENDPOINTS")},
			&cli.StringFlag{Name: "service", Usage: "the service to work (required)", EnvVars: envVars("WORKER_SERVICE")},
			&cli.IntFlag{Name: "concurrency", Usage: "task loops, each with its own identity (<identity>-NN)", Value: 1, EnvVars: envVars("WORKER_CONCURRENCY")},
			&cli.IntFlag{Name: "count", Usage: "stop after this many tasks (0: run until stopped)", Value: 0, EnvVars: envVars("WORKER_COUNT")},
			&cli.StringFlag{Name: "identity", Usage: "worker identity; empty: <host>:<service>:<pid>", EnvVars: envVars("WORKER_IDENTITY")},
			&cli.DurationFlag{Name: "throttle", Usage: "pause after a 'no work' reply", Value: worker.ThrottleDefault, EnvVars: envVars("WORKER_THROTTLE")},
			&cli.DurationFlag{Name: "grace", Usage: "on SIGTERM or SIGINT, how long the conversions in hand may take to finish and send their results (no new task is asked for); past it, or at a second signal, they are abandoned (each costs its task an attempt)", Value: 10 * time.Minute, EnvVars: envVars("WORKER_GRACE")},
			&cli.DurationFlag{Name: "io-timeout", Usage: "send and receive timeout; the request socket is rebuilt after one", Value: worker.IOTimeoutDefault, EnvVars: envVars("WORKER_IO_TIMEOUT")},
			serverKeyFlag(),
			keyFileFlag(),
		}
	}
	return &cli.Command{
		Name:  "worker",
		Usage: "run CorTeX-protocol workers",
		Subcommands: []*cli.Command{
			{
				Name:   "echo",
				Usage:  "answer every task with its own source archive (for tests and demos)",
				Flags:  flags(),
				Action: func(c *cli.Context) error { return runWorker(c, worker.Echo{}, nil) },
			},
			latexmlWorkerCommand(flags()),
			{
				Name:      "exec",
				Usage:     "turn a converter program into a worker",
				ArgsUsage: "-- CMD [ARG...] (with {in} and {out} for the source and result archive paths)",
				Description: "Each task runs CMD with {in} replaced by the source archive's path and {out} by the path the\n" +
					"result archive must be written to, for example:\n\n" +
					"   cortexq worker exec --service tex_to_html -- convert.sh {in} {out}\n\n" +
					"A non-zero exit, or no archive at {out}, answers the task with an empty result: the dispatcher\n" +
					"retries it and dead-letters it after three attempts. The result archive should hold a\n" +
					"cortex.log whose Status:conversion:N line gives the verdict.",
				Flags: append(append(flags(), &cli.DurationFlag{Name: "timeout", Usage: "kill CMD after this long (0: no limit)", EnvVars: envVars("WORKER_TIMEOUT")}),
					sandboxFlags(sandbox.None, "EXEC", "none: CMD is the operator's own program, whose files the sandbox cannot guess; bwrap: {in} and {out} are mapped into the sandbox, CMD's files outside /usr need --sandbox-ro")...),
				Action: func(c *cli.Context) error {
					argv := c.Args().Slice()
					if len(argv) == 0 {
						return usagef(c, "no command given: cortexq worker exec [flags] -- CMD {in} {out}")
					}
					if !strings.Contains(strings.Join(argv, " "), "{out}") {
						return usagef(c, "the command must name {out}, where it writes the result archive")
					}
					if _, err := exec.LookPath(argv[0]); err != nil {
						return usagef(c, "command %q: %v", argv[0], err)
					}
					sb, err := openSandbox(c)
					if err != nil {
						return err
					}
					return runWorker(c, worker.HandlerFunc(sb.Command(argv, c.Duration("timeout"))), sb)
				},
			},
		},
	}
}

func runWorker(c *cli.Context, h worker.Handler, sb *sandbox.Sandbox) error {
	tuneGC()
	if err := required(c, "service"); err != nil {
		return err
	}
	if c.Int("concurrency") < 1 {
		return usagef(c, "--concurrency must be at least 1")
	}
	stats := &worker.Stats{}
	curve, err := workerCurve(c)
	if err != nil {
		return err
	}
	ctx, stopping, release := warmShutdown(c.Context, c.Duration("grace"))
	defer release()
	err = worker.Run(ctx, worker.Config{Stopping: stopping,
		Ventilator: c.String("ventilator"), Sink: c.String("sink"), AnySink: !c.Bool("pair-endpoints"), Service: c.String("service"), Curve: curve,
		Identity: c.String("identity"), Concurrency: c.Int("concurrency"), Count: c.Int("count"),
		Throttle: c.Duration("throttle"), IOTimeout: c.Duration("io-timeout"),
		Logger: slog.Default(), Stats: stats, Sandbox: sandboxLine(sb),
	}, h)
	slog.Info("worker stopped", "tasks", stats.Tasks.Load(), "failed", stats.Failed.Load(), "no_work_replies", stats.Mocks.Load())
	return err
}

// sandboxFlags are the flags of a worker's sandbox, def the default --sandbox and why the reason.
func sandboxFlags(def sandbox.Mode, env, why string) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "sandbox", Value: string(def), EnvVars: envVars(env + "_SANDBOX"),
			Usage: "bwrap: run each conversion in a bubblewrap sandbox (no network, no host files beyond the system's programs, uid 65534, the limits below; the worker refuses to start if it cannot); none: unconfined (" + why + "); docs/security.md"},
		&cli.StringFlag{Name: "sandbox-bwrap", Value: "bwrap", Usage: "the bwrap program (Debian and Ubuntu: apt-get install bubblewrap)", EnvVars: envVars(env + "_SANDBOX_BWRAP")},
		&cli.StringSliceFlag{Name: "sandbox-ro", Usage: "a host path the sandbox may read, at the same path (repeat for more)", EnvVars: envVars(env + "_SANDBOX_RO")},
		&cli.Int64Flag{Name: "sandbox-memory", Value: sandbox.MemoryDefault, Usage: "bytes of address space per process (RLIMIT_AS); past it: Fatal sandbox:memory_limit", EnvVars: envVars(env + "_SANDBOX_MEMORY")},
		&cli.DurationFlag{Name: "sandbox-cpu", Value: sandbox.CPUDefault, Usage: "CPU time per process (RLIMIT_CPU); past it: Fatal sandbox:cpu_limit", EnvVars: envVars(env + "_SANDBOX_CPU")},
		&cli.Int64Flag{Name: "sandbox-processes", Value: sandbox.ProcessesDefault, Usage: "processes and threads of one conversion (RLIMIT_NPROC)", EnvVars: envVars(env + "_SANDBOX_PROCESSES")},
		&cli.Int64Flag{Name: "sandbox-open-files", Value: sandbox.OpenFilesDefault, Usage: "open files per process (RLIMIT_NOFILE)", EnvVars: envVars(env + "_SANDBOX_OPEN_FILES")},
		&cli.Int64Flag{Name: "sandbox-file-size", Value: sandbox.FileSizeDefault, Usage: "bytes of the largest file a process may write (RLIMIT_FSIZE); past it: Fatal sandbox:file_size_limit", EnvVars: envVars(env + "_SANDBOX_FILE_SIZE")},
		&cli.Int64Flag{Name: "sandbox-scratch", Value: sandbox.ScratchDefault, Usage: "bytes of the sandbox's private /tmp (memory: a tmpfs), all it can write, its output included; full: Fatal sandbox:scratch_limit", EnvVars: envVars(env + "_SANDBOX_SCRATCH")},
	}
}

// openSandbox makes the sandbox the flags ask for, probing bwrap; with --sandbox=none it warns.
func openSandbox(c *cli.Context) (*sandbox.Sandbox, error) {
	mode, err := sandbox.ParseMode(c.String("sandbox"))
	if err != nil {
		return nil, usagef(c, "--sandbox: %v", err)
	}
	for _, name := range []string{"sandbox-memory", "sandbox-processes", "sandbox-open-files", "sandbox-file-size", "sandbox-scratch"} {
		if c.Int64(name) <= 0 {
			return nil, usagef(c, "--%s %d: want a positive number", name, c.Int64(name))
		}
	}
	if c.Duration("sandbox-cpu") < time.Second {
		return nil, usagef(c, "--sandbox-cpu %s: want at least 1s", c.Duration("sandbox-cpu"))
	}
	sb, err := sandbox.New(c.Context, sandbox.Config{
		Mode: mode, Bwrap: c.String("sandbox-bwrap"), ReadOnly: c.StringSlice("sandbox-ro"),
		Limits: sandbox.Limits{
			MemoryBytes: c.Int64("sandbox-memory"), CPU: c.Duration("sandbox-cpu"), Processes: c.Int64("sandbox-processes"),
			OpenFiles: c.Int64("sandbox-open-files"), FileBytes: c.Int64("sandbox-file-size"), ScratchBytes: c.Int64("sandbox-scratch"),
		},
	})
	if err != nil {
		hint := `docs/security.md, "Conversions", says what bwrap needs`
		if inContainer() {
			hint = `in a container, bwrap needs --security-opt seccomp=unconfined, apparmor=unconfined and systempaths=unconfined ` +
				`(docker-compose.yml's worker-latexml has them; docs/security.md, "Conversions in a container")`
		}
		return nil, fmt.Errorf("%w; conversions cannot be sandboxed here: %s; "+
			"to run them unconfined, which is unsafe for papers you do not trust, start the worker with --sandbox=none", err, hint)
	}
	if mode == sandbox.None {
		slog.Warn("conversions run unconfined (--sandbox=none): a hostile source can read and write what this worker can, and reach its network")
	}
	return sb, nil
}

// inContainer reports whether this process seems to run in a container: Docker's /.dockerenv,
// Podman's /run/.containerenv, a container manager's $container, or a container runtime's
// cgroup (cgroup v1).
func inContainer() bool {
	for _, f := range []string{"/.dockerenv", "/run/.containerenv"} {
		if _, err := os.Stat(f); err == nil {
			return true
		}
	}
	if os.Getenv("container") != "" {
		return true
	}
	cg, _ := os.ReadFile("/proc/self/cgroup")
	for _, w := range []string{"/docker", "/kubepods", "/containerd", "/lxc", "/libpod"} {
		if bytes.Contains(cg, []byte(w)) {
			return true
		}
	}
	return false
}

// sandboxLine is the start-up line's sandbox.
func sandboxLine(sb *sandbox.Sandbox) string {
	if sb == nil {
		return ""
	}
	return sb.String()
}

// warmShutdown gives a worker Celery's warm shutdown: the first SIGTERM or SIGINT closes
// stopping (the conversions in hand finish and send their results, no new task is asked for);
// a second signal, or grace after the first, cancels ctx (they are abandoned). The app's own
// context, cancelled at the first signal, is not the one the conversions run under.
func warmShutdown(parent context.Context, grace time.Duration) (ctx context.Context, stopping <-chan struct{}, release func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		select {
		case <-sigs:
		case <-done:
			return
		}
		slog.Info("stopping: finishing the conversions in hand (a second signal abandons them)", "grace", grace)
		close(stop)
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-sigs:
			slog.Warn("second signal: abandoning the conversions in hand")
		case <-t.C:
			slog.Warn("grace period over: abandoning the conversions in hand", "grace", grace)
		case <-done:
		}
		cancel()
	}()
	return ctx, stop, func() { signal.Stop(sigs); close(done); cancel() }
}
