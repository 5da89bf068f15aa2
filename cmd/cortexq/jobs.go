package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/internal/version"
	"github.com/cortexq/cortexq/queue/base"
	"github.com/cortexq/cortexq/queue/jobops"
	"github.com/cortexq/cortexq/queue/jobs"
	"github.com/cortexq/cortexq/queue/replica"
)

func jobsCommand() *cli.Command {
	return &cli.Command{
		Name:  "jobs",
		Usage: "list background jobs (imports, exports, ... enqueued by the dashboard, the API or --detach)",
		Description: "Lists the newest jobs with their state (queued, running, interrupted, completed, failed,\n" +
			"cancelled), progress (done of total, rate, time left) and heartbeat age. A running job writes\n" +
			"its heartbeat every few seconds; one whose heartbeat is older than its timeout (its process died)\n" +
			"is marked interrupted and resumed by a job runner from where it got. Job runners are the\n" +
			"replicas (cortexq serve --job-workers) and cortexq jobs work. docs/operations.md#background-jobs",
		Flags: append([]cli.Flag{
			&cli.BoolFlag{Name: "active", Usage: "only queued, running and interrupted jobs", EnvVars: envVars("JOBS_ACTIVE")},
			&cli.IntFlag{Name: "limit", Usage: "list at most this many (newest first)", Value: 50, EnvVars: envVars("JOBS_LIMIT")},
		}, formatFlags("jobs")...),
		Action: runJobsList,
		Subcommands: []*cli.Command{
			{Name: "show", Usage: "print one job as JSON", ArgsUsage: "ID", Action: runJobsShow},
			{Name: "cancel", Usage: "cancel a job (a running one stops at its next heartbeat)", ArgsUsage: "ID", Action: runJobsCancel},
			{
				Name:  "work",
				Usage: "run a job runner (as a replica does) until interrupted",
				Description: "Works the background jobs on this host (it must see the corpora's files and export\n" +
					"directories as the jobs name them), besides or instead of the replicas' runners.",
				Flags:  []cli.Flag{jobWorkersFlag(2), jobBeatFlag(), &cli.StringFlag{Name: "name", Usage: "this runner's name in the jobs' runner column (default: the host name)", EnvVars: envVars("JOBS_RUNNER_NAME")}},
				Action: runJobsWork,
			},
		},
	}
}

func jobWorkersFlag(def int) cli.Flag {
	return &cli.IntFlag{Name: "job-workers", Usage: "background jobs this process works at once (0: none)", Value: def, EnvVars: envVars("JOB_WORKERS")}
}

func jobBeatFlag() cli.Flag {
	return &cli.DurationFlag{Name: "job-beat", Usage: "how often a running job's heartbeat and progress are written, and stalled jobs swept", Value: 5 * time.Second, EnvVars: envVars("JOB_BEAT")}
}

func detachFlag() cli.Flag {
	return &cli.BoolFlag{Name: "detach", Usage: "enqueue it as a background job, print the job's id and return (see cortexq jobs)", EnvVars: envVars("DETACH")}
}

// jobRunner is a runner of every job kind with --job-workers workers, named name; nil when 0.
func jobRunner(c *cli.Context, root *base.Base, name string, logger *slog.Logger) (replica.Service, error) {
	n := c.Int("job-workers")
	if n < 0 {
		return nil, usagef(c, "--job-workers: want 0 or more")
	}
	if n == 0 {
		return nil, nil
	}
	if c.Duration("job-beat") <= 0 {
		return nil, usagef(c, "--job-beat: want a positive duration")
	}
	r, err := jobs.NewRunner(jobs.Env{Base: root}, jobops.Registry(version.Release()),
		jobs.Config{Workers: n, Beat: c.Duration("job-beat"), Name: name, Logger: newQuietLogger(logger).With("component", "jobs")})
	if err != nil {
		return nil, err
	}
	return r, nil
}

func runJobsWork(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	name := c.String("name")
	if name == "" {
		host, _ := os.Hostname()
		name = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	if c.Int("job-workers") < 1 {
		return usagef(c, "--job-workers: want 1 or more")
	}
	root, done, err := openBase(c)
	if err != nil {
		return err
	}
	defer done()
	logger := slog.Default().With("runner", name)
	r, err := jobRunner(c, root, name, logger)
	if err != nil {
		return err
	}
	if err := r.Start(c.Context); err != nil {
		return err
	}
	logger.Info("working jobs", "workers", c.Int("job-workers"))
	<-c.Context.Done()
	r.Stop()
	logger.Info("stopped")
	return nil
}

// enqueueDetached enqueues a job of kind with args for the CLI and prints its id.
func enqueueDetached(c *cli.Context, root *base.Base, kind string, args any) error {
	raw, err := json.Marshal(args)
	if err != nil {
		return err
	}
	actor := "cli"
	if u, err := user.Current(); err == nil {
		actor = u.Username
	}
	id, err := jobs.Enqueue(c.Context, root.Pool, jobops.Registry(version.Release()),
		jobs.Request{Kind: kind, Args: raw, Actor: actor, Surface: "cli"})
	if err != nil {
		return usagef(c, "%v", err)
	}
	fmt.Fprintf(c.App.Writer, "job %d enqueued (%s); follow it with: cortexq jobs show %d\n", id, kind, id)
	return nil
}

func jobID(c *cli.Context) (int64, error) {
	args, err := positional(c)
	if err != nil {
		return 0, err
	}
	if len(args) != 1 {
		return 0, usagef(c, "want one job ID")
	}
	id, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil || id <= 0 {
		return 0, usagef(c, "job ID %q: want a positive number", args[0])
	}
	return id, nil
}

func runJobsList(c *cli.Context) error {
	root, done, err := openListBase(c)
	if err != nil {
		return err
	}
	defer done()
	list, err := jobs.List(c.Context, root.Pool, c.Bool("active"), c.Int("limit"))
	if err != nil {
		return err
	}
	t := table{Title: "jobs", Header: []string{"id", "kind", "state", "progress", "rate/s", "eta", "heartbeat", "by", "created", "error"}, JSON: list}
	for _, j := range list {
		t.Rows = append(t.Rows, []string{strconv.FormatInt(j.ID, 10), j.Kind, j.State, jobProgress(j),
			fmt.Sprintf("%.0f", j.Rate), eta(j.ETASeconds), heartbeat(j), j.Surface + ":" + j.Actor,
			j.CreatedAt.UTC().Format(time.DateTime), j.Error})
	}
	return t.print(c)
}

func jobProgress(j jobs.Job) string {
	if j.Total > 0 {
		return fmt.Sprintf("%d/%d (%.0f%%)", j.Done, j.Total, 100*float64(j.Done)/float64(j.Total))
	}
	return strconv.FormatInt(j.Done, 10)
}

func eta(secs float64) string {
	if secs <= 0 {
		return "-"
	}
	return (time.Duration(secs) * time.Second).String()
}

func heartbeat(j jobs.Job) string {
	if j.HeartbeatAge == nil {
		return "-"
	}
	return fmt.Sprintf("%.0fs ago", *j.HeartbeatAge)
}

func runJobsShow(c *cli.Context) error {
	id, err := jobID(c)
	if err != nil {
		return err
	}
	root, done, err := openBase(c)
	if err != nil {
		return err
	}
	defer done()
	j, err := jobs.Get(c.Context, root.Pool, id)
	if errors.Is(err, jobs.ErrNotFound) {
		return usagef(c, "%v", err)
	} else if err != nil {
		return err
	}
	enc := json.NewEncoder(c.App.Writer)
	enc.SetIndent("", "  ")
	return enc.Encode(j)
}

func runJobsCancel(c *cli.Context) error {
	id, err := jobID(c)
	if err != nil {
		return err
	}
	root, done, err := openBase(c)
	if err != nil {
		return err
	}
	defer done()
	noteOf(c).Target = "job " + strconv.FormatInt(id, 10)
	state, err := jobs.Cancel(c.Context, root.Pool, id)
	if errors.Is(err, jobs.ErrNotFound) {
		return usagef(c, "%v", err)
	} else if err != nil {
		return err
	}
	if state == "cancelled" {
		fmt.Fprintf(c.App.Writer, "job %d cancelled\n", id)
	} else {
		fmt.Fprintf(c.App.Writer, "job %d: cancel asked for (it is %s; a running job stops at its next heartbeat)\n", id, state)
	}
	return nil
}

// countProgress prints done of total to out every every (0: never), with the rate and the time
// left: a foreground operation's progress line.
type countProgress struct {
	what        string
	out         io.Writer
	began       time.Time
	done, total atomic.Int64
	stopOnce    sync.Once
	stopc       chan struct{}
	wg          sync.WaitGroup
}

func newCountProgress(what string, out io.Writer, every time.Duration) *countProgress {
	p := &countProgress{what: what, out: out, began: time.Now(), stopc: make(chan struct{})}
	if every <= 0 {
		return p
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-p.stopc:
				return
			case <-t.C:
				fmt.Fprintln(p.out, p.line())
			}
		}
	}()
	return p
}

func (p *countProgress) set(done, total int64) { p.done.Store(done); p.total.Store(total) }

func (p *countProgress) line() string {
	done, total := p.done.Load(), p.total.Load()
	rate, left := jobs.Rate(done, total, 0, time.Since(p.began))
	return fmt.Sprintf("%s: %d of %d (%.0f/s, %s left)", p.what, done, total, rate, left.Round(time.Second))
}

func (p *countProgress) stop() {
	p.stopOnce.Do(func() { close(p.stopc) })
	p.wg.Wait()
}
