package bench

// The stage table the bench and the demo end with (docs/stages.md): where the measured tasks'
// time went, so that the next throughput change starts from numbers.

import (
	"context"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/cortexq/cortexq/queue/base"
	"github.com/cortexq/cortexq/queue/reports"
)

// readStages summarizes the stages of the service's attempts (of corpus, unless 0) answered
// since, and gives the bytes the stages take an attempt, all attempts with stages counted.
func readStages(ctx context.Context, root *base.Base, serviceID, corpus int32, since time.Time) (*reports.StageSummary, float64, error) {
	tasks, truncated, err := root.Reports.StageTasks(ctx, reports.StageScope{ServiceID: serviceID, CorpusID: corpus, Since: since})
	if err != nil {
		return nil, 0, err
	}
	sum := reports.SummarizeStages(tasks)
	sum.Truncated = truncated
	attempts, bytes, err := root.Reports.StageStorage(ctx)
	if err != nil || attempts == 0 {
		return &sum, 0, err
	}
	return &sum, math.Round(float64(bytes)/float64(attempts)*10) / 10, nil
}

// stages reads the measured run's stage table into the report.
func (r *benchRun) stages() error {
	var err error
	r.rep.Stages, r.rep.StageBytesPerTask, err = readStages(r.ctx, r.root, r.svc.ID, 0, r.dbStart)
	return err
}

// printStages writes the stage table after a blank line, with what the stages take a task.
func printStages(w io.Writer, sum *reports.StageSummary, bytesPerTask float64) {
	if sum == nil {
		return
	}
	fmt.Fprintf(w, "\nwhere the time went (docs/stages.md; %.1f bytes of stages a task in the database):\n", bytesPerTask)
	_ = reports.WriteStageTable(w, *sum)
}

// printDemoStages ends a demo with the stage table of its corpus.
func printDemoStages(ctx context.Context, w io.Writer, root *base.Base, serviceID, corpus int32) error {
	sum, bytes, err := readStages(ctx, root, serviceID, corpus, time.Time{})
	if err != nil {
		return err
	}
	printStages(w, sum, bytes)
	return nil
}
