package archive

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"regexp"
	"strings"
	"time"
)

var (
	tmpName  = regexp.MustCompile(`^\..+\.tmp-(?:([A-Za-z0-9_-]+)\.([0-9a-f]+)-)?[0-9a-f]+$`)
	prevName = regexp.MustCompile(`^\..+\.prev-(?:([A-Za-z0-9_-]+)\.([0-9a-f]+)-)?[0-9]+-[0-9a-f]+$`)
)

// parseLeftover reports whether a file name is that of a temp or backup archive, and its tag
// (zero for a name without one).
func parseLeftover(name string) (tag Tag, ok bool) {
	if !strings.HasPrefix(name, ".") {
		return Tag{}, false
	}
	for _, re := range []*regexp.Regexp{tmpName, prevName} {
		if m := re.FindStringSubmatch(name); m != nil {
			return Tag{replica: m[1], incarnation: m[2]}, true
		}
	}
	return Tag{}, false
}

// SweepConfig says which leftover temp and backup archives Sweep removes.
type SweepConfig struct {
	// Replica and Incarnation name this process: the files of Replica's earlier processes
	// (another incarnation) are removed whatever their age, since replica names are unique
	// among live replicas and so no claim can still need them. Empty Replica: none.
	Replica     string
	Incarnation string
	// OrphanAge: the files of any replica (and untagged ones) last modified longer ago than
	// this are removed, for the leftovers of replicas that are gone for good. It must be far
	// above the time any claim takes. 0: none.
	OrphanAge time.Duration
	// MaxEntries bounds the directory entries one Sweep visits (SweepMaxEntriesDefault if 0).
	MaxEntries int
	// Pace bounds the entries visited a second (0: as fast as the disk goes). A replica's
	// start-up sweep is paced: a walk of a large corpus costs seconds of CPU and disk, which a
	// replica restarted again and again would otherwise spend on every start, and leftovers
	// are only garbage (docs/operations-compose.md#leftover-temp-files-after-a-crash).
	Pace int
	// DryRun: count and report, remove nothing.
	DryRun bool
	// NowFunc is the clock (time.Now if nil).
	NowFunc func() time.Time
}

// SweepMaxEntriesDefault is SweepConfig.MaxEntries's default.
const SweepMaxEntriesDefault = 50_000_000

// SweepOrphanAgeDefault is a default for SweepConfig.OrphanAge: a claim takes seconds; a
// replica that keeps a result waiting for a day has long been stopped by its outage budget.
const SweepOrphanAgeDefault = 24 * time.Hour

// SweepStats is what a Sweep did.
type SweepStats struct {
	Visited int      // directory entries looked at
	Removed []string // paths, relative to the corpus, of the files removed (or, DryRun, to remove)
	Failed  int      // files that could not be removed
}

// sweepStep is how many entries a Sweep visits between looks at its context and its pace.
const sweepStep = 256

// pace returns once visited entries since began keep within perSecond (at once when 0), or
// with ctx's error.
func pace(ctx context.Context, began time.Time, visited, perSecond int) error {
	if perSecond <= 0 {
		return ctx.Err()
	}
	wait := time.Until(began.Add(time.Duration(visited) * time.Second / time.Duration(perSecond)))
	if wait <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// errSweepBound is a Sweep that stopped at SweepConfig.MaxEntries.
var errSweepBound = errors.New("stopped at the bound on entries")

// Sweep removes, beneath the directory base (a corpus's path), the temp and backup archives
// that no live claim can need: those of earlier processes of this replica, and those older than
// OrphanAge. It never leaves base (os.Root) and follows no symbolic link. It stops at ctx's end
// or MaxEntries, with what it did so far and an error.
func Sweep(ctx context.Context, base string, cfg SweepConfig) (SweepStats, error) {
	var st SweepStats
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = SweepMaxEntriesDefault
	}
	now := time.Now
	if cfg.NowFunc != nil {
		now = cfg.NowFunc
	}
	own := tagReplica(cfg.Replica)
	root, err := os.OpenRoot(base)
	if err != nil {
		return st, fmt.Errorf("sweep %s: %w", base, err)
	}
	defer root.Close()
	cutoff := now().Add(-cfg.OrphanAge)
	began := time.Now()
	err = fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == "." {
				return err
			}
			return nil // a directory gone or unreadable meanwhile: skip it
		}
		st.Visited++
		if st.Visited > cfg.MaxEntries {
			return errSweepBound
		}
		if st.Visited%sweepStep == 0 {
			if err := pace(ctx, began, st.Visited, cfg.Pace); err != nil {
				return err
			}
		}
		if !d.Type().IsRegular() {
			return nil
		}
		tag, ok := parseLeftover(d.Name())
		if !ok {
			return nil
		}
		remove := cfg.Replica != "" && tag.replica == own && tag.incarnation != cfg.Incarnation
		if !remove && cfg.OrphanAge > 0 {
			info, err := d.Info()
			remove = err == nil && info.ModTime().Before(cutoff)
		}
		if !remove {
			return nil
		}
		if !cfg.DryRun {
			if err := root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				st.Failed++
				return nil
			}
		}
		st.Removed = append(st.Removed, path.Clean(p))
		return nil
	})
	if err != nil {
		return st, fmt.Errorf("sweep %s: %w", base, err)
	}
	return st, nil
}
