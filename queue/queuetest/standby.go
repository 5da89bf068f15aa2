package queuetest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cortexq/cortexq/queue/pgembed"
)

// NewClusterWith is NewCluster with further postgresql.conf lines (listen_addresses and port
// for a test over TCP, ssl settings, synchronous_standby_names), written after the test
// settings so that they win.
func NewClusterWith(t testing.TB, extra ...string) *Cluster {
	t.Helper()
	c, err := startLocalWith(t, "", extra)
	if err != nil {
		t.Fatalf("queuetest: %v", err)
	}
	t.Cleanup(func() {
		if err := c.close(); err != nil {
			t.Errorf("queuetest: %v", err)
		}
	})
	return c
}

// NewStandby makes a streaming hot standby of primary (pg_basebackup -R over primary's unix
// socket, application_name name for synchronous_standby_names) and starts it with extra
// postgresql.conf lines. It is stopped and deleted in t.Cleanup.
func NewStandby(t testing.TB, primary *Cluster, name string, extra ...string) *Cluster {
	t.Helper()
	primary.mustLocal(t)
	c, err := startLocalWith(t, primary.pg.DSN(), append([]string{"hot_standby = on", "hot_standby_feedback = on"}, extra...),
		"application_name="+name)
	if err != nil {
		t.Fatalf("queuetest: standby: %v", err)
	}
	t.Cleanup(func() {
		if err := c.close(); err != nil {
			t.Errorf("queuetest: %v", err)
		}
	})
	return c
}

// DataDir is a local cluster's data directory (PGDATA).
func (c *Cluster) DataDir() string { return filepath.Join(c.pg.Dir(), "data") }

// Promote promotes a standby to primary and waits until it accepts writes.
func (c *Cluster) Promote(t testing.TB) {
	t.Helper()
	c.pgCtl(t, "promote", "-w")
}

// Crash stops a local cluster at once (pg_ctl stop -m immediate: no shutdown checkpoint, every
// session cut), as a machine that dies would.
func (c *Cluster) Crash(t testing.TB) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pgCtl(t, "stop", "-m", "immediate", "-w")
	c.running = false
}

func (c *Cluster) pgCtl(t testing.TB, args ...string) {
	t.Helper()
	c.mustLocal(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cred, err := pgembed.ServerCredential()
	if err != nil {
		t.Fatalf("queuetest: %v", err)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(c.pg.BinDir(), "pg_ctl"), append(args[:1:1], append([]string{"-D", c.DataDir()}, args[1:]...)...)...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setsid: true}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("queuetest: pg_ctl %v: %v: %s", args, err, out)
	}
}

// baseBackup copies the cluster at dsn into dir/data as a standby of it (pg_basebackup -R), with
// a fast checkpoint: the default, spread one waits for most of checkpoint_timeout (minutes) on an
// idle primary.
func baseBackup(bin, dir, dsn, appName string) error {
	cred, err := pgembed.ServerCredential()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	data := filepath.Join(dir, "data")
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "pg_basebackup"), "-D", data, "-R", "-X", "stream", "--no-sync", "--checkpoint=fast",
		"-d", dsn+"&"+appName)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setsid: true}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pg_basebackup: %w: %s", err, out)
	}
	return os.Chmod(data, 0o700)
}
