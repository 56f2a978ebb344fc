package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// dbsize is DBSIZE, failing the test on an error.
func dbsize(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	n, err := rdb.DBSize(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestProcessCleanExpiryNotRestored: keys that expire after their record
// was flushed leave no deletion record (store/expire.go): their records
// stay on disk, carrying an expiry that has passed, and neither a restart
// after SIGTERM nor one after kill -9 brings any of them back. The same
// for a key whose TTL a PEXPIRE shortened (its record carries the shorter
// one), for CL.THROTTLE and CL.WINDOW keys, and for a FIXED window key.
func TestProcessCleanExpiryNotRestored(t *testing.T) {
	for _, how := range []string{"SIGTERM", "kill -9"} {
		t.Run(how, func(t *testing.T) {
			dir := t.TempDir()
			c := mustLaunch(t, dir)
			rdb := c.client()
			ctx := context.Background()
			// Every key must reach the disk before it expires: 3 s TTLs
			// leave room for a loaded CI machine under -race (300 ms did
			// not: the last keys written expired before the first SAVE).
			const ttl = 3 * time.Second
			// FIXED windows end on multiples of their length since the
			// epoch: start just after one, so the window keys live ~3 s.
			time.Sleep(time.Duration(ttl.Milliseconds()-time.Now().UnixMilli()%ttl.Milliseconds()) * time.Millisecond)
			var short []string
			for i := range 50 {
				k := "px:" + strconv.Itoa(i)
				short = append(short, k)
				if err := rdb.Set(ctx, k, i, ttl).Err(); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 20 {
				k := "gcra:" + strconv.Itoa(i)
				short = append(short, k)
				throttle(t, rdb, k, 0, 10, 30, 1) // EI 3 s: TTL 3 s
				k = "win:" + strconv.Itoa(i)
				short = append(short, k)
				if err := rdb.Do(ctx, "CL.WINDOW", k, 10, ttl.Milliseconds(), "FIXED").Err(); err != nil {
					t.Fatal(err)
				}
			}
			for i := range 10 {
				if err := rdb.Set(ctx, "keep:"+strconv.Itoa(i), i, 0).Err(); err != nil {
					t.Fatal(err)
				}
			}
			if err := rdb.Set(ctx, "shortened", "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
			if err := rdb.Save(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			if err := rdb.PExpire(ctx, "shortened", ttl).Err(); err != nil {
				t.Fatal(err)
			}
			short = append(short, "shortened")
			if err := rdb.Save(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			// The sweep removes them all; nothing else writes.
			waitFor(t, "expired keys still counted by DBSIZE", func() bool { return dbsize(t, rdb) == 10 })
			if err := rdb.Save(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			rdb.Close()
			if how == "SIGTERM" {
				c.termOK()
			} else {
				c.kill()
			}

			// On disk: the expired keys' records, every one past its
			// expiry (no deletion was written for them), and the others.
			onDisk, _ := readDir(t, dir)
			nowMs := time.Now().UnixMilli()
			for _, k := range short {
				if r, ok := onDisk[k]; !ok || r.exp == 0 || r.exp > nowMs {
					t.Errorf("%s on disk = %+v (present %v), want its record with a past expiry", k, r, ok)
				}
			}

			c = mustLaunch(t, dir)
			rdb = c.client()
			if n := dbsize(t, rdb); n != 10 {
				t.Errorf("DBSIZE after restart = %d, want 10", n)
			}
			for _, k := range short {
				if n, err := rdb.Exists(ctx, k).Result(); err != nil || n != 0 {
					t.Errorf("EXISTS %s after restart = %d, %v; want 0", k, n, err)
				}
			}
			if got := info(t, rdb, "persistence")["restore_keys"]; got != "10" {
				t.Errorf("restore_keys = %s, want 10", got)
			}
		})
	}
}

// TestProcessFoldDropsCleanExpiries: expiries that write no record still
// count toward the fold that follows the live state down (persist's
// BaseDue: half of the base deleted). A base of 6,000 keys with a TTL and
// 100 without is folded, once the 6,000 have expired, into a base of the
// 100, with no other write; without that count the base would keep them
// until the log outgrew it, and with no more writes that is never.
//
// Two things keep it from depending on the machine's speed (a loaded
// CI-like run failed both ways):
//   - The 6,000 share one absolute expiry (PXAT). With a TTL each, their
//     expiries spread over the creation and the sweep; a fold in the
//     middle of them wrote a base of the ~3,000 still alive, under
//     minShrinkFold, which then (by design) stays until the log outgrows
//     it. With one instant, the fold that the expiries' count starts
//     snapshots after it and keeps only the 100.
//   - The 100 kept keys carry 4 KB values, so that each flush window's
//     writes outgrow the base and a fold takes every key within a few
//     windows. With small values the log grew by ~2.5 KB a window (a
//     window keeps one record per key) against a ~150 KB base: about 60
//     windows, which on a loaded machine outlasted the 8 s before the
//     expiry ("no fold took all the keys").
func TestProcessFoldDropsCleanExpiries(t *testing.T) {
	dir := t.TempDir()
	c := mustLaunch(t, dir, "--log-fold-min-bytes", "1")
	rdb := c.client()
	ctx := context.Background()
	const nTTL, nKeep = 6000, 100
	start := time.Now()
	expireAt := start.Add(8 * time.Second).UnixMilli() // outlives the first fold, even on a loaded machine
	pipe := rdb.Pipeline()
	for i := range nTTL {
		pipe.Do(ctx, "SET", "ttl:"+strconv.Itoa(i), i, "PXAT", expireAt)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	baseKeys := func() int64 {
		n, _ := strconv.ParseInt(info(t, rdb, "persistence")["last_base_keys"], 10, 64)
		return n
	}
	// Until a fold takes every key (a fold may have cut the creation in
	// two): the kept keys' writes grow the log until it outgrows the base.
	pad := strings.Repeat("k", 4<<10)
	round := 0
	waitFor(t, "no fold took all the keys", func() bool {
		round++
		for i := range nKeep {
			pipe.Set(ctx, "keep:"+strconv.Itoa(i), strconv.Itoa(round)+pad, 0)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		if baseKeys() == nTTL+nKeep {
			return true
		}
		time.Sleep(20 * time.Millisecond)
		return false
	})
	t.Logf("base of every key after %v", time.Since(start))
	if n := dbsize(t, rdb); n != nTTL+nKeep {
		t.Fatalf("DBSIZE %d before the expiry, want %d (the TTL keys must outlive the first fold)", n, nTTL+nKeep)
	}
	waitFor(t, "the TTL keys did not expire", func() bool { return dbsize(t, rdb) == nKeep })
	t.Logf("expired after %v", time.Since(start))
	var last int64
	waitFor(t, "no fold followed the expiries (last_base_keys stayed above the live keys)", func() bool {
		last = baseKeys()
		return last == nKeep
	})
	t.Logf("folded to %d keys after %v", last, time.Since(start))
	rdb.Close()
	c.termOK()
	onDisk, _ := readDir(t, dir)
	if len(onDisk) != nKeep {
		t.Errorf("%d records on disk after the fold, want %d", len(onDisk), nKeep)
	}
}
