package archive

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"path/filepath"
	"strings"
)

// ResultPath is where a task's result archive goes: <entry dir>/<service>.zip, or
// <service>.sandbox-<id>.zip for a sandbox corpus. It is "" for an entry without a directory
// or not beneath base, its corpus's path.
func ResultPath(base, entry, service string, sandbox int32) string {
	entry = strings.TrimRight(entry, " \t\r\n")
	dir := filepath.Dir(entry)
	if entry == "" || dir == "." || dir == "/" || dir == "" {
		return ""
	}
	if _, err := relBeneath(base, entry); err != nil {
		return ""
	}
	name := service + ".zip"
	if sandbox != 0 {
		name = fmt.Sprintf("%s.sandbox-%d.zip", service, sandbox)
	}
	return filepath.Join(dir, name)
}

// IsSource reports whether a file name is a source archive to import: a *.zip that is not a
// result archive (ResultPath's <service>.zip or <service>.sandbox-<id>.zip) of one of services.
func IsSource(name string, services map[string]bool) bool {
	stem, ok := strings.CutSuffix(name, ".zip")
	if !ok || stem == "" {
		return false
	}
	if services[stem] {
		return false
	}
	if i := strings.LastIndex(stem, ".sandbox-"); i > 0 && services[stem[:i]] && isDigits(stem[i+len(".sandbox-"):]) {
		return false
	}
	return true
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// A replica names the files it writes beside a result archive with its file tag, its name and
// an incarnation (random per process):
//
//	.<archive>.tmp-<replica>.<incarnation>-<random>              a result not yet published
//	.<archive>.prev-<replica>.<incarnation>-<task>-<random>      the archive a publish replaced
//
// Both live no longer than the claim that made them, unless the process dies: then nothing
// removes them but Sweep. Names without a tag (.tmp-<random>, .prev-<task>-<random>) are those of
// replicas from before the tag.

// Tag is the tag of a process's temp and backup files: replica, a name-safe form of the
// replica's name, and incarnation, random per process.
type Tag struct{ replica, incarnation string }

// String is the tag as it stands in file names ("" for none).
func (t Tag) String() string {
	if t.replica == "" {
		return ""
	}
	return t.replica + "." + t.incarnation + "-"
}

// NewTag makes the file tag of a new process of the named replica.
func NewTag(replica string) Tag {
	return Tag{replica: tagReplica(replica), incarnation: fmt.Sprintf("%08x", rand.Uint32())}
}

// Incarnation is the random name of the tag's process (SweepConfig.Incarnation).
func (t Tag) Incarnation() string { return t.incarnation }

// tagReplica is the form of a replica's name in file names: letters, digits, '_' and '-' only
// ('.' ends it), at most 40 bytes; a name that needs changing gets a hash of itself appended,
// so that two names do not end up with one tag.
func tagReplica(name string) string {
	safe := strings.Map(func(r rune) rune {
		if r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '_'
	}, name)
	if safe == name && len(name) <= 40 && name != "" {
		return name
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	return fmt.Sprintf("%s_%08x", safe[:min(len(safe), 31)], h.Sum32())
}
