package audit

import (
	"strings"
	"testing"
)

func TestInvariantsParse(t *testing.T) {
	qs := Invariants()
	if len(qs) < 6 {
		t.Fatalf("want at least the six rules of the state model (docs/architecture.md), got %d", len(qs))
	}
	seen := map[string]bool{}
	for _, q := range qs {
		if q.Name == "" || seen[q.Name] {
			t.Errorf("query name %q is empty or repeated", q.Name)
		}
		seen[q.Name] = true
		if !strings.HasPrefix(strings.ToUpper(q.SQL), "SELECT") || strings.Contains(q.SQL, ";") {
			t.Errorf("%s: want one SELECT without a semicolon, got %q", q.Name, q.SQL)
		}
		if q.Doc == "" {
			t.Errorf("%s: no rule comment", q.Name)
		}
	}
	if !seen["DispatchedTaskHasOneActiveRow"] || !seen["TaskHasAtMostOneActiveRow"] {
		t.Errorf("the two rules of the issue are missing: %v", seen)
	}
}
