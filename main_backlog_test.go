package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestProcessDiskFullAtTheBound: the data directory's disk fills while
// unique keys are sprayed at the memory bound. The backlog of changes
// that cannot be written is charged to the bound (main_backlog.go): it no
// longer grows with every key sprayed (before: ~340 B per key for as long
// as the outage lasts, 294 MB of backlog and 262 MB of RSS at a 16 MB
// bound after 32 s); new keys get -OOM instead, the long-lived keys are
// neither lost nor evicted for it and are still decided, and once the disk
// has room again the backlog is written and new keys are taken again.
func TestProcessDiskFullAtTheBound(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a tmpfs under a spray")
	}
	const bound = 4 << 20
	mnt := tmpfs(t, 64<<20)
	dir := filepath.Join(mnt, "data")
	c := mustLaunch(t, dir, "--maxmemory", strconv.Itoa(bound), "--maxmemory-policy", "volatile-ttl",
		"--flush-interval", "20ms", "--shutdown-grace", "2s")
	rdb := c.client()
	ctx := context.Background()
	check := longKeys(t, rdb, 200)
	wait := func(what string, ok func(map[string]string) bool) map[string]string {
		t.Helper()
		return waitPersistence(t, c, rdb, 30*time.Second, what, ok)
	}
	wait("the long-lived keys to be flushed", func(m map[string]string) bool { return m["dirty_keys"] == "0" })
	filler := fillDisk(t, mnt, 0)

	// 30 rounds of 2,000 new keys, each followed by a pause long enough for
	// a flush window and the backlog's charge to follow (100 ms): 60,000
	// keys, whose pending ops would take ~20 MB, five times the bound.
	oom, maxPending := 0, int64(0)
	for round := range 30 {
		pipe := rdb.Pipeline()
		for i := range 2000 {
			pipe.Do(ctx, "CL.THROTTLE", "spray:"+strconv.Itoa(round)+":"+strconv.Itoa(i), 10, 10, 600, 1)
		}
		cmds, _ := pipe.Exec(ctx)
		for _, cmd := range cmds {
			if err := cmd.Err(); err != nil {
				if !strings.HasPrefix(err.Error(), "OOM ") {
					t.Fatalf("spray: %v", err)
				}
				oom++
			}
		}
		time.Sleep(150 * time.Millisecond)
		maxPending = max(maxPending, infoInt(info(t, rdb, "persistence"), "pending_bytes"))
	}
	m := info(t, rdb, "persistence")
	mem := info(t, rdb, "memory")
	t.Logf("disk full at a %d MB bound: %d of 60000 new keys refused (OOM); pending_bytes max %.1f MB; used_memory %s; status %s",
		bound>>20, oom, float64(maxPending)/(1<<20), mem["used_memory"], m["last_flush_status"])
	if m["last_flush_status"] != "err" {
		t.Fatalf("the disk never failed: %v", m)
	}
	if maxPending > 2*bound {
		t.Errorf("the backlog reached %d bytes, over twice the bound: it grows with the spray", maxPending)
	}
	if oom == 0 {
		t.Errorf("no new key refused while the backlog held the bound")
	}
	if lost := check(); lost != 0 {
		t.Errorf("%d of 200 long-lived keys lost during the outage", lost)
	}

	// Room again: the backlog is written and new keys are taken.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	wait("recovery", func(m map[string]string) bool {
		return m["last_flush_status"] == "ok" && m["pending_keys"] == "0"
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := rdb.Do(ctx, "CL.THROTTLE", "after:recovery", 10, 10, 600, 1).Err()
		if err == nil {
			break
		}
		if !strings.HasPrefix(err.Error(), "OOM ") || time.Now().After(deadline) {
			t.Fatalf("a new key after recovery: %v; INFO memory %v", err, info(t, rdb, "memory"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if lost := check(); lost != 0 {
		t.Errorf("%d of 200 long-lived keys lost after recovery", lost)
	}
	c.termOK()
}
