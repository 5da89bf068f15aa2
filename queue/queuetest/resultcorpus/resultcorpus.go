// Package resultcorpus stages, for tests and benchmarks, a corpus whose tasks are finished with
// mixed severities and have their result archives on disk: what an export reads.
package resultcorpus

import (
	"archive/zip"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/queuetest/testfactory"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// Statuses the tasks cycle through: no_problem, warning, error, fatal.
var Statuses = []int16{-1, -2, -3, -4}

// Corpus is what Stage made.
type Corpus struct {
	Name, Service, Path string
	CorpusID, ServiceID int32
	Entries             []string
}

// Stage makes corpus name of n tasks of service under dir: entries named by arXiv identifiers
// over several months (one in 20 old-style, one in 50 with no identifier), statuses cycling
// through Statuses, each with a result archive of an HTML file of about htmlBytes and a log.
func Stage(ctx context.Context, t testing.TB, db dbsqlc.DBTX, dir, name, service string, n, htmlBytes int) Corpus {
	t.Helper()
	root := filepath.Join(dir, name)
	c := testfactory.Corpus(ctx, t, db, &testfactory.CorpusOpts{Name: name, Path: root})
	s := testfactory.Service(ctx, t, db, &testfactory.ServiceOpts{Name: service})
	out := Corpus{Name: name, Service: service, Path: root, CorpusID: c.ID, ServiceID: s.ID}
	statuses := make([]int16, n)
	for i := range n {
		id := fmt.Sprintf("%02d%02d.%05d", 18+i%3, 1+i%12, i)
		switch {
		case i%50 == 7:
			id = fmt.Sprintf("paper-%d", i)
		case i%20 == 2:
			id = fmt.Sprintf("math%02d%02d%03d", 95+i%5, 1+i%12, i%1000)
		}
		d := filepath.Join(root, fmt.Sprintf("%06d", i))
		require.NoError(t, os.MkdirAll(d, 0o755))
		entry := filepath.Join(d, id+".zip")
		out.Entries = append(out.Entries, entry)
		statuses[i] = Statuses[i%len(Statuses)]
		writeResult(t, filepath.Join(d, service+".zip"), id, htmlBytes)
	}
	_, err := db.Exec(ctx, `INSERT INTO tasks (service_id, corpus_id, entry, status)
		SELECT $1, $2, e, s FROM unnest($3::text[], $4::smallint[]) AS u(e, s)`, s.ID, c.ID, out.Entries, statuses)
	require.NoError(t, err)
	return out
}

func writeResult(t testing.TB, path, id string, htmlBytes int) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	zw := zip.NewWriter(f)
	w, err := zw.Create(id + ".html")
	require.NoError(t, err)
	// Text of random letters: it compresses about as little as a paper's HTML does.
	rng := rand.New(rand.NewPCG(uint64(len(id)), uint64(htmlBytes)))
	body := make([]byte, htmlBytes)
	for i := range body {
		body[i] = 'a' + byte(rng.IntN(26))
		if i%80 == 79 {
			body[i] = '\n'
		}
	}
	_, err = fmt.Fprintf(w, "<html><body><h1>%s</h1>%s</body></html>\n", id, body)
	require.NoError(t, err)
	w, err = zw.Create("cortex.log")
	require.NoError(t, err)
	_, err = fmt.Fprintf(w, "Status:conversion:%d\n", 0)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	require.NoError(t, f.Close())
}
