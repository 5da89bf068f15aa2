package catalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/puzpuzpuz/xsync/v4"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/internal/pgtx"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// Service is a row of services.
type Service struct {
	ID           int32
	Name         string
	LeaseTimeout time.Duration // zero: the replica's default
}

// Catalog is the corpora and services, their fair shares and the import of their tasks. It
// caches the near-static lookups of the hot paths: services by name, and the sandbox
// id and path of corpora. Only answers are cached: a failed lookup is retried next time, and a service
// not found is looked up again (so a service added later is seen without a restart).
type Catalog struct {
	pool     *pgxpool.Pool
	logger   *slog.Logger
	services *xsync.Map[string, Service]
	corpora  *xsync.Map[int32, Corpus]
}

// Corpus is what the hot paths need of a corpus.
type Corpus struct {
	// Path is the directory every entry of the corpus, and every result archive, lies beneath.
	Path string
	// SandboxID is the id a sandbox's result archives are named by (0: an ordinary corpus).
	SandboxID int32
}

// Place is what placing a service's result for a task of a corpus needs: the service by its
// name and the task's corpus (archive.ResultPath).
type Place struct {
	Service Service
	Corpus  Corpus
}

// New returns a Catalog on pool with empty caches; logger (nil: none) hears of what Import
// could not do after its commit.
func New(pool *pgxpool.Pool, logger *slog.Logger) *Catalog {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Catalog{pool: pool, logger: logger.With("component", "catalog"),
		services: xsync.NewMap[string, Service](), corpora: xsync.NewMap[int32, Corpus]()}
}

// Service looks up a service by name. An unknown service is queue.ErrNotFound.
func (c *Catalog) Service(ctx context.Context, name string) (Service, error) {
	if svc, ok := c.services.Load(name); ok {
		return svc, nil
	}
	row, err := dbsqlc.New(c.pool).ServiceByName(ctx, name)
	if err != nil {
		return Service{}, pgtx.Wrap("look up service "+name, err)
	}
	svc := Service{ID: row.ID, Name: row.Name}
	if row.LeaseTimeoutSeconds != nil {
		svc.LeaseTimeout = time.Duration(*row.LeaseTimeoutSeconds) * time.Second
	}
	c.services.Store(name, svc)
	return svc, nil
}

// CachedService reports a service if it is cached, without a database hit.
func (c *Catalog) CachedService(name string) (svc Service, known bool) {
	return c.services.Load(name)
}

// CachedPlace reports the Place of a result of the service named service for a task of
// corpusID if both are cached, without a database hit: the sink's lookup for every result but
// the first few of a service and corpus.
func (c *Catalog) CachedPlace(service string, corpusID int32) (Place, bool) {
	svc, ok := c.services.Load(service)
	if !ok {
		return Place{}, false
	}
	corpus, ok := c.corpora.Load(corpusID)
	return Place{Service: svc, Corpus: corpus}, ok
}

// CorpusPath reports the path of a corpus: the directory its entries must lie beneath. A lookup
// that fails is an error and is not cached.
func (c *Catalog) CorpusPath(ctx context.Context, corpusID int32) (string, error) {
	info, err := c.Corpus(ctx, corpusID)
	return info.Path, err
}

// CorpusPaths lists the distinct paths of all corpora.
func (c *Catalog) CorpusPaths(ctx context.Context) ([]string, error) {
	paths, err := dbsqlc.New(c.pool).CorpusPaths(ctx)
	if err != nil {
		return nil, pgtx.Wrap("list corpus paths", err)
	}
	return paths, nil
}

// Corpus looks up a corpus by id. A lookup that fails is an error and is not cached.
func (c *Catalog) Corpus(ctx context.Context, corpusID int32) (Corpus, error) {
	if info, ok := c.corpora.Load(corpusID); ok {
		return info, nil
	}
	row, err := dbsqlc.New(c.pool).CorpusByID(ctx, corpusID)
	if err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return Corpus{}, fmt.Errorf("corpus %d: %w", corpusID, queue.ErrNotFound)
		}
		return Corpus{}, pgtx.Wrap(fmt.Sprintf("look up corpus %d", corpusID), err)
	}
	info := Corpus{Path: row.Path}
	if row.ParentCorpusID != nil {
		info.SandboxID = row.ID
		if row.ArchiveID != nil { // an imported CorTeX sandbox: its archives keep CorTeX's id
			info.SandboxID = *row.ArchiveID
		}
	}
	c.corpora.Store(corpusID, info)
	return info, nil
}

// CachedSandboxID reports a corpus's sandbox id if it is cached, without a database hit.
func (c *Catalog) CachedSandboxID(corpusID int32) (id int32, known bool) {
	info, known := c.corpora.Load(corpusID)
	return info.SandboxID, known
}

// AddService creates a service. leaseTimeout overrides the replica's default lease for its tasks
// (zero: the default); it is kept in whole seconds, rounded up. A taken name is queue.ErrDuplicate.
func (c *Catalog) AddService(ctx context.Context, name string, leaseTimeout time.Duration) (Service, error) {
	var secs *int32
	if leaseTimeout > 0 {
		n := int32((leaseTimeout + time.Second - 1) / time.Second)
		secs = &n
	}
	row, err := dbsqlc.New(c.pool).ServiceCreate(ctx, name, secs)
	if err != nil {
		return Service{}, pgtx.Wrap("add service "+name, err)
	}
	return serviceOf(row), nil
}

// Services lists the services by name.
func (c *Catalog) Services(ctx context.Context) ([]Service, error) {
	rows, err := dbsqlc.New(c.pool).ServiceList(ctx)
	if err != nil {
		return nil, pgtx.Wrap("list services", err)
	}
	out := make([]Service, len(rows))
	for i, r := range rows {
		out[i] = serviceOf(r)
	}
	return out, nil
}

func serviceOf(row dbsqlc.Service) Service {
	svc := Service{ID: row.ID, Name: row.Name}
	if row.LeaseTimeoutSeconds != nil {
		svc.LeaseTimeout = time.Duration(*row.LeaseTimeoutSeconds) * time.Second
	}
	return svc
}

// LookupScope finds a corpus and a service by name. Either one unknown is queue.ErrNotFound, with
// its name in the message.
func (c *Catalog) LookupScope(ctx context.Context, corpus, service string) (queue.Scope, error) {
	return c.lookupNames(ctx, corpus, service)
}

// CheckNames reports, as queue.ErrNotFound, a corpus or service name that does not exist; an
// empty name is not checked.
func (c *Catalog) CheckNames(ctx context.Context, corpus, service string) error {
	_, err := c.lookupNames(ctx, corpus, service)
	return err
}

// lookupNames finds the ids of a corpus and a service by name; an empty name is left at 0.
func (c *Catalog) lookupNames(ctx context.Context, corpus, service string) (queue.Scope, error) {
	q := dbsqlc.New(c.pool)
	var scope queue.Scope
	if corpus != "" {
		c, err := q.CorpusByName(ctx, corpus)
		if err != nil {
			return queue.Scope{}, pgtx.Wrap("corpus "+corpus, err)
		}
		scope.CorpusID = c.ID
	}
	if service != "" {
		svc, err := q.ServiceByName(ctx, service)
		if err != nil {
			return queue.Scope{}, pgtx.Wrap("service "+service, err)
		}
		scope.ServiceID = svc.ID
	}
	return scope, nil
}

// ImportRequest adds tasks for source archives of one corpus and service.
type ImportRequest struct {
	// Corpus is created, with CorpusPath, if missing.
	Corpus     string
	CorpusPath string
	ServiceID  int32
	// Entries are the source archives' paths, one task each; empty ones are skipped.
	Entries []string
	// Each, if set, streams more entries: it is called in the import's transaction with the
	// path of the corpus (as created, or as found), and calls add for each entry, which writes
	// them a batch at a time, so memory does not grow with their count. Its error (or add's)
	// ends the import with nothing added.
	Each func(corpusPath string, add func(entry string) error) error
	// BatchSize is how many entries go into one statement (ImportBatchDefault when <= 0).
	BatchSize int
	// NoAnalyze leaves the statistics of tasks alone: a caller importing a batch an Import
	// calls AnalyzeTasks once at its end rather than after each batch.
	NoAnalyze bool
}

// ImportBatchDefault is how many entries one insert statement of Import carries.
const ImportBatchDefault = 20000

// ImportSummary reports what an Import did.
type ImportSummary struct {
	CorpusID      int32
	CorpusCreated bool
	// Added tasks are new; Existing entries already had a task (or were repeated in the request).
	Added    int
	Existing int
	// RunOpened is set when no run of the corpus and service was open and one was opened.
	RunOpened bool
}

// Import adds a TODO task for each entry of a corpus and service that has none, in one
// transaction: importing the same entries again adds nothing. The corpus is created if missing,
// and a run is opened for the corpus and service if none is open.
func (c *Catalog) Import(ctx context.Context, req ImportRequest) (ImportSummary, error) {
	batch := req.BatchSize
	if batch <= 0 {
		batch = ImportBatchDefault
	}
	var sum ImportSummary
	err := pgtx.Run(ctx, c.pool, pgtx.Options{What: "import"}, func(q *dbsqlc.Queries, tx pgx.Tx, now time.Time) error {
		sum = ImportSummary{}
		corpus, err := q.CorpusCreateIfMissing(ctx, req.Corpus, req.CorpusPath)
		switch {
		case err == nil:
			sum.CorpusCreated = true
		case errors.Is(err, pgx.ErrNoRows):
			if corpus, err = q.CorpusByName(ctx, req.Corpus); err != nil {
				return fmt.Errorf("look up corpus %s: %w", req.Corpus, err)
			}
		default:
			return fmt.Errorf("create corpus %s: %w", req.Corpus, err)
		}
		sum.CorpusID = corpus.ID
		path, err := q.CorpusLockForImport(ctx, corpus.ID)
		if err != nil {
			return fmt.Errorf("lock corpus %s: %w", req.Corpus, err)
		}
		entries := make([]string, 0, min(batch, max(len(req.Entries), 1024)))
		flush := func() error {
			sizes, mtimes := sourceStats(entries)
			n, err := q.TaskImport(ctx, dbsqlc.TaskImportParams{CorpusID: corpus.ID, ServiceID: req.ServiceID,
				Entries: entries, Sizes: sizes, Mtimes: mtimes})
			if err != nil {
				return fmt.Errorf("insert tasks: %w", err)
			}
			sum.Added += int(n)
			sum.Existing += len(entries) - int(n)
			entries = entries[:0]
			return nil
		}
		add := func(e string) error {
			if e == "" {
				return nil
			}
			entries = append(entries, e)
			if len(entries) == batch {
				return flush()
			}
			return nil
		}
		for _, e := range req.Entries {
			if err := add(e); err != nil {
				return err
			}
		}
		if req.Each != nil {
			if err := req.Each(path, add); err != nil {
				return err
			}
		}
		if len(entries) > 0 {
			if err := flush(); err != nil {
				return err
			}
		}
		opened, err := q.RunOpenIfNone(ctx, corpus.ID, req.ServiceID, now, "import")
		if err != nil {
			return fmt.Errorf("open run: %w", err)
		}
		sum.RunOpened = opened > 0
		return nil
	})
	if err == nil && !req.NoAnalyze && sum.Added >= AnalyzeAfter {
		c.AnalyzeTasks(ctx)
	}
	return sum, err
}

// AnalyzeAfter is how many tasks an import adds before it refreshes the statistics of tasks.
const AnalyzeAfter = 10000

// AnalyzeTasks refreshes the planner's statistics of tasks after an import: fresh statistics
// keep the lease path on the tasks_todo index from the first lease on. A failure is logged only.
func (c *Catalog) AnalyzeTasks(ctx context.Context) {
	if err := dbsqlc.New(c.pool).TasksAnalyze(ctx); err != nil {
		c.logger.Warn("analyze tasks after import", "error", err)
	}
}

// sourceStats is the size and modification time of each source archive, what `cortexq verify`
// compares it with later (docs/operations.md, "Backup and restore"); -1 for one that cannot be
// read now (not recorded).
func sourceStats(entries []string) (sizes []int64, mtimes []time.Time) {
	sizes, mtimes = make([]int64, len(entries)), make([]time.Time, len(entries))
	for i, e := range entries {
		sizes[i] = -1
		if st, err := os.Stat(e); err == nil && st.Mode().IsRegular() {
			sizes[i], mtimes[i] = st.Size(), st.ModTime()
		}
	}
	return sizes, mtimes
}

// CheckCorpusName vets the name of a new corpus or sandbox: 1 to 200 bytes of UTF-8, no
// leading or trailing blanks, no control character.
func CheckCorpusName(name string) error {
	switch {
	case name == "":
		return errors.New("empty name")
	case len(name) > 200:
		return fmt.Errorf("%d bytes, want at most 200", len(name))
	case !utf8.ValidString(name):
		return fmt.Errorf("%q is not valid UTF-8", name)
	case strings.TrimSpace(name) != name:
		return fmt.Errorf("%q begins or ends with blanks", name)
	case strings.ContainsFunc(name, unicode.IsControl):
		return fmt.Errorf("%q has a control character", name)
	}
	return nil
}
