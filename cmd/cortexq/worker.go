package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/worker"
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
				Action: func(c *cli.Context) error { return runWorker(c, worker.Echo{}) },
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
				Flags: append(flags(), &cli.DurationFlag{Name: "timeout", Usage: "kill CMD after this long (0: no limit)", EnvVars: envVars("WORKER_TIMEOUT")}),
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
					return runWorker(c, execHandler(argv, c.Duration("timeout")))
				},
			},
		},
	}
}

func runWorker(c *cli.Context, h worker.Handler) error {
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
	err = worker.Run(c.Context, worker.Config{
		Ventilator: c.String("ventilator"), Sink: c.String("sink"), AnySink: !c.Bool("pair-endpoints"), Service: c.String("service"), Curve: curve,
		Identity: c.String("identity"), Concurrency: c.Int("concurrency"), Count: c.Int("count"),
		Throttle: c.Duration("throttle"), IOTimeout: c.Duration("io-timeout"),
		Logger: slog.Default(), Stats: stats,
	}, h)
	slog.Info("worker stopped", "tasks", stats.Tasks.Load(), "failed", stats.Failed.Load(), "no_work_replies", stats.Mocks.Load())
	return err
}

// execHandler runs a converter program per task, with {in} and {out} replaced in argv, killed
// after timeout (0: never).
func execHandler(argv []string, timeout time.Duration) worker.HandlerFunc {
	return func(ctx context.Context, in, out string) error {
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		args := make([]string, len(argv))
		for i, a := range argv {
			args[i] = strings.NewReplacer("{in}", in, "{out}", out).Replace(a)
		}
		cmd := exec.CommandContext(ctx, args[0], args[1:]...)
		output, err := cmd.CombinedOutput()
		if err != nil {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("%s: killed after %s", args[0], timeout)
			}
			return fmt.Errorf("%s: %w: %s", args[0], err, lastLine(string(output)))
		}
		return nil
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}
