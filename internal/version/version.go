// Package version says which cortexq this is: its release (semver, see CHANGELOG.md), the VCS
// revision it was built from, and the schema version it expects (its newest embedded migration).
// docs/operations.md "Upgrades" says how releases and schemas go together.
package version

import (
	"fmt"
	"runtime/debug"

	"github.com/cortexq/cortexq/migrations"
)

// release is this build's release. The release script (scripts/release) sets it, and revision,
// with -ldflags "-X github.com/cortexq/cortexq/internal/version.release=v0.2.0 -X ...revision=<commit>";
// a plain go build says the release its sources were written for.
var release = "v0.2.0"

// revision, when set with -ldflags, wins over the VCS stamp of the build (a build from a
// source tarball has none).
var revision = ""

// Release is this build's release, such as v0.2.0.
func Release() string { return release }

// Revision is the VCS revision this build was made from, with "-dirty" when the tree had
// changes, or "unknown" (go run, go test, a tree without .git).
func Revision() string {
	if revision != "" {
		return revision
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	var rev string
	var dirty bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "unknown"
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}

// Schema is the schema version this build expects: its newest migration.
func Schema() int64 { return migrations.Latest() }

// String is the one line `cortexq version` prints.
func String() string {
	return fmt.Sprintf("cortexq %s (revision %s, schema %d)", Release(), Revision(), Schema())
}
