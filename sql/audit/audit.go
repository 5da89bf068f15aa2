// Package audit embeds the operator audit queries of this folder, so the binary can run the
// same SQL an operator runs in psql.
package audit

import (
	_ "embed"
	"strings"
)

//go:embed invariants.sql
var invariantsSQL string

// Query is a named audit query.
type Query struct {
	Name string
	// Doc is the comment above the query: the rule it checks.
	Doc string
	SQL string
}

// Invariants returns the invariant queries of invariants.sql: each returns the rows that break
// its rule, so an empty result means the rule holds.
func Invariants() []Query {
	var out []Query
	for _, block := range strings.Split(invariantsSQL, "-- name: ")[1:] {
		name, body, _ := strings.Cut(block, "\n")
		var doc, sql []string
		for _, line := range strings.Split(body, "\n") {
			if rest, ok := strings.CutPrefix(line, "-- "); ok && len(sql) == 0 {
				doc = append(doc, rest)
			} else if strings.TrimSpace(line) != "" {
				sql = append(sql, line)
			}
		}
		out = append(out, Query{
			Name: strings.TrimSpace(name),
			Doc:  strings.Join(doc, " "),
			SQL:  strings.TrimSuffix(strings.TrimSpace(strings.Join(sql, "\n")), ";"),
		})
	}
	return out
}
