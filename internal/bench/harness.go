package bench

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/base"
	"github.com/cortexq/cortexq/queue/catalog"
)

// sampleArchive returns a source archive whose cortex.log derives NoProblem, with a payload
// member of size bytes, so an echo worker's result of it is a valid NoProblem result; with
// messages, its log is a LaTeXML-shaped one of about that many messages (writeBenchLog), whose
// status benchLogStatus gives.
func sampleArchive(i, size, messages int) ([]byte, error) {
	var buf bytes.Buffer
	buf.Grow(size + 512)
	zw := zip.NewWriter(&buf)
	w, err := zw.CreateHeader(&zip.FileHeader{Name: "cortex.log", Method: zip.Store})
	if err != nil {
		return nil, err
	}
	if err := writeBenchLog(w, i, messages); err != nil {
		return nil, err
	}
	w, err = zw.CreateHeader(&zip.FileHeader{Name: "content.tex", Method: zip.Store})
	if err != nil {
		return nil, err
	}
	line := []byte(fmt.Sprintf("%% sample document %d\n", i))
	for written := 0; written < size; {
		n := min(len(line), size-written)
		if _, err := w.Write(line[:n]); err != nil {
			return nil, err
		}
		written += n
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// StageCorpus writes n sample source archives, one directory each (dir/NNNNNN/source.zip), and
// returns their paths.
func StageCorpus(ctx context.Context, dir string, n, size int) ([]string, error) {
	return stageCorpusLogs(ctx, dir, n, size, 0)
}

// stageCorpusLogs is StageCorpus with logs of about messages messages (sampleArchive).
func stageCorpusLogs(ctx context.Context, dir string, n, size, messages int) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("corpus directory: %w", err)
	}
	entries := make([]string, n)
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0) * 2)
	for i := range n {
		g.Go(func() error {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			d := filepath.Join(dir, fmt.Sprintf("%06d", i))
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
			data, err := sampleArchive(i, size, messages)
			if err != nil {
				return err
			}
			entries[i] = filepath.Join(d, "source.zip")
			return os.WriteFile(entries[i], data, 0o644)
		})
	}
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("stage corpus: %w", err)
	}
	return entries, nil
}

// EnsureService returns the service named name, adding it if missing.
func EnsureService(ctx context.Context, root *base.Base, name string) (catalog.Service, error) {
	svc, err := root.Catalog.Service(ctx, name)
	if errors.Is(err, queue.ErrNotFound) {
		svc, err = root.Catalog.AddService(ctx, name, 0)
		if errors.Is(err, queue.ErrDuplicate) { // added meanwhile by another process
			svc, err = root.Catalog.Service(ctx, name)
		}
	}
	return svc, err
}

// ByteIdentical checks that each entry's result archive (<dir>/<service>.zip) equals its source.
func ByteIdentical(entries []string, service string) (bad int, first error) {
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0) * 2)
	for _, e := range entries {
		g.Go(func() error {
			src, err1 := os.ReadFile(e)
			res, err2 := os.ReadFile(filepath.Join(filepath.Dir(e), service+".zip"))
			if err := errors.Join(err1, err2); err != nil || !bytes.Equal(src, res) {
				mu.Lock()
				defer mu.Unlock()
				bad++
				if first == nil {
					first = fmt.Errorf("%s: result differs from its source (%v)", e, err)
				}
			}
			return nil
		})
	}
	_ = g.Wait()
	return bad, first
}
