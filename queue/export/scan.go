package export

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// group is one archive's worth of tasks, spooled to a file.
type group struct {
	name   string
	tasks  int64
	counts map[string]int64
}

// maxOpenSpools bounds the spool files open at once (a month grouping has hundreds of groups).
const maxOpenSpools = 32

// spools writes each group's spool file, a few open at a time.
type spools struct {
	dir  string
	open map[string]*spoolFile
}

type spoolFile struct {
	f *os.File
	w *bufio.Writer
}

func (s *spools) path(g string) string { return filepath.Join(s.dir, g+".spool") }

func (s *spools) write(g string, status int16, entry string) error {
	sf := s.open[g]
	if sf == nil {
		if len(s.open) >= maxOpenSpools {
			if err := s.close(); err != nil {
				return err
			}
		}
		f, err := os.OpenFile(s.path(g), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		sf = &spoolFile{f: f, w: bufio.NewWriterSize(f, 16<<10)}
		s.open[g] = sf
	}
	_, err := fmt.Fprintf(sf.w, "%d\t%s\n", status, strconv.Quote(entry))
	return err
}

func (s *spools) close() error {
	var first error
	for g, sf := range s.open {
		err := sf.w.Flush()
		if cerr := sf.f.Close(); err == nil {
			err = cerr
		}
		if err != nil && first == nil {
			first = err
		}
		delete(s.open, g)
	}
	return first
}

// groupOf is the group of a task per the grouping.
func groupOf(by, severity, entry string) string {
	switch by {
	case ByMonth:
		return Month(entry)
	case BySeverity:
		return severity
	}
	return "all"
}

// scan reads the selected tasks a page at a time, in entry order, and spools each group's; it
// returns the groups and the tasks in all.
func scan(ctx context.Context, pool *pgxpool.Pool, src source, req Request, dir string) (map[string]*group, int64, error) {
	q := dbsqlc.New(pool)
	sp := &spools{dir: dir, open: map[string]*spoolFile{}}
	groups := map[string]*group{}
	var total int64
	after := ""
	for {
		rows, err := q.ExportPage(ctx, dbsqlc.ExportPageParams{CorpusID: src.corpusID, ServiceID: src.serviceID,
			After: after, Statuses: src.statuses, MaxRows: int32(req.PageSize)})
		if err != nil {
			_ = sp.close()
			return nil, 0, fmt.Errorf("export: read tasks: %w", err)
		}
		for _, r := range rows {
			sev := src.names[r.Status]
			name := groupOf(req.GroupBy, sev, r.Entry)
			g := groups[name]
			if g == nil {
				g = &group{name: name, counts: map[string]int64{}}
				groups[name] = g
			}
			g.tasks++
			g.counts[sev]++
			total++
			if err := sp.write(name, r.Status, r.Entry); err != nil {
				_ = sp.close()
				return nil, 0, fmt.Errorf("export: spool: %w", err)
			}
		}
		if len(rows) < req.PageSize {
			break
		}
		after = rows[len(rows)-1].Entry
	}
	if err := sp.close(); err != nil {
		return nil, 0, fmt.Errorf("export: spool: %w", err)
	}
	return groups, total, nil
}
