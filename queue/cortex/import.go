package cortex

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Config configures an import.
type Config struct {
	// Corpora names the CorTeX corpora to import (a sandbox brings its parent); empty: every one.
	Corpora []string
	// DryRun counts what would be read, per table, and writes nothing.
	DryRun bool
	// Progress receives a line per step (nil: none).
	Progress io.Writer

	chunking chunking // zero but in tests (export_test.go)
}

// Summary is what an import did.
type Summary struct {
	Services int // conversion services in CorTeX
	Corpora  []CorpusSummary
	Workers  int64 // workers added or brought up to date
	// DryRun holds, for a dry run, the rows each CorTeX table would give, in order.
	DryRun []TableCount
}

// TableCount is the rows a dry run counted in one CorTeX table.
type TableCount struct {
	Table string
	Rows  int64
}

// sourceMemory is what the import's reads on CorTeX's side may use for each sort and hash.
const sourceMemory = `SET LOCAL work_mem = '256MB'`

type importer struct {
	src   pgx.Tx // CorTeX, read only
	dst   *pgxpool.Pool
	shape shape
	reg   *registry
	out   io.Writer
	began time.Time
	last  time.Duration // since began, at the last progress line
	chunking
}

// Import reads the CorTeX database behind src (a connection it may only read) and brings what
// cfg selects into cortexq's database behind dst.
func Import(ctx context.Context, src *pgx.Conn, dst *pgxpool.Pool, cfg Config) (Summary, error) {
	tx, err := src.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return Summary{}, fmt.Errorf("begin a read-only transaction on CorTeX: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // read only: nothing to undo
	// The joins of the reads (tasks with their runtimes, messages with their tasks) hash a
	// corpus's tasks: in PostgreSQL's default 4 MB a million of them spill to disk in batches,
	// every message with them. SET LOCAL changes nothing on CorTeX's side but this transaction.
	if _, err := tx.Exec(ctx, sourceMemory); err != nil {
		return Summary{}, fmt.Errorf("set the memory of the reads on CorTeX: %w", err)
	}
	im := &importer{src: tx, dst: dst, out: cfg.Progress, began: time.Now(), chunking: cfg.chunking}
	if im.shape, err = checkShape(ctx, tx); err != nil {
		return Summary{}, err
	}
	if im.reg, err = readRegistry(ctx, tx, im.shape, cfg.Corpora); err != nil {
		return Summary{}, err
	}
	sum := Summary{Services: len(im.reg.services)}
	if cfg.DryRun {
		sum.DryRun, err = im.count(ctx)
		return sum, err
	}
	if err := im.inDst(ctx, func(dst pgx.Tx) error { return im.reg.write(ctx, dst) }); err != nil {
		return sum, fmt.Errorf("services and corpora: %w", err)
	}
	im.progress("%d services, %d corpora", len(im.reg.services), len(im.reg.corpora))
	for _, c := range im.reg.corpora {
		cs, err := im.importCorpus(ctx, c)
		if err != nil {
			return sum, err
		}
		sum.Corpora = append(sum.Corpora, cs)
	}
	sum.Workers, err = im.importWorkers(ctx)
	return sum, err
}

// inDst runs fn in a transaction on cortexq's database.
func (im *importer) inDst(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, im.dst, fn)
}

// step says that one statement of a phase ended, and how long it took; the progress line of the
// phase follows.
func (im *importer) step(format string, args ...any) {
	now := time.Since(im.began)
	im.progress(format+": %s", append(args, (now-im.last).Round(time.Millisecond))...)
}

func (im *importer) progress(format string, args ...any) {
	im.last = time.Since(im.began)
	if im.out != nil {
		fmt.Fprintf(im.out, "import from CorTeX: "+format+" (%s)\n", append(args, time.Since(im.began).Round(time.Millisecond))...)
	}
}
