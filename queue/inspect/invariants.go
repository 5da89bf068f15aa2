package inspect

import (
	"context"
	"fmt"

	"github.com/cortexq/cortexq/queue/internal/pgtx"
	"github.com/cortexq/cortexq/sql/audit"
)

// Violation is a broken invariant: the rule and how many rows break it.
type Violation struct {
	Rule string
	Doc  string
	Rows int64
}

// CheckInvariants runs the invariant queries of sql/audit/invariants.sql and reports the rules
// some rows break; none means the dispatch state is sound.
func (r *Reader) CheckInvariants(ctx context.Context) ([]Violation, error) {
	var out []Violation
	for _, q := range audit.Invariants() {
		var n int64
		if err := r.pool.QueryRow(ctx, "SELECT count(*) FROM ("+q.SQL+") AS violations").Scan(&n); err != nil {
			return nil, pgtx.Wrap("check invariant "+q.Name, err)
		}
		if n > 0 {
			out = append(out, Violation{Rule: q.Name, Doc: q.Doc, Rows: n})
		}
	}
	return out, nil
}

// String says which rule is broken and how often.
func (v Violation) String() string { return fmt.Sprintf("%s: %d rows (%s)", v.Rule, v.Rows, v.Doc) }
