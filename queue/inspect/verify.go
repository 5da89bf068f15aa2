package inspect

import (
	"context"
	"fmt"
	"time"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/sql/dbsqlc"
)

// VerifyTask is what `cortexq verify` compares with the files for one task
// (docs/operations.md, "Backup and restore").
type VerifyTask struct {
	ID         int64
	CorpusID   int32
	ServiceID  int32
	Entry      string
	Status     queue.Status
	Service    string
	CorpusPath string
	SandboxID  int32
	// SourceSize and SourceMtime are the source archive's when imported (nil: not recorded).
	SourceSize  *int64
	SourceMtime *time.Time
	// HasResult is set for a finished task whose result was accepted in its current run: the
	// result archive should be in place, of ResultSize bytes with SHA-256 ResultDigest (nil:
	// not recorded; a ResultSize of -1: no archive kept).
	HasResult    bool
	ResultSize   *int64
	ResultDigest []byte
}

// VerifyTasks reads up to page tasks of scope (zero ids: all) with ids above after, in id order.
func (r *Reader) VerifyTasks(ctx context.Context, scope queue.Scope, after int64, page int) ([]VerifyTask, error) {
	rows, err := dbsqlc.New(r.pool).VerifyTasks(ctx, after, nonZero(scope.CorpusID), nonZero(scope.ServiceID), int32(page))
	if err != nil {
		return nil, fmt.Errorf("read tasks to verify: %w", err)
	}
	out := make([]VerifyTask, len(rows))
	for i, r := range rows {
		out[i] = VerifyTask{ID: r.ID, CorpusID: r.CorpusID, ServiceID: r.ServiceID, Entry: r.Entry,
			Status: queue.Status(r.Status), Service: r.Service, CorpusPath: r.CorpusPath, SandboxID: r.SandboxID,
			SourceSize: r.SourceSize, SourceMtime: r.SourceMtime, HasResult: r.HasResult,
			ResultSize: r.ResultSize, ResultDigest: r.ResultDigest}
	}
	return out, nil
}

func nonZero(id int32) *int32 {
	if id == 0 {
		return nil
	}
	return &id
}

// VerifyCorpus is a corpus (or sandbox) whose files verify walks.
type VerifyCorpus struct {
	ID        int32
	Name      string
	Path      string
	SandboxID int32
}

// VerifyCorpora lists the corpora (corpusID 0: all) with their paths.
func (r *Reader) VerifyCorpora(ctx context.Context, corpusID int32) ([]VerifyCorpus, error) {
	rows, err := dbsqlc.New(r.pool).VerifyCorpora(ctx, nonZero(corpusID))
	if err != nil {
		return nil, fmt.Errorf("list corpora to verify: %w", err)
	}
	out := make([]VerifyCorpus, len(rows))
	for i, c := range rows {
		out[i] = VerifyCorpus{ID: c.ID, Name: c.Name, Path: c.Path, SandboxID: c.SandboxID}
	}
	return out, nil
}

// ResultCandidate is a result archive found on disk, of service ServiceID in corpus CorpusID:
// Entry is a source archive beside it, or "" when there is none (Dir is then its directory).
type ResultCandidate struct {
	CorpusID  int32
	ServiceID int32
	Entry     string
	Dir       string
}

// Accounted reports, for each candidate, whether a task accounts for it: a task of its corpus
// and service with that entry (or, without one, an entry in that directory).
func (r *Reader) Accounted(ctx context.Context, cands []ResultCandidate) ([]bool, error) {
	// Two lists of (index, corpus, service, entry or directory), one per query.
	type list struct {
		idx, corpora, services []int32
		keys                   []string
	}
	var byEntry, byDir list
	for i, c := range cands {
		l, key := &byEntry, c.Entry
		if key == "" {
			l, key = &byDir, c.Dir
		}
		l.idx, l.corpora = append(l.idx, int32(i)), append(l.corpora, c.CorpusID)
		l.services, l.keys = append(l.services, c.ServiceID), append(l.keys, key)
	}
	q := dbsqlc.New(r.pool)
	out := make([]bool, len(cands))
	for _, l := range []*list{&byEntry, &byDir} {
		if len(l.idx) == 0 {
			continue
		}
		var found []int32
		var err error
		if l == &byEntry {
			found, err = q.VerifyAccounted(ctx, l.idx, l.corpora, l.services, l.keys)
		} else {
			found, err = q.VerifyAccountedDirs(ctx, l.idx, l.corpora, l.services, l.keys)
		}
		if err != nil {
			return nil, fmt.Errorf("look up result archives: %w", err)
		}
		for _, i := range found {
			out[i] = true
		}
	}
	return out, nil
}
