package cortex_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/cortex"
	"github.com/cortexq/cortexq/queue/queuetest"
	"github.com/cortexq/cortexq/queue/queuetest/cortexsite"
)

func TestMain(m *testing.M) { queuetest.Main(m) }

// dump lists what an import writes, by names rather than ids (ids differ between an import that
// was stopped and one that was not), one sorted line a row.
const dump = `SELECT coalesce(string_agg(x, E'\n' ORDER BY x), '') FROM (
	SELECT concat_ws(' ', 'service', name, lease_timeout_seconds) AS x FROM services
	UNION ALL SELECT concat_ws(' ', 'corpus', c.name, c.path, c.description, c.selection::text, p.name, c.archive_id)
		FROM corpora c LEFT JOIN corpora p ON p.id = c.parent_corpus_id
	UNION ALL SELECT concat_ws(' ', 'entry', c.name, e.entry) FROM corpus_entries e JOIN corpora c ON c.id = e.corpus_id
	UNION ALL SELECT concat_ws(' ', 'task', c.name, s.name, t.entry, t.status, t.run, x.cortex_id, x.cortex_status, x.runtime_ms)
		FROM tasks t JOIN corpora c ON c.id = t.corpus_id JOIN services s ON s.id = t.service_id
		LEFT JOIN cortex_tasks x ON x.task_id = t.id
	UNION ALL SELECT concat_ws(' ', 'message', t.entry, s.name, m.run, m.id, m.severity, m.category, m.what, m.details)
		FROM task_messages m JOIN tasks t ON t.id = m.task_id JOIN services s ON s.id = t.service_id
	UNION ALL SELECT concat_ws(' ', 'run', c.name, s.name, r.started_at, r.ended_at, r.tasks, r.todo, r.no_problem,
			r.warning, r.error, r.fatal, r.invalid, r.blocked, r.note, r.owner, x.cortex_id)
		FROM runs r JOIN corpora c ON c.id = r.corpus_id JOIN services s ON s.id = r.service_id
		LEFT JOIN cortex_runs x ON x.run_id = r.id
	UNION ALL SELECT concat_ws(' ', 'status', r.started_at, s.name, t.entry, rs.status)
		FROM run_statuses rs JOIN runs r ON r.id = rs.run_id JOIN tasks t ON t.id = rs.task_id JOIN services s ON s.id = t.service_id
	UNION ALL SELECT concat_ws(' ', 'worker', w.name, s.name, w.first_seen, w.last_request, w.last_result, w.dispatched, w.results)
		FROM workers w JOIN services s ON s.id = w.service_id
) rows`

func dumpOf(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var out string
	require.NoError(t, pool.QueryRow(context.Background(), dump).Scan(&out))
	return out
}

func runImport(ctx context.Context, t *testing.T, site *cortexsite.Site, dst *pgxpool.Pool, cfg cortex.Config) (cortex.Summary, error) {
	t.Helper()
	src, err := pgx.Connect(context.Background(), site.ReaderDSN)
	require.NoError(t, err)
	defer src.Close(context.Background())
	return cortex.Import(ctx, src, dst, cfg)
}

// cancelOn is a progress writer that cancels an import once a line holding mark is written.
type cancelOn struct {
	mu     sync.Mutex
	mark   string
	cancel context.CancelFunc
	buf    bytes.Buffer
}

func (c *cancelOn) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if strings.Contains(string(b), c.mark) {
		c.cancel()
	}
	return c.buf.Write(b)
}

// An import run twice changes nothing the second time; one stopped in the middle of a corpus and
// run again ends as the one that ran through; all of it by a role that may only read CorTeX's
// database.
func TestImportIsIdempotentAndResumable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	site := cortexsite.New(t, "/srv/corpora")

	clean := queuetest.NewPool(t)
	sum, err := runImport(ctx, t, site, clean, cortex.Config{})
	require.NoError(t, err)
	require.Equal(t, 2, sum.Services)
	require.Len(t, sum.Corpora, 3)
	first := dumpOf(t, clean)
	require.Contains(t, first, "entry arXiv /srv/corpora/arxiv/d7/d7.zip\n", "entries trimmed")
	require.NotContains(t, first, "left_over", "messages of unfinished tasks are not carried")
	require.Contains(t, first, "corpus arXiv-errors /srv/corpora/arxiv the errors again {\"severity\": \"error\"} arXiv 2")

	again, err := runImport(ctx, t, site, clean, cortex.Config{})
	require.NoError(t, err)
	for _, c := range again.Corpora {
		require.Zero(t, c.Added+c.Updated+c.Runs+c.Snapshots, "%+v", c)
	}
	require.Equal(t, first, dumpOf(t, clean), "a second import changes nothing")

	stopped := queuetest.NewPool(t)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	progress := &cancelOn{mark: "corpus zbMATH: read", cancel: cancel}
	_, err = runImport(cctx, t, site, stopped, cortex.Config{Progress: progress})
	require.Error(t, err, progress.buf.String())
	require.Contains(t, progress.buf.String(), "corpus arXiv: 5 runs added") // arXiv committed, zbMATH not
	_, err = runImport(ctx, t, site, stopped, cortex.Config{})
	require.NoError(t, err)
	require.Equal(t, first, dumpOf(t, stopped), "stopped and run again = run through")

	// CorTeX goes on (the import ran on a live site): d0 (TODO) ends Error; d1 (TODO) ends too,
	// but cortexq has converted it meanwhile, and its result stands.
	owner, err := pgx.Connect(ctx, site.DSN)
	require.NoError(t, err)
	defer owner.Close(ctx)
	_, err = owner.Exec(ctx, `UPDATE tasks SET status = -3 WHERE service_id = 3 AND corpus_id = 1 AND (entry LIKE '%/d0/d0.zip%' OR entry LIKE '%/d1/d1.zip')`)
	require.NoError(t, err)
	_, err = owner.Exec(ctx, `INSERT INTO log_errors (task_id, category, what, details)
		SELECT id, 'late', 'error', 'after the first import' FROM tasks WHERE service_id = 3 AND corpus_id = 1 AND status = -3 AND entry LIKE '%/d0/d0.zip%'`)
	require.NoError(t, err)
	_, err = clean.Exec(ctx, `UPDATE tasks SET status = -1 WHERE entry LIKE '%/d1/d1.zip' AND service_id = (SELECT id FROM services WHERE name = 'tex_to_html')
		AND corpus_id = (SELECT id FROM corpora WHERE name = 'arXiv')`)
	require.NoError(t, err)
	moved, err := runImport(ctx, t, site, clean, cortex.Config{})
	require.NoError(t, err)
	require.Equal(t, int64(1), moved.Corpora[0].Updated, "%+v", moved.Corpora[0])
	now := dumpOf(t, clean)
	require.Contains(t, now, "task arXiv tex_to_html /srv/corpora/arxiv/d0/d0.zip -3 1")
	require.Contains(t, now, "task arXiv tex_to_html /srv/corpora/arxiv/d1/d1.zip -1 1")
	require.Contains(t, now, "error late error after the first import")
}

// A CorTeX database of another shape is refused, naming what is missing, before anything is
// written; so is a corpus CorTeX does not have.
func TestImportRefusesAnUnknownShape(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	site := cortexsite.New(t, "/srv/corpora")
	dst := queuetest.NewPool(t)
	_, err := runImport(ctx, t, site, dst, cortex.Config{Corpora: []string{"nope"}})
	require.ErrorContains(t, err, "--corpus nope: CorTeX has no such corpus")

	owner, err := pgx.Connect(ctx, site.DSN)
	require.NoError(t, err)
	defer owner.Close(ctx)
	_, err = owner.Exec(ctx, `ALTER TABLE tasks RENAME COLUMN entry TO path; DROP TABLE worker_metadata`)
	require.NoError(t, err)
	_, err = runImport(ctx, t, site, dst, cortex.Config{})
	require.ErrorContains(t, err, "missing column tasks.entry, table worker_metadata")
	require.Equal(t, "", dumpOf(t, dst), "nothing written")
}

// --corpus takes the corpora named (CorTeX's names are case-insensitive) and a sandbox's
// parent; a dry run counts what it would read and writes nothing.
func TestImportSomeCorporaAndDryRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	site := cortexsite.New(t, "/srv/corpora")
	dst := queuetest.NewPool(t)
	dry, err := runImport(ctx, t, site, dst, cortex.Config{Corpora: []string{"ARXIV-errors"}, DryRun: true})
	require.NoError(t, err)
	counts := map[string]int64{}
	for _, c := range dry.DryRun {
		counts[c.Table] = c.Rows
	}
	require.Equal(t, map[string]int64{"services": 2, "corpora": 2, "tasks": 54, "tasks (entries)": 40,
		"log_fatals": 4, "log_errors": 16, "log_warnings": 18, "log_invalids": 4, "log_infos": 54,
		"historical_runs": 6, "historical_tasks": 160, "worker_metadata": 4, "task_runtimes": 34}, counts)
	require.Equal(t, "", dumpOf(t, dst), "a dry run writes nothing")

	sum, err := runImport(ctx, t, site, dst, cortex.Config{Corpora: []string{"ARXIV-errors"}})
	require.NoError(t, err)
	var names []string
	for _, c := range sum.Corpora {
		names = append(names, c.Corpus)
	}
	require.Equal(t, []string{"arXiv", "arXiv-errors"}, names)
}

// Read a range of tasks at a time (as the messages of more than idListMax tasks are), the
// messages end as read at once. A first import builds the search's trigram index after its
// tasks (the first corpus, into an empty database) and adds the next corpora's tasks to it: the
// index is there after both, and a search finds the entries through it.
func TestImportInRanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	site := cortexsite.New(t, "/srv/corpora")
	whole := queuetest.NewPool(t)
	var progress strings.Builder
	_, err := runImport(ctx, t, site, whole, cortex.Config{Progress: &progress})
	require.NoError(t, err)
	require.Contains(t, progress.String(), "corpus arXiv: tasks (1 indexes built after them)")
	require.NotContains(t, progress.String(), "corpus zbMATH: tasks (1 indexes built after them)", "tasks there: no rebuild")

	ranges := queuetest.NewPool(t)
	progress.Reset()
	_, err = runImport(ctx, t, site, ranges, cortex.InRanges(cortex.Config{Progress: &progress}))
	require.NoError(t, err)
	require.Contains(t, progress.String(), "corpus arXiv: messages, part 2 of ")
	require.Equal(t, dumpOf(t, whole), dumpOf(t, ranges), "in ranges = at once")

	for _, pool := range []*pgxpool.Pool{whole, ranges} {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `SET LOCAL enable_seqscan = off`)
		require.NoError(t, err)
		rows, err := tx.Query(ctx, `EXPLAIN (COSTS off) SELECT count(*) FROM task_entries WHERE entry LIKE '%arxiv/d7/%'`)
		require.NoError(t, err)
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		plan := strings.Join(lines, "\n")
		var found, tasks int
		require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM task_entries WHERE entry LIKE '%arxiv/d7/%'`).Scan(&found))
		require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM tasks WHERE entry LIKE '%arxiv/d7/%'`).Scan(&tasks))
		require.NoError(t, tx.Rollback(ctx))
		require.Contains(t, plan, "task_entries_trgm")
		require.Positive(t, found)
		require.Equal(t, tasks, found)
	}
}
