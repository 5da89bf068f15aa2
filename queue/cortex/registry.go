package cortex

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/cortexq/cortexq/queue/catalog"
)

// builtin are CorTeX's own services, not conversions: init, and import, whose tasks are a
// corpus's entries.
const (
	builtinInit   = "init"
	builtinImport = "import"
)

// serviceName is what cortexq's services table takes (migrations/00001_schema.sql).
var serviceName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.+-]{0,199}$`)

type service struct {
	cortexID     int32
	name         string
	leaseTimeout *int32
	id           int32 // cortexq's, once written
}

type corpus struct {
	cortexID    int32
	name        string
	path        string
	description string
	parent      *int32 // CorTeX id
	selection   *string
	id          int32 // cortexq's, once written
}

// registry is CorTeX's services and the corpora an import takes.
type registry struct {
	services []*service // conversion services
	importID int32      // CorTeX's import service (0: none)
	initID   int32      // CorTeX's init service (0: none)
	corpora  []*corpus  // parents before their sandboxes
}

// readRegistry reads CorTeX's services and corpora and picks the corpora named (every one when
// none is; a sandbox brings its parent), refusing what cortexq cannot hold before anything is
// written.
func readRegistry(ctx context.Context, src pgx.Tx, sh shape, names []string) (*registry, error) {
	r := &registry{}
	if err := r.readServices(ctx, src, sh); err != nil {
		return nil, err
	}
	all, err := readCorpora(ctx, src)
	if err != nil {
		return nil, err
	}
	if r.corpora, err = pick(all, names); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *registry) readServices(ctx context.Context, src pgx.Tx, sh shape) error {
	timeout := "NULL::int"
	if sh.leaseTimeout {
		timeout = "lease_timeout_seconds"
	}
	rows, err := src.Query(ctx, `SELECT id, name::text, `+timeout+` FROM services ORDER BY id`)
	if err != nil {
		return fmt.Errorf("read CorTeX's services: %w", err)
	}
	seen := map[string]bool{}
	for rows.Next() {
		s := &service{}
		if err := rows.Scan(&s.cortexID, &s.name, &s.leaseTimeout); err != nil {
			return fmt.Errorf("read CorTeX's services: %w", err)
		}
		switch {
		case s.name == builtinImport:
			r.importID = s.cortexID
			continue
		case s.name == builtinInit:
			r.initID = s.cortexID
			continue
		case !serviceName.MatchString(s.name):
			return fmt.Errorf("CorTeX service %q: cortexq's service names are letters, digits and _.+- (200 at most)", s.name)
		case seen[s.name]:
			return fmt.Errorf("CorTeX service %q comes in several versions: cortexq keeps one service a name", s.name)
		}
		if s.leaseTimeout != nil && *s.leaseTimeout <= 0 {
			s.leaseTimeout = nil
		}
		seen[s.name] = true
		r.services = append(r.services, s)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read CorTeX's services: %w", err)
	}
	return nil
}

func readCorpora(ctx context.Context, src pgx.Tx) ([]*corpus, error) {
	rows, err := src.Query(ctx, `SELECT id, name::text, path::text, coalesce(description, ''), parent_corpus_id, selection::text
		FROM corpora ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("read CorTeX's corpora: %w", err)
	}
	var all []*corpus
	for rows.Next() {
		c := &corpus{}
		if err := rows.Scan(&c.cortexID, &c.name, &c.path, &c.description, &c.parent, &c.selection); err != nil {
			return nil, fmt.Errorf("read CorTeX's corpora: %w", err)
		}
		if err := catalog.CheckCorpusName(c.name); err != nil {
			return nil, fmt.Errorf("CorTeX corpus %d: %w", c.cortexID, err)
		}
		if c.path = strings.TrimSpace(c.path); !filepath.IsAbs(c.path) {
			return nil, fmt.Errorf("CorTeX corpus %s: path %q is not absolute", c.name, c.path)
		}
		c.path = filepath.Clean(c.path)
		all = append(all, c)
	}
	return all, rows.Err()
}

// pick returns the corpora names name (CorTeX looks names up case-insensitively) with the
// parents of the sandboxes among them, parents first; all of them when names is empty.
func pick(all []*corpus, names []string) ([]*corpus, error) {
	byID := map[int32]*corpus{}
	byName := map[string]*corpus{}
	for _, c := range all {
		byID[c.cortexID], byName[strings.ToLower(c.name)] = c, c
	}
	want := map[int32]bool{}
	for _, n := range names {
		c, ok := byName[strings.ToLower(n)]
		if !ok {
			return nil, fmt.Errorf("--corpus %s: CorTeX has no such corpus", n)
		}
		want[c.cortexID] = true
	}
	var out []*corpus
	for _, c := range all {
		if len(names) > 0 && !want[c.cortexID] && !wantedParent(c, all, want) {
			continue
		}
		if c.parent != nil && byID[*c.parent] == nil {
			return nil, fmt.Errorf("CorTeX sandbox %s: its parent corpus %d is gone", c.name, *c.parent)
		}
		out = append(out, c)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].parent == nil && out[j].parent != nil })
	return out, nil
}

// wantedParent reports whether c is the parent of a wanted sandbox.
func wantedParent(c *corpus, all []*corpus, want map[int32]bool) bool {
	for _, s := range all {
		if want[s.cortexID] && s.parent != nil && *s.parent == c.cortexID {
			return true
		}
	}
	return false
}

// write adds the services and corpora cortexq lacks (by name; those it has are kept as they
// are) and learns cortexq's ids of all of them. An imported sandbox keeps its CorTeX id as the
// id its result archives are named after, and the corpora's ids are moved past every such id,
// so that no sandbox made later takes it.
func (r *registry) write(ctx context.Context, dst pgx.Tx) error {
	for _, s := range r.services {
		if err := dst.QueryRow(ctx, `WITH ins AS (
				INSERT INTO services (name, lease_timeout_seconds) VALUES ($1, $2)
				ON CONFLICT (name) DO NOTHING RETURNING id)
			SELECT id FROM ins UNION ALL SELECT id FROM services WHERE name = $1 LIMIT 1`,
			s.name, s.leaseTimeout).Scan(&s.id); err != nil {
			return fmt.Errorf("add service %s: %w", s.name, err)
		}
	}
	byCortex := map[int32]*corpus{}
	for _, c := range r.corpora {
		var parent, archive *int32
		if c.parent != nil {
			parent, archive = &byCortex[*c.parent].id, &c.cortexID
		}
		if err := dst.QueryRow(ctx, `WITH ins AS (
				INSERT INTO corpora (name, path, description, parent_corpus_id, selection, archive_id)
				VALUES ($1, $2, $3, $4, $5::jsonb, $6)
				ON CONFLICT (name) DO NOTHING RETURNING id)
			SELECT id FROM ins UNION ALL SELECT id FROM corpora WHERE name = $1 LIMIT 1`,
			c.name, c.path, c.description, parent, c.selection, archive).Scan(&c.id); err != nil {
			return fmt.Errorf("add corpus %s: %w", c.name, err)
		}
		byCortex[c.cortexID] = c
	}
	return r.reserveArchiveIDs(ctx, dst)
}

// reserveArchiveIDs moves the corpora's ids past the archive ids, and refuses two sandboxes of
// one path whose archives would have the same names.
func (r *registry) reserveArchiveIDs(ctx context.Context, dst pgx.Tx) error {
	if _, err := dst.Exec(ctx, `SELECT setval(pg_get_serial_sequence('corpora', 'id'),
		greatest((SELECT max(archive_id) FROM corpora), (SELECT max(id) FROM corpora), 1))`); err != nil {
		return fmt.Errorf("move the corpora's ids past the sandboxes' archive ids: %w", err)
	}
	var a, b string
	err := dst.QueryRow(ctx, `SELECT x.name, y.name FROM corpora x JOIN corpora y
		ON x.path = y.path AND x.id < y.id AND coalesce(x.archive_id, x.id) = coalesce(y.archive_id, y.id)
		WHERE x.parent_corpus_id IS NOT NULL AND y.parent_corpus_id IS NOT NULL LIMIT 1`).Scan(&a, &b)
	switch {
	case err == pgx.ErrNoRows:
		return nil
	case err != nil:
		return fmt.Errorf("check the sandboxes' archive ids: %w", err)
	}
	return fmt.Errorf("sandboxes %s and %s would name their result archives alike: delete one first", a, b)
}

// serviceMap is the values of a (cortex_id, service_id) temp table.
func (r *registry) serviceMap() (cortexIDs, ids []int32) {
	for _, s := range r.services {
		cortexIDs, ids = append(cortexIDs, s.cortexID), append(ids, s.id)
	}
	return cortexIDs, ids
}
