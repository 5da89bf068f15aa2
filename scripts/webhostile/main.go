// Command webhostile measures what a hostile result costs `cortexq web` (docs/web.md#hostile-results):
// it puts a task whose 7 KB result zip holds a cortex.log of 1,100 lines of 4,000 '<' (each line
// a message) in the database of -dsn, starts `BIN web` on it, sends -n concurrent requests for the
// task's log page, task page and report messages page (a third each), -rounds times, and prints
// the web process's peak RSS (VmHWM) and the largest response.
//
//	go run ./scripts/webhostile -bin ./cortexq -dsn "$(./cortexq --home H db url)"
package main

import (
	"archive/zip"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cortexq/cortexq/queue/catalog"
	"github.com/cortexq/cortexq/queue/cortexlog"
	"github.com/cortexq/cortexq/queue/reports"
)

func main() {
	bin := flag.String("bin", "./cortexq", "the cortexq binary")
	dsn := flag.String("dsn", "", "a migrated database (it gets a corpus \"hostile\")")
	n := flag.Int("n", 60, "concurrent requests")
	rounds := flag.Int("rounds", 3, "rounds of n requests")
	dir := flag.String("dir", "", "corpus directory (default: a temporary one)")
	flag.Parse()
	ctx := context.Background()
	if *dir == "" {
		d, err := os.MkdirTemp("", "webhostile")
		check(err)
		defer os.RemoveAll(d)
		*dir = d
	}
	pool, err := pgxpool.New(ctx, *dsn)
	check(err)
	defer pool.Close()
	id := setup(ctx, pool, *dir)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	addr := ln.Addr().String()
	check(ln.Close())
	cmd := exec.Command(*bin, "--database-url", *dsn, "web", "--listen", addr)
	cmd.Stderr = os.Stderr
	check(cmd.Start())
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
	base := "http://" + addr
	waitAnswering(base + "/")
	paths := []string{fmt.Sprintf("/task/%d/log", id), fmt.Sprintf("/task/%d", id),
		"/report?corpus=hostile&service=tex_to_html&severity=warning&category=latex&what=amp&limit=1000"}
	var mu sync.Mutex
	largest := map[string]int64{}
	codes := map[int]int{}
	start := time.Now()
	for range *rounds {
		var wg sync.WaitGroup
		for i := range *n {
			wg.Go(func() {
				p := paths[i%len(paths)]
				resp, err := http.Get(base + p)
				if err != nil {
					mu.Lock()
					codes[-1]++
					mu.Unlock()
					return
				}
				got, _ := io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				codes[resp.StatusCode]++
				largest[p] = max(largest[p], got)
				mu.Unlock()
			})
		}
		wg.Wait()
	}
	took := time.Since(start)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	check(err)
	hwm := ""
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			hwm = strings.Join(strings.Fields(line)[1:], " ")
		}
	}
	fmt.Printf("%d rounds of %d concurrent requests in %s: statuses %v\n", *rounds, *n, took.Round(time.Millisecond), codes)
	for _, p := range paths {
		fmt.Printf("largest response %-80s %d bytes\n", p, largest[p])
	}
	fmt.Printf("web peak RSS (VmHWM) %s\n", hwm)
}

// setup makes corpus "hostile" of one Warning task whose result archive holds the hostile log and
// whose messages are that log's, as a claim would store them.
func setup(ctx context.Context, pool *pgxpool.Pool, dir string) int64 {
	cat := catalog.New(pool, nil)
	svc, err := cat.AddService(ctx, "tex_to_html", 0)
	if err != nil {
		sc, err2 := cat.LookupScope(ctx, "hostile", "tex_to_html")
		if err2 == nil {
			var id int64
			check(pool.QueryRow(ctx, `SELECT id FROM tasks WHERE corpus_id = $1`, sc.CorpusID).Scan(&id))
			return id
		}
		check(err)
	}
	entry := filepath.Join(dir, "t", "source.zip")
	check(os.MkdirAll(filepath.Dir(entry), 0o755))
	check(os.WriteFile(entry, zipOf(map[string][]byte{"main.tex": []byte("\\documentclass{article}")}), 0o644))
	_, err = cat.Import(ctx, catalog.ImportRequest{Corpus: "hostile", CorpusPath: dir, ServiceID: svc.ID, Entries: []string{entry}})
	check(err)
	var logb bytes.Buffer
	for range 1100 {
		logb.WriteString("Warning:latex:amp ")
		logb.WriteString(strings.Repeat("<", 4000))
		logb.WriteByte('\n')
	}
	res := zipOf(map[string][]byte{cortexlog.LogName: logb.Bytes()})
	check(os.WriteFile(filepath.Join(dir, "t", "tex_to_html.zip"), res, 0o644))
	rep, err := cortexlog.FromReaderAt(bytes.NewReader(res), int64(len(res)), cortexlog.Options{})
	check(err)
	var id int64
	check(pool.QueryRow(ctx, `SELECT id FROM tasks WHERE entry = $1`, entry).Scan(&id))
	_, err = pool.Exec(ctx, `UPDATE tasks SET status = -2 WHERE id = $1`, id)
	check(err)
	for _, m := range rep.Messages {
		_, err = pool.Exec(ctx, `INSERT INTO task_messages (task_id, run, severity, category, what, details) VALUES ($1, 1, $2, $3, $4, $5)`,
			id, string(m.Severity), m.Category, m.What, m.Details)
		check(err)
	}
	_, err = pool.Exec(ctx, `INSERT INTO report_changes (task_id) VALUES ($1)`, id)
	check(err)
	_, err = reports.New(pool, nil, nil).FoldAll(ctx, 0)
	check(err)
	fmt.Printf("task %d: result archive %d bytes, log %d bytes, %d messages\n", id, len(res), logb.Len(), len(rep.Messages))
	return id
}

func zipOf(files map[string][]byte) []byte {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for name, body := range files {
		w, err := zw.Create(name)
		check(err)
		_, err = w.Write(body)
		check(err)
	}
	check(zw.Close())
	return buf.Bytes()
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

// waitAnswering waits until url answers, for up to 30 s.
func waitAnswering(url string) {
	for i := 0; ; i++ {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			return
		}
		if i > 300 {
			log.Fatalf("web never answered: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
