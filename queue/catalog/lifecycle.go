package catalog

// The corpus lifecycle (docs/operations.md#corpus-lifecycle): activate a service on a corpus,
// extend a corpus with new entries, deactivate a service on a corpus, delete a corpus or a
// service. Each long operation works in bounded batches, each its own short transaction, takes
// a context and reports its progress through a ProgressFunc, so that it can run as a
// background job; each can be run again after an interruption and finishes the work.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/archive"
	"github.com/cortexq/cortexq/queue/internal/pgtx"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// ProgressFunc hears how far a long operation is: done of total units (total -1: unknown).
type ProgressFunc func(done, total int64)

// LifecycleBatchDefault is how many tasks (or entries) one transaction of a lifecycle
// operation deletes (or adds).
const LifecycleBatchDefault = 5000

// Removal is what a deletion removes (or, previewed, would remove): rows per table, and the
// runs it keeps. Tables lists every table it touches, zero counts included.
type Removal struct {
	Tables map[string]int64
	// RunsClosed are open runs closed with the tallies they end with; RunsDetached are runs
	// kept by name (runs.corpus_name, runs.service_name) after their corpus or service went.
	RunsClosed   int64
	RunsDetached int64
	// Files are the result archives removed (--files).
	Files int
}

// Rows sums the rows of every table.
func (r Removal) Rows() int64 {
	var n int64
	for _, v := range r.Tables {
		n += v
	}
	return n
}

// TableNames lists the tables of r in name order, tasks first.
func (r Removal) TableNames() []string {
	names := make([]string, 0, len(r.Tables))
	for t := range r.Tables {
		if t != "tasks" {
			names = append(names, t)
		}
	}
	slices.Sort(names)
	if _, ok := r.Tables["tasks"]; ok {
		names = append([]string{"tasks"}, names...)
	}
	return names
}

// add adds the counts of a generated row (its JSON fields are table names) to r.
func (r *Removal) add(row any) error {
	b, err := json.Marshal(row)
	if err != nil {
		return err
	}
	var m map[string]int64
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	if r.Tables == nil {
		r.Tables = map[string]int64{}
	}
	for k, v := range m {
		r.Tables[k] += v
	}
	return nil
}

// DeleteOptions tunes a deletion.
type DeleteOptions struct {
	// Files removes the result archives of the deleted tasks (<service>.zip beside each source);
	// sources are never removed.
	Files     bool
	BatchSize int // LifecycleBatchDefault when <= 0
	Progress  ProgressFunc
}

// deletion is the scope of a deletion: a corpus, a service, or both (deactivate).
type deletion struct {
	what                    string
	corpusID, serviceID     int32 // 0: every corpus, or every service
	dropCorpus, dropService bool
}

// LifecycleCorpus is what the lifecycle needs of a corpus.
type LifecycleCorpus struct {
	ID        int32
	Name      string
	Path      string
	Sandboxes int64
}

// lifecycleCorpus finds a corpus that is no sandbox; an unknown one is queue.ErrNotFound.
func (c *Catalog) lifecycleCorpus(ctx context.Context, name string) (LifecycleCorpus, error) {
	row, err := dbsqlc.New(c.pool).LifecycleCorpus(ctx, name)
	if err != nil {
		return LifecycleCorpus{}, pgtx.Wrap("corpus "+name, err)
	}
	if row.Parent != 0 {
		return LifecycleCorpus{}, fmt.Errorf("corpus %s is a sandbox: %w", name, ErrSandbox)
	}
	return LifecycleCorpus{ID: row.ID, Name: name, Path: row.Path, Sandboxes: row.Sandboxes}, nil
}

// ErrSandbox refuses a lifecycle operation on a sandbox (cortexq sandbox delete removes one),
// or the deletion of a corpus that has sandboxes.
var ErrSandbox = errors.New("sandboxes have their own commands (cortexq sandbox)")

// corpusDeletion is the deletion of corpus name.
func (c *Catalog) corpusDeletion(ctx context.Context, name string) (deletion, error) {
	co, err := c.lifecycleCorpus(ctx, name)
	if err != nil {
		return deletion{}, err
	}
	if co.Sandboxes > 0 {
		return deletion{}, fmt.Errorf("corpus %s has %d sandboxes: delete them first (cortexq sandbox delete): %w", name, co.Sandboxes, ErrSandbox)
	}
	return deletion{what: "corpus delete", corpusID: co.ID, dropCorpus: true}, nil
}

// serviceDeletion is the deletion of service name.
func (c *Catalog) serviceDeletion(ctx context.Context, name string) (deletion, error) {
	svc, err := dbsqlc.New(c.pool).ServiceByName(ctx, name)
	if err != nil {
		return deletion{}, pgtx.Wrap("service "+name, err)
	}
	return deletion{what: "service delete", serviceID: svc.ID, dropService: true}, nil
}

// deactivation is the deactivation of service on corpus.
func (c *Catalog) deactivation(ctx context.Context, corpus, service string) (deletion, error) {
	co, err := c.lifecycleCorpus(ctx, corpus)
	if err != nil {
		return deletion{}, err
	}
	svc, err := dbsqlc.New(c.pool).ServiceByName(ctx, service)
	if err != nil {
		return deletion{}, pgtx.Wrap("service "+service, err)
	}
	return deletion{what: "deactivate", corpusID: co.ID, serviceID: svc.ID}, nil
}

// PreviewDeleteCorpus counts what DeleteCorpus would remove.
func (c *Catalog) PreviewDeleteCorpus(ctx context.Context, name string) (Removal, error) {
	d, err := c.corpusDeletion(ctx, name)
	if err != nil {
		return Removal{}, err
	}
	return c.preview(ctx, d)
}

// PreviewDeleteService counts what DeleteService would remove.
func (c *Catalog) PreviewDeleteService(ctx context.Context, name string) (Removal, error) {
	d, err := c.serviceDeletion(ctx, name)
	if err != nil {
		return Removal{}, err
	}
	return c.preview(ctx, d)
}

// PreviewDeactivate counts what Deactivate would remove.
func (c *Catalog) PreviewDeactivate(ctx context.Context, corpus, service string) (Removal, error) {
	d, err := c.deactivation(ctx, corpus, service)
	if err != nil {
		return Removal{}, err
	}
	return c.preview(ctx, d)
}

func (c *Catalog) preview(ctx context.Context, d deletion) (Removal, error) {
	row, err := dbsqlc.New(c.pool).LifecycleCount(ctx, d.corpusID, d.serviceID, d.dropCorpus, d.dropService)
	if err != nil {
		return Removal{}, pgtx.Wrap(d.what+" preview", err)
	}
	var r Removal
	if err := r.add(row); err != nil {
		return r, err
	}
	r.RunsDetached = r.Tables["runs_detached"]
	delete(r.Tables, "runs_detached")
	if d.dropCorpus {
		r.Tables["corpora"] = 1
	}
	if d.dropService {
		r.Tables["services"] = 1
	}
	return r, nil
}

// DeleteCorpus deletes a corpus and every row keyed by it or its tasks; its runs stay, by name,
// with their tallies. A corpus with sandboxes is refused (ErrSandbox).
func (c *Catalog) DeleteCorpus(ctx context.Context, name string, o DeleteOptions) (Removal, error) {
	d, err := c.corpusDeletion(ctx, name)
	if err != nil {
		return Removal{}, err
	}
	r, err := c.remove(ctx, d, o)
	if err == nil {
		c.corpora.Delete(d.corpusID)
	}
	return r, err
}

// DeleteService deletes a service, its tasks in every corpus and every row keyed by it or
// them; its runs stay, by name, with their tallies.
func (c *Catalog) DeleteService(ctx context.Context, name string, o DeleteOptions) (Removal, error) {
	d, err := c.serviceDeletion(ctx, name)
	if err != nil {
		return Removal{}, err
	}
	r, err := c.remove(ctx, d, o)
	if err == nil {
		c.services.Delete(name)
	}
	return r, err
}

// Deactivate deletes the tasks of a service on a corpus (their messages, attempts and report
// rows go with them); the runs stay with their tallies, the open one closed.
func (c *Catalog) Deactivate(ctx context.Context, corpus, service string, o DeleteOptions) (Removal, error) {
	d, err := c.deactivation(ctx, corpus, service)
	if err != nil {
		return Removal{}, err
	}
	return c.remove(ctx, d, o)
}

// remove carries a deletion out: the open runs closed with their tallies, then the tasks a
// batch a transaction, then the rows keyed by the corpus or service, the runs detached and the
// corpus or service row, in one last transaction. The report fold's lock is held by each
// transaction that deletes rows it folds.
func (c *Catalog) remove(ctx context.Context, d deletion, o DeleteOptions) (Removal, error) {
	batch := o.BatchSize
	if batch <= 0 {
		batch = LifecycleBatchDefault
	}
	pre, err := c.preview(ctx, d)
	if err != nil {
		return Removal{}, err
	}
	total := pre.Tables["tasks"]
	r := Removal{Tables: map[string]int64{}}
	q := dbsqlc.New(c.pool)
	if r.RunsClosed, err = q.LifecycleCloseRuns(ctx, d.what, d.corpusID, d.serviceID); err != nil {
		return r, pgtx.Wrap(d.what+": close runs", err)
	}
	var done int64
	for {
		n, files, err := c.removeBatch(ctx, d, batch, &r)
		if err != nil {
			return r, err
		}
		if o.Files {
			r.Files += removeFiles(files)
		}
		done += n
		if o.Progress != nil {
			o.Progress(done, max(total, done))
		}
		if n < int64(batch) {
			break
		}
		if err := ctx.Err(); err != nil {
			return r, err
		}
	}
	return r, c.removeScope(ctx, d, &r)
}

// removeBatch deletes up to batch tasks of d's scope with every row keyed by them, adding the
// counts to r; it returns how many tasks went, and their result archives.
func (c *Catalog) removeBatch(ctx context.Context, d deletion, batch int, r *Removal) (int64, []string, error) {
	var n int64
	var files []string
	var counts dbsqlc.LifecycleDeleteTaskRowsRow
	err := pgtx.Run(ctx, c.pool, pgtx.Options{What: d.what}, func(q *dbsqlc.Queries, _ pgx.Tx, _ time.Time) error {
		files = files[:0]
		if err := q.LifecycleFoldLock(ctx); err != nil {
			return err
		}
		rows, err := q.LifecycleTaskBatch(ctx, d.corpusID, d.serviceID, int32(batch))
		if err != nil || len(rows) == 0 {
			n = 0
			return err
		}
		ids := make([]int64, len(rows))
		for i, t := range rows {
			ids[i] = t.ID
			if p := archive.ResultPath(t.CorpusPath, t.Entry, t.Service, 0); p != "" {
				files = append(files, p)
			}
		}
		if counts, err = q.LifecycleDeleteTaskRows(ctx, ids); err != nil {
			return fmt.Errorf("delete the tasks' rows: %w", err)
		}
		if n, err = q.LifecycleDeleteTasks(ctx, ids); err != nil {
			return fmt.Errorf("delete tasks: %w", err)
		}
		return q.LifecycleForgetChanges(ctx, ids)
	})
	if err != nil {
		return 0, nil, err
	}
	r.Tables["tasks"] += n
	return n, files, r.add(counts)
}

// removeScope deletes the rows keyed by d's corpus or service, detaches its runs and deletes the
// corpus or service row.
func (c *Catalog) removeScope(ctx context.Context, d deletion, r *Removal) error {
	return pgtx.Run(ctx, c.pool, pgtx.Options{What: d.what}, func(q *dbsqlc.Queries, _ pgx.Tx, _ time.Time) error {
		if err := q.LifecycleFoldLock(ctx); err != nil {
			return err
		}
		row, err := q.LifecycleDeleteScopeRows(ctx, d.corpusID, d.serviceID, d.dropCorpus, d.dropService)
		if err != nil {
			return fmt.Errorf("delete rows of the scope: %w", err)
		}
		var n int64
		switch {
		case d.dropCorpus:
			if r.RunsDetached, err = q.LifecycleDetachCorpusRuns(ctx, d.corpusID); err == nil {
				n, err = q.LifecycleDeleteCorpus(ctx, d.corpusID)
				r.Tables["corpora"] = n
			}
		case d.dropService:
			if r.RunsDetached, err = q.LifecycleDetachServiceRuns(ctx, d.serviceID); err == nil {
				n, err = q.LifecycleDeleteService(ctx, d.serviceID)
				r.Tables["services"] = n
			}
		}
		if err != nil {
			return err
		}
		return r.add(row)
	})
}

// removeFiles removes result archives, reporting how many it removed; one missing or that
// cannot be removed is left (verify lists what remains).
func removeFiles(paths []string) int {
	n := 0
	for _, p := range paths {
		if err := os.Remove(p); err == nil {
			n++
		}
	}
	return n
}

// Activation reports what Activate did (or, previewed, would do).
type Activation struct {
	// Entries are the corpus's known entries (an upper bound, an entry known twice counted twice);
	// Added tasks are new, the others had a task of the service already.
	Entries   int64
	Added     int64
	RunOpened bool
}

// PreviewActivate counts the known entries of a corpus that Activate would read.
func (c *Catalog) PreviewActivate(ctx context.Context, corpus, service string) (Activation, error) {
	_, _, sources, err := c.activation(ctx, corpus, service)
	if err != nil {
		return Activation{}, err
	}
	var a Activation
	for _, s := range sources {
		a.Entries += s.Entries
	}
	return a, nil
}

func (c *Catalog) activation(ctx context.Context, corpus, service string) (LifecycleCorpus, Service, []dbsqlc.LifecycleSourcesRow, error) {
	co, err := c.lifecycleCorpus(ctx, corpus)
	if err != nil {
		return co, Service{}, nil, err
	}
	svc, err := c.Service(ctx, service)
	if err != nil {
		return co, svc, nil, err
	}
	sources, err := dbsqlc.New(c.pool).LifecycleSources(ctx, co.ID)
	if err != nil {
		return co, svc, nil, pgtx.Wrap("activate: the corpus's entries", err)
	}
	// The service's own tasks are no source of new ones.
	sources = slices.DeleteFunc(sources, func(s dbsqlc.LifecycleSourcesRow) bool { return s.ServiceID == svc.ID || s.Entries == 0 })
	return co, svc, sources, nil
}

// Activate adds a task of a service for every entry a corpus already knows (its other services'
// tasks and its imported entries), without reading its files: a batch a transaction, in entry
// order, so that running it again after an interruption only adds what is missing. A run is
// opened for the corpus and service if none is open.
func (c *Catalog) Activate(ctx context.Context, corpus, service string, batch int, progress ProgressFunc) (Activation, error) {
	if batch <= 0 {
		batch = LifecycleBatchDefault
	}
	co, svc, sources, err := c.activation(ctx, corpus, service)
	if err != nil {
		return Activation{}, err
	}
	var a Activation
	for _, s := range sources {
		a.Entries += s.Entries
	}
	q := dbsqlc.New(c.pool)
	var done int64
	for _, s := range sources {
		after := ""
		for {
			var last string
			var taken, added int64
			if s.ServiceID == 0 {
				row, err := q.LifecycleActivateFromEntries(ctx, co.ID, after, int32(batch), svc.ID)
				last, taken, added = row.Last, row.Taken, row.Added
				if err != nil {
					return a, pgtx.Wrap("activate", err)
				}
			} else {
				row, err := q.LifecycleActivateFromTasks(ctx, dbsqlc.LifecycleActivateFromTasksParams{CorpusID: co.ID,
					FromService: s.ServiceID, After: after, Batch: int32(batch), ServiceID: svc.ID})
				last, taken, added = row.Last, row.Taken, row.Added
				if err != nil {
					return a, pgtx.Wrap("activate", err)
				}
			}
			done += taken
			a.Added += added
			if progress != nil {
				progress(done, max(a.Entries, done))
			}
			if taken < int64(batch) {
				break
			}
			if err := ctx.Err(); err != nil {
				return a, err
			}
			after = last
		}
	}
	err = pgtx.Run(ctx, c.pool, pgtx.Options{What: "activate: open a run"}, func(q *dbsqlc.Queries, _ pgx.Tx, now time.Time) error {
		opened, err := q.RunOpenIfNone(ctx, co.ID, svc.ID, now, "activate")
		a.RunOpened = opened > 0
		return err
	})
	return a, err
}

// Extension reports what Extend did.
type Extension struct {
	// Services are the corpus's active services (with tasks), which the new entries got a task of.
	Services []string
	// Entries were found under the corpus's path; Added tasks are new (over all services).
	Entries int64
	Added   int64
	Skipped int // files under the path that are no source archive
}

// Extend walks a corpus's path again and adds a task of each of its active services (the
// services with tasks in it) for every source archive found without one: a batch of entries a
// transaction, so that an interruption keeps what was added and running it again adds the rest.
// progress hears the entries found so far (total unknown: -1).
func (c *Catalog) Extend(ctx context.Context, corpus string, batch int, progress ProgressFunc) (Extension, error) {
	if batch <= 0 {
		batch = LifecycleBatchDefault
	}
	co, err := c.lifecycleCorpus(ctx, corpus)
	if err != nil {
		return Extension{}, err
	}
	q := dbsqlc.New(c.pool)
	active, err := q.LifecycleActiveServices(ctx, co.ID)
	if err != nil {
		return Extension{}, pgtx.Wrap("extend: active services", err)
	}
	var ext Extension
	for _, s := range active {
		ext.Services = append(ext.Services, s.Name)
	}
	if len(active) == 0 {
		return ext, fmt.Errorf("extend corpus %s: no service is active on it (cortexq activate): %w", corpus, queue.ErrNotFound)
	}
	if co.Path == "" {
		return ext, fmt.Errorf("extend corpus %s: it has no path to walk", corpus)
	}
	names, err := c.serviceNames(ctx)
	if err != nil {
		return ext, err
	}
	sources, err := archive.OpenSources([]string{co.Path}, "")
	if err != nil {
		return ext, fmt.Errorf("extend corpus %s: %w", corpus, err)
	}
	defer sources.Close()
	if err := sources.Scan(names); err != nil {
		return ext, fmt.Errorf("extend corpus %s: %w", corpus, err)
	}
	entries := make([]string, 0, batch)
	flush := func() error {
		added, err := c.extendBatch(ctx, co.ID, active, entries)
		ext.Added += added
		ext.Entries += int64(len(entries))
		entries = entries[:0]
		if progress != nil {
			progress(ext.Entries, -1)
		}
		return err
	}
	err = sources.Each(corpus, co.Path, func(path string) error {
		entries = append(entries, path)
		if len(entries) < batch {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		return flush()
	})
	if err == nil && len(entries) > 0 {
		err = flush()
	}
	ext.Skipped = sources.Skipped
	return ext, err
}

// extendBatch adds a task of each active service for each entry that has none, in one
// transaction, and opens a run for each service that has none open.
func (c *Catalog) extendBatch(ctx context.Context, corpusID int32, active []dbsqlc.LifecycleActiveServicesRow, entries []string) (int64, error) {
	sizes, mtimes := sourceStats(entries)
	var added int64
	err := pgtx.Run(ctx, c.pool, pgtx.Options{What: "extend"}, func(q *dbsqlc.Queries, _ pgx.Tx, now time.Time) error {
		added = 0
		for _, s := range active {
			n, err := q.TaskImport(ctx, dbsqlc.TaskImportParams{CorpusID: corpusID, ServiceID: s.ID,
				Entries: entries, Sizes: sizes, Mtimes: mtimes})
			if err != nil {
				return fmt.Errorf("insert tasks of %s: %w", s.Name, err)
			}
			added += n
			if _, err := q.RunOpenIfNone(ctx, corpusID, s.ID, now, "extend"); err != nil {
				return fmt.Errorf("open run: %w", err)
			}
		}
		return nil
	})
	return added, err
}

// serviceNames are the names of every service (whose result archives a walk skips).
func (c *Catalog) serviceNames(ctx context.Context) (map[string]bool, error) {
	services, err := c.Services(ctx)
	if err != nil {
		return nil, err
	}
	names := make(map[string]bool, len(services))
	for _, s := range services {
		names[s.Name] = true
	}
	return names, nil
}

// AuditRow is a row of the audit log (migrations/00035_audit_log.sql) that an action of the
// dashboard or the API appends.
type AuditRow = dbsqlc.AuditLogAppendParams

// Audit appends a row to the audit log.
func (c *Catalog) Audit(ctx context.Context, row AuditRow) error {
	return pgtx.Wrap("append an audit row", dbsqlc.New(c.pool).AuditLogAppend(ctx, row))
}
