package main

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/api"
	"github.com/cortexq/cortexq/queue/inspect"
)

func taskCommand() *cli.Command {
	return &cli.Command{
		Name:  "task",
		Usage: "look at a task",
		Subcommands: []*cli.Command{
			{
				Name:      "show",
				Usage:     "show a task, its dispatch rows, attempts (workers, times, outcomes) and messages",
				ArgsUsage: "ID",
				Flags: []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print the task as GET /api/v1/tasks/ID answers it (its messages: GET /api/v1/tasks/ID/messages)",
					EnvVars: envVars("TASK_JSON")}},
				Action: taskShow,
			},
		},
	}
}

func taskShow(c *cli.Context) error {
	args, err := positional(c)
	if err != nil {
		return err
	}
	if len(args) != 1 {
		return usagef(c, "want one task ID")
	}
	id, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil || id <= 0 {
		return usagef(c, "task ID %q: want a positive number", args[0])
	}
	root, done, err := openBase(c)
	if err != nil {
		return err
	}
	defer done()
	h, err := root.Inspect.TaskHistory(c.Context, id)
	if errors.Is(err, queue.ErrNotFound) {
		return fmt.Errorf("task %d: no such task", id)
	}
	if err != nil {
		return err
	}
	if c.Bool("json") {
		runs, err := root.Reports.Runs(c.Context, queue.Scope{CorpusID: h.CorpusID, ServiceID: h.ServiceID})
		if err != nil {
			return err
		}
		return printJSON(c, api.NewTask(h, runs))
	}
	return printHistory(c.App.Writer, h)
}

// workersText lists the workers of a dispatch row's attempts; a fresh reservation has none yet.
func workersText(workers []string) string {
	if len(workers) == 0 {
		return "-"
	}
	return printable(strings.Join(workers, ","))
}

func printHistory(out io.Writer, h inspect.TaskHistory) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "task\t%d\n", h.ID)
	fmt.Fprintf(w, "corpus\t%s (id %d)\n", printable(h.Corpus), h.CorpusID)
	fmt.Fprintf(w, "service\t%s (id %d)\n", printable(h.Service), h.ServiceID)
	fmt.Fprintf(w, "entry\t%s\n", printable(h.Entry))
	fmt.Fprintf(w, "status\t%s (%d)\n", h.Status, int16(h.Status))
	fmt.Fprintf(w, "run\t%d\n", h.Run)
	if err := w.Flush(); err != nil {
		return err
	}

	fmt.Fprintf(out, "\ndispatch rows (%d)\n", len(h.Rows))
	if len(h.Rows) > 0 {
		w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "RUN\tSTATE\tWORKERS\tRETRIES\tQUEUED\tANSWERED\tDEAD_LETTERED\tFINISHED\tLEASE\tLEASED_AT\tDEADLINE\tFORGET_AT\tREPLICA\tLAST_CAUSE")
		for _, d := range h.Rows {
			finished := "-"
			if d.FinishedAttempt != nil && d.FinishedStatus != nil {
				finished = fmt.Sprintf("attempt %d: %s", *d.FinishedAttempt, *d.FinishedStatus)
			}
			fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%t\t%t\t%t\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
				d.Run, d.State, workersText(d.Workers), d.Retries, d.Queued, d.Answered, d.DeadLettered,
				finished, d.LeaseTimeout, stamp(&d.LeasedAt), stamp(&d.Deadline), stamp(d.ForgetAt), printable(d.Replica),
				printable(messagesText(d.LastCause)))
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}

	fmt.Fprintf(out, "\nattempts (%d)\n", len(h.Attempts))
	if len(h.Attempts) > 0 {
		w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "RUN\tATTEMPT\tWORKER\tREPLICA\tLEASED_AT\tANSWERED_AT\tSECONDS\tOUTCOME\tSTATUS")
		for _, a := range h.Attempts {
			outcome, status, secs := "running", "-", "-"
			if a.Outcome != "" {
				outcome = a.Outcome
			}
			if a.Status != nil {
				status = a.Status.String()
			}
			if a.AnsweredAt != nil {
				secs = strconv.FormatFloat(a.AnsweredAt.Sub(a.LeasedAt).Seconds(), 'f', 3, 64)
			}
			fmt.Fprintf(w, "%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Run, a.Attempt, printable(a.Worker), printable(a.Replica),
				stamp(&a.LeasedAt), stamp(a.AnsweredAt), secs, printable(outcome), status)
		}
		if err := w.Flush(); err != nil {
			return err
		}
		printAttemptStages(out, h.Attempts)
	}

	fmt.Fprintf(out, "\nmessages (%d)\n", len(h.Messages))
	if len(h.Messages) > 0 {
		w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "RUN\tSEVERITY\tCATEGORY\tWHAT\tDETAILS")
		for _, m := range h.Messages {
			fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\n", m.Run, m.Severity, printable(m.Category), printable(m.What), printable(oneLine(m.Details)))
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// stamp formats a database time for the operator: in printZone (UTC, or local with --local), to
// the millisecond, with its zone.
func stamp(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return zoned(*t, "2006-01-02 15:04:05.000")
}

func messagesText(msgs []queue.Message) string {
	if len(msgs) == 0 {
		return "-"
	}
	parts := make([]string, len(msgs))
	for i, m := range msgs {
		parts[i] = fmt.Sprintf("%s:%s:%s", m.Severity, m.Category, m.What)
	}
	return strings.Join(parts, "; ")
}
