package export

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// Grouping names.
const (
	ByMonth    = "month"
	BySeverity = "severity"
	ByNone     = "none"
)

// ManifestName is the manifest's file name in the output directory.
const ManifestName = "manifest.json"

// Request is an export.
type Request struct {
	Corpus  string `json:"corpus"`
	Service string `json:"service"`
	// Out is the output directory (created if missing).
	Out string `json:"out"`
	// GroupBy is month, severity or none.
	GroupBy string `json:"group_by"`
	// Severities are report severity names (no_problem, warning, error, fatal, invalid).
	Severities []string `json:"severities"`
	// HTML bundles only the HTML files of each result archive instead of the archive.
	HTML bool `json:"html"`
	// Version is cortexq's version, recorded in the manifest.
	Version string `json:"-"`
	// Progress, if set, is told how many tasks are done of how many.
	Progress func(done, total int64) `json:"-"`
	// PageSize is how many tasks one read takes (default 5000).
	PageSize int `json:"-"`
}

// Check validates the request's fields that need no database.
func (r *Request) Check() error {
	switch {
	case r.Corpus == "" || r.Service == "":
		return errors.New("want a corpus and a service")
	case r.Out == "":
		return errors.New("want an output directory")
	case r.GroupBy != ByMonth && r.GroupBy != BySeverity && r.GroupBy != ByNone:
		return fmt.Errorf("group by %q: want month, severity or none", r.GroupBy)
	case len(r.Severities) == 0:
		return fmt.Errorf("want at least one severity (%s)", queue.ReportSeverityNames())
	}
	for i, s := range r.Severities {
		if _, _, ok := queue.ReportSeverity(s); !ok {
			return fmt.Errorf("unknown severity %q (want %s)", s, queue.ReportSeverityNames())
		}
		r.Severities[i] = strings.ToLower(s)
	}
	slices.Sort(r.Severities)
	r.Severities = slices.Compact(r.Severities)
	return nil
}

// Manifest describes an export: what it selected and each archive's counts and digest.
type Manifest struct {
	Corpus     string   `json:"corpus"`
	Service    string   `json:"service"`
	Run        int64    `json:"run"`
	Severities []string `json:"severities"`
	GroupBy    string   `json:"group_by"`
	HTML       bool     `json:"html"`
	Version    string   `json:"cortexq_version"`
	// Counts are the tasks exported per severity, over every archive.
	Counts map[string]int64 `json:"counts"`
	// Missing counts the selected tasks whose result archive was not found (not exported).
	Missing  int64     `json:"missing"`
	Archives []Archive `json:"archives"`
}

// Archive is one ZIP file of an export.
type Archive struct {
	Name  string `json:"name"`
	Group string `json:"group"`
	// Tasks are the tasks of the group, per severity (those found and exported).
	Tasks   int64            `json:"tasks"`
	Counts  map[string]int64 `json:"counts"`
	Missing int64            `json:"missing"`
	Files   int64            `json:"files"`
	Bytes   int64            `json:"bytes"`
	SHA256  string           `json:"sha256"`
}

// Summary is what an export did.
type Summary struct {
	Manifest Manifest `json:"manifest"`
	// Written archives were (re)built; Kept ones were complete already.
	Written int `json:"written"`
	Kept    int `json:"kept"`
	// Bytes is what was written.
	Bytes int64 `json:"bytes"`
}

// source is what the export reads: the corpus and service, their newest run.
type source struct {
	corpusID, serviceID int32
	corpusPath          string
	sandbox             int32
	run                 int64
	statuses            []int16
	names               map[int16]string
}

// Run exports per req.
func Run(ctx context.Context, pool *pgxpool.Pool, req Request) (Summary, error) {
	if err := req.Check(); err != nil {
		return Summary{}, err
	}
	if req.PageSize <= 0 {
		req.PageSize = 5000
	}
	src, err := lookup(ctx, dbsqlc.New(pool), req)
	if err != nil {
		return Summary{}, err
	}
	if err := os.MkdirAll(req.Out, 0o755); err != nil {
		return Summary{}, fmt.Errorf("export: %w", err)
	}
	old, err := readManifest(req.Out)
	if err != nil {
		return Summary{}, err
	}
	if old != nil && (old.Corpus != req.Corpus || old.Service != req.Service || old.GroupBy != req.GroupBy ||
		old.HTML != req.HTML || !slices.Equal(old.Severities, req.Severities)) {
		return Summary{}, fmt.Errorf("export: %s holds another export (%s/%s by %s, severities %v, html %v); choose another --out",
			req.Out, old.Corpus, old.Service, old.GroupBy, old.Severities, old.HTML)
	}
	if err := clearLeftovers(req.Out); err != nil {
		return Summary{}, err
	}
	spool, err := os.MkdirTemp(req.Out, ".spool-")
	if err != nil {
		return Summary{}, fmt.Errorf("export: %w", err)
	}
	defer func() { _ = os.RemoveAll(spool) }()
	groups, total, err := scan(ctx, pool, src, req, spool)
	if err != nil {
		return Summary{}, err
	}
	e := &exporter{req: req, src: src, spool: spool, old: old, total: total}
	return e.write(ctx, groups)
}

// lookup finds the corpus, the service and their newest run.
func lookup(ctx context.Context, q *dbsqlc.Queries, req Request) (source, error) {
	corpus, err := q.CorpusByName(ctx, req.Corpus)
	if errors.Is(err, pgx.ErrNoRows) {
		return source{}, fmt.Errorf("export: no corpus %s", req.Corpus)
	} else if err != nil {
		return source{}, fmt.Errorf("export: corpus %s: %w", req.Corpus, err)
	}
	service, err := q.ServiceByName(ctx, req.Service)
	if errors.Is(err, pgx.ErrNoRows) {
		return source{}, fmt.Errorf("export: no service %s", req.Service)
	} else if err != nil {
		return source{}, fmt.Errorf("export: service %s: %w", req.Service, err)
	}
	src := source{corpusID: corpus.ID, serviceID: service.ID, corpusPath: corpus.Path, names: map[int16]string{}}
	if corpus.ParentCorpusID != nil {
		src.sandbox = corpus.ID
	}
	if src.run, err = q.ExportRun(ctx, corpus.ID, service.ID); err != nil {
		return source{}, fmt.Errorf("export: run: %w", err)
	}
	for _, s := range req.Severities {
		st, _, _ := queue.ReportSeverity(s)
		src.statuses = append(src.statuses, int16(st))
		src.names[int16(st)] = s
	}
	return src, nil
}

func readManifest(dir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("export: read the manifest: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("export: %s is not a manifest (%v); choose another --out", filepath.Join(dir, ManifestName), err)
	}
	return &m, nil
}

// writeManifest writes m aside and renames it over the manifest.
func writeManifest(dir string, m Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "."+ManifestName+".tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("export: write the manifest: %w", err)
	}
	w := bufio.NewWriter(f)
	_, err = w.Write(append(b, '\n'))
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, ManifestName))
	}
	if err != nil {
		return fmt.Errorf("export: write the manifest: %w", err)
	}
	return nil
}

// clearLeftovers removes what an export killed mid-way left in dir: its spool and the archive it
// was writing. One export a directory at a time.
func clearLeftovers(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("export: %w", err)
	}
	for _, e := range ents {
		n := e.Name()
		if (e.IsDir() && strings.HasPrefix(n, ".spool-")) || (!e.IsDir() && strings.HasPrefix(n, ".") && strings.HasSuffix(n, ".tmp")) {
			if err := os.RemoveAll(filepath.Join(dir, n)); err != nil {
				return fmt.Errorf("export: remove a leftover: %w", err)
			}
		}
	}
	return nil
}
