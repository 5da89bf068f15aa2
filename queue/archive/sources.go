package archive

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// Sources are the source archives one import adds: found walking paths (directories or single
// archives), or read from a list file, one path a line (OpenSources).
type Sources struct {
	roots    []string
	list     *os.File
	listName string
	cwd      string
	services map[string]bool
	// What names them in messages: the paths, or the list file.
	What string
	// Dir is the deepest directory holding every entry: the path of a corpus made for them.
	Dir string
	// Total is how many entries there are, known after Scan for a list; -1 for a walk.
	Total int64
	// Skipped is how many *.zip files (result archives) the last pass skipped.
	Skipped int
}

// NoSourcesError is returned when an import's paths or list hold no source archive: most likely a
// wrong path, and creating the corpus would take its name for nothing.
type NoSourcesError struct {
	What    string
	Skipped int
}

func (e *NoSourcesError) Error() string {
	return fmt.Sprintf("no source archives in %s (%d files skipped: not source archives); nothing imported", e.What, e.Skipped)
}

// OpenSources checks the paths to walk (Roots), or opens the list file (list not empty), before
// anything touches the database. Close it when done.
func OpenSources(paths []string, list string) (*Sources, error) {
	cwd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	s := &Sources{cwd: cwd, What: strings.Join(paths, ", "), Total: -1}
	if s.roots, err = Roots(paths); err != nil {
		return nil, err
	}
	s.Dir = RootsDir(s.roots)
	if list != "" {
		if s.list, err = os.Open(list); err != nil {
			return nil, fmt.Errorf("--from-list %s: %w", list, pathErr(err))
		}
		s.listName, s.What = list, list
	}
	return s, nil
}

// Close closes the list file, if any (opened for reading: no error to report).
func (s *Sources) Close() {
	if s.list != nil {
		_ = s.list.Close()
	}
}

// Scan takes the services' names (whose result archives are skipped) and, for a list, reads it a
// first time for Dir and Total; a list with no source archive is a *NoSourcesError.
func (s *Sources) Scan(services map[string]bool) error {
	s.services = services
	if s.list == nil {
		return nil
	}
	var ld ListDir
	n := int64(0)
	skipped, err := ScanList(s.list, s.cwd, services, func(e Entry) error { ld.Add(e); n++; return nil })
	if err != nil {
		return fmt.Errorf("read %s: %w", s.listName, err)
	}
	if n == 0 {
		return &NoSourcesError{What: s.What, Skipped: skipped}
	}
	s.Dir, s.Total = ld.Dir(), n
	return nil
}

// Each calls add with each entry's path, as it is found (a list is read from its start again),
// after checking that it lies beneath the path of the corpus (Beneath); a refusal, or an error
// of add, ends it. Finding no source
// archive is a *NoSourcesError. It fits catalog.ImportRequest's Each.
func (s *Sources) Each(corpus, corpusPath string, add func(path string) error) error {
	beneath := NewBeneath(corpus, corpusPath)
	defer beneath.Close()
	var refused error // a refusal or add's error, rather than the walk's or read's own
	added := 0
	take := func(e Entry) error {
		if refused = beneath.Check(e); refused != nil {
			return refused
		}
		if refused = add(e.Path); refused != nil {
			return refused
		}
		added++
		return nil
	}
	var err error
	if s.list != nil {
		if _, err := s.list.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("--from-list %s: %w (want a file, read twice)", s.listName, err)
		}
		if s.Skipped, err = ScanList(s.list, s.cwd, s.services, take); err != nil && refused == nil {
			err = fmt.Errorf("read %s: %w", s.listName, err)
		}
	} else {
		s.Skipped, err = WalkSources(s.roots, s.services, take)
	}
	if err == nil && added == 0 {
		err = &NoSourcesError{What: s.What, Skipped: s.Skipped}
	}
	return err
}
