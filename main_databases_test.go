package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Databases across restarts (docs/databases.md): every database is
// persisted; the same key in two databases keeps two states through a
// SIGTERM (exactly) and a kill -9 (within the flush window); SWAPDB, MOVE
// and FLUSHDB are durable; a directory written before databases existed
// restores unchanged.

// dbEntry is one key's state as a client sees it.
type dbEntry struct {
	value string
	pttl  int64
}

// dumpDBs reads every key of databases 0..n-1: value and PTTL.
func dumpDBs(t *testing.T, addr string, n int) map[string]dbEntry {
	t.Helper()
	ctx := context.Background()
	out := map[string]dbEntry{}
	for db := range n {
		rdb := redis.NewClient(&redis.Options{Addr: addr, DB: db})
		keys, err := rdb.Keys(ctx, "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			v, err := rdb.Get(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			ms, err := rdb.PTTL(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			pttl := int64(-1)
			if ms >= 0 {
				pttl = ms.Milliseconds()
			}
			out[fmt.Sprintf("%d/%s", db, k)] = dbEntry{v, pttl}
		}
		rdb.Close()
	}
	return out
}

func dbClient(t *testing.T, c *child, db int) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: c.addr, DB: db})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

func TestProcessDatabasesRestart(t *testing.T) {
	dir := t.TempDir()
	c := mustLaunch(t, dir, "--flush-interval", "50ms")
	ctx := context.Background()
	db0, db3 := dbClient(t, c, 0), dbClient(t, c, 3)
	throttle := func(rdb *redis.Client, q int) []int64 {
		t.Helper()
		v, err := rdb.Do(ctx, "CL.THROTTLE", "user:1", 10, 1, 3600, q).Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	throttle(db3, 7) // db 3: 7 of 11 used
	throttle(db0, 1) // db 0: 1 of 11
	for db := range 8 {
		rdb := dbClient(t, c, db)
		for i := range 50 {
			if err := rdb.Set(ctx, fmt.Sprintf("k%d", i), db*1000+i, time.Duration(i%2)*time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	must := func(rdb *redis.Client, args ...any) {
		t.Helper()
		if err := rdb.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	must(db0, "SWAPDB", 5, 6)
	must(db0, "SWAPDB", 1, 2)
	must(db0, "SWAPDB", 2, 1) // back: the mapping must return to identity on disk too
	must(db3, "MOVE", "k1", 9)
	must(dbClient(t, c, 7), "FLUSHDB")
	start := time.Now()
	before := dumpDBs(t, c.addr, 16)
	if len(before) != 8*50-50+2 || before["9/k1"].value != "3001" || before["5/k0"].value != "6000" {
		t.Fatalf("state before restart: %d keys, 9/k1=%q, 5/k0=%q", len(before), before["9/k1"].value, before["5/k0"].value)
	}
	t.Logf("SIGTERM → exit in %v", c.termOK())

	t0 := time.Now()
	c = mustLaunch(t, dir, "--flush-interval", "50ms")
	t.Logf("restart in %v", time.Since(t0))
	after := dumpDBs(t, c.addr, 16)
	compareDBs(t, before, after, time.Since(start).Milliseconds())
	db0, db3 = dbClient(t, c, 0), dbClient(t, c, 3)
	if r := throttle(db3, 1); r[2] != 3 {
		t.Errorf("db 3 after SIGTERM: remaining %d, want 3 (11 - 7 - 1)", r[2])
	}
	if r := throttle(db0, 1); r[2] != 9 {
		t.Errorf("db 0 after SIGTERM: remaining %d, want 9 (11 - 1 - 1)", r[2])
	}

	// kill -9: what was acknowledged more than a few windows before the
	// kill survives, in the right database.
	must(db0, "SWAPDB", 0, 4)
	must(db3, "MOVE", "k2", 12)
	must(dbClient(t, c, 6), "FLUSHDB")
	throttle(db3, 1)
	throttle(db0, 1) // db 0 is what db 4 was: a fresh user:1
	start = time.Now()
	before = dumpDBs(t, c.addr, 16)
	time.Sleep(500 * time.Millisecond) // 10 windows
	c.kill()
	c = mustLaunch(t, dir, "--flush-interval", "50ms")
	after = dumpDBs(t, c.addr, 16)
	compareDBs(t, before, after, time.Since(start).Milliseconds()+600)
	if after["4/k0"].value != "0" || after["0/k0"].value != "4000" || after["12/k2"].value != "3002" {
		t.Errorf("after kill -9: 4/k0=%q 0/k0=%q 12/k2=%q", after["4/k0"].value, after["0/k0"].value, after["12/k2"].value)
	}
	c.termOK()

	// Fewer databases than the data uses: refused, saying what to do.
	c = launch(t, dir, "--databases", "8")
	if !c.hasExited() {
		c.kill()
		t.Fatal("celld started with --databases 8 on data of database 12")
	}
	if !strings.Contains(c.logs.String(), "but --databases is 8: start with --databases") {
		t.Errorf("refusal does not name the fix:\n%s", c.logs)
	}
}

func compareDBs(t *testing.T, before, after map[string]dbEntry, elapsedMs int64) {
	t.Helper()
	if len(after) != len(before) {
		t.Errorf("after restart: %d keys, want %d", len(after), len(before))
	}
	bad := 0
	for k, b := range before {
		a, ok := after[k]
		switch {
		case !ok:
			t.Errorf("%s: missing after restart", k)
		case a.value != b.value && !strings.HasSuffix(k, "/user:1"):
			t.Errorf("%s: %q after restart, %q before", k, a.value, b.value)
		case a.value != b.value:
			t.Errorf("%s: TAT %s after restart, %s before", k, a.value, b.value)
		case (b.pttl == -1) != (a.pttl == -1) || a.pttl > b.pttl || (b.pttl >= 0 && a.pttl < b.pttl-elapsedMs-5):
			t.Errorf("%s: PTTL %d after restart, %d before", k, a.pttl, b.pttl)
		default:
			continue
		}
		if bad++; bad > 20 {
			t.Fatal("too many differences")
		}
	}
}

// A data directory written by celld before databases existed (main at
// 116090b: a base of 7 keys folded with --log-fold-min-bytes 1, then a
// change record deleting one and rewriting another) restores unchanged
// into database 0.
func TestProcessRestoresDataDirBeforeDatabases(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "datadir-main-116090b"))); err != nil {
		t.Fatal(err)
	}
	c := mustLaunch(t, dir)
	got := dumpDBs(t, c.addr, 16)
	const far = 4102444800000 // PEXPIREAT used when the directory was written
	want := map[string]string{
		"0/plain": "43", "0/verbatim": "+5", "0/zeros": "007", "0/big": "18446744073709551615",
		"0/thr": "1796199839114956643", "0/thr-ttl": "1796185439115315613",
	}
	if len(got) != len(want) {
		t.Errorf("restored %d keys, want %d: %v", len(got), len(want), got)
	}
	for k, v := range want {
		if got[k].value != v {
			t.Errorf("%s = %q, want %q", k, got[k].value, v)
		}
	}
	rdb := dbClient(t, c, 0)
	for _, k := range []string{"zeros", "thr-ttl"} {
		if ms, err := rdb.Do(context.Background(), "PEXPIRETIME", k).Int64(); err != nil || ms != far {
			t.Errorf("PEXPIRETIME %s = %d, %v, want %d", k, ms, err, int64(far))
		}
	}
	for _, k := range []string{"plain", "verbatim", "big", "thr"} {
		if got["0/"+k].pttl != -1 {
			t.Errorf("%s has a TTL after restore", k)
		}
	}
	c.termOK()
}
