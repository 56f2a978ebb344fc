package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/celld/celld/persist"
)

// startNoWait starts celld on dir with args and returns at once (launch
// waits for "celld listening").
func startNoWait(t *testing.T, dir string, args ...string) *child {
	t.Helper()
	c := &child{t: t, dir: dir, addr: freeAddr(t), exited: make(chan struct{})}
	c.logs = &logBuf{ready: make(chan struct{})}
	c.cmd = exec.Command(celldBinary(t), append([]string{"--addr", c.addr, "--dir", dir}, args...)...)
	c.cmd.Stdout, c.cmd.Stderr = c.logs, c.logs
	c.started = time.Now()
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.cmd.Wait(); close(c.exited) }()
	t.Cleanup(c.checkRaces) // after the kill (cleanups run last first)
	t.Cleanup(c.killIfRunning)
	return c
}

// TestProcessSIGTERMDuringRestore: SIGTERM while celld restores a large
// data directory ends the process with exit code 0 and a log line saying
// it stopped before serving (Redis exits 0 when told to stop while it
// loads), not by the signal's default action (143, silent); the directory
// then restores in full.
func TestProcessSIGTERMDuringRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 300k keys")
	}
	dir := filepath.Join(t.TempDir(), "data")
	db, err := persist.Open(dir, persist.Options{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	const n = 300_000
	ops := make([]persist.Op, 0, 100_000)
	for i := range n {
		ops = append(ops, persist.Op{Key: fmt.Appendf(nil, "user:%08d", i), TAT: uint64(4_000_000_000_000_000_000 + i), IsTAT: true, ExpireAtMs: 4_000_000_000_000})
		if len(ops) == cap(ops) {
			if err := db.Write(ops); err != nil {
				t.Fatal(err)
			}
			ops = ops[:0]
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	c := startNoWait(t, dir)
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(c.logs.String(), "restoring state") {
		if time.Now().After(deadline) || c.hasExited() {
			t.Fatalf("no \"restoring state\" line; log:\n%s", c.logs)
		}
		time.Sleep(time.Millisecond)
	}
	code, took := c.term()
	log := c.logs.String()
	if strings.Contains(log, "celld listening") {
		t.Skipf("the restore finished before SIGTERM arrived (%v); log:\n%s", took, log)
	}
	if code != 0 || !strings.Contains(log, "shutting down before serving") {
		t.Fatalf("SIGTERM during the restore: exit %d after %v; want 0 and a line saying so; log:\n%s", code, took, log)
	}
	t.Logf("exit %d after %v: %s", code, took.Round(time.Millisecond), firstLine(log, "shutting down"))
	c = mustLaunch(t, dir)
	if got, err := c.client().DBSize(context.Background()).Result(); err != nil || got != n {
		t.Errorf("DBSIZE after the interrupted restore = %d, %v; want %d", got, err, n)
	}
	c.termOK()
}

// TestProcessSIGTERMDuringLongEval: a script still running when SIGTERM
// arrives does not hold the process past --shutdown-grace: the connections
// get three quarters of it, a WARN says a command was still running and
// what that means for its changes, the final flush runs in the rest, and
// the process exits 0 within the grace; what was flushed restores.
func TestProcessSIGTERMDuringLongEval(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	c := mustLaunch(t, dir, "--shutdown-grace", "2s")
	rdb := c.client()
	ctx := context.Background()
	throttle(t, rdb, "before", 10, 1, 3600, 1)
	evalErr := make(chan error, 1)
	go func() {
		_, err := rdb.Eval(ctx, "redis.call('CL.THROTTLE','during',10,1,3600,1) local i=0 while i<3000000000 do i=i+1 end return i", nil).Result()
		evalErr <- err
	}()
	select {
	case err := <-evalErr:
		t.Fatalf("the script ended early: %v", err)
	case <-time.After(300 * time.Millisecond): // the script is running
	}
	code, took := c.term()
	log := c.logs.String()
	if code != 0 || took > 3*time.Second || !strings.Contains(log, "a command was still running") {
		t.Fatalf("SIGTERM during a long EVAL: exit %d after %v; want 0 within --shutdown-grace (2s) and a WARN; log:\n%s", code, took, log)
	}
	t.Logf("exit %d after %v: %s", code, took.Round(time.Millisecond), firstLine(log, "still running"))
	c = mustLaunch(t, dir)
	if n, _ := c.client().Exists(ctx, "before", "during").Result(); n != 2 {
		t.Errorf("after restart %d of {before, during} exist; want both (the script's first change was flushed)", n)
	}
	c.termOK()
}
