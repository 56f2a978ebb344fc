package compat_test

import (
	"fmt"
	"sort"
	"testing"

	"github.com/redis/go-redis/v9"
)

const nScanKeys = 10000

// fillKeys writes key:00000 … key:09999 through one pipeline.
func fillKeys(t *testing.T, rdb *redis.Client) {
	t.Helper()
	pipe := rdb.Pipeline()
	for i := 0; i < nScanKeys; i++ {
		pipe.Set(ctx, fmt.Sprintf("key:%05d", i), i, 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
}

// scanAll iterates SCAN to the end and returns the set of keys seen.
func scanAll(t *testing.T, rdb *redis.Client, match string, count int64, typ string) map[string]bool {
	t.Helper()
	seen := map[string]bool{}
	var cursor uint64
	for calls := 0; ; calls++ {
		if calls > 2*nScanKeys {
			t.Fatalf("SCAN MATCH %q COUNT %d does not terminate", match, count)
		}
		var keys []string
		var err error
		if typ == "" {
			keys, cursor, err = rdb.Scan(ctx, cursor, match, count).Result()
		} else {
			keys, cursor, err = rdb.ScanType(ctx, cursor, match, count, typ).Result()
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			seen[k] = true
		}
		if cursor == 0 {
			return seen
		}
	}
}

func wantKeys(from, to int) map[string]bool {
	m := map[string]bool{}
	for i := from; i < to; i++ {
		m[fmt.Sprintf("key:%05d", i)] = true
	}
	return m
}

func sameSet(t *testing.T, what string, got, want map[string]bool) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d keys, want %d", what, len(got), len(want))
	}
	n := 0
	for k := range want {
		if !got[k] && n < 5 {
			t.Errorf("%s: missing %q", what, k)
			n++
		}
	}
	for k := range got {
		if !want[k] && n < 10 {
			t.Errorf("%s: unexpected %q", what, k)
			n++
		}
	}
}

func TestScan10000(t *testing.T) {
	ts := startServer(t, withFakeClock(t0))
	rdb := newGoRedis(t, ts)
	fillKeys(t, rdb)
	if n, err := rdb.DBSize(ctx).Result(); err != nil || n != nScanKeys {
		t.Fatalf("DBSIZE = %d %v", n, err)
	}
	for _, count := range []int64{10, 100, 1000} {
		sameSet(t, fmt.Sprintf("SCAN COUNT %d", count), scanAll(t, rdb, "", count, ""), wantKeys(0, nScanKeys))
	}
	sameSet(t, "SCAN MATCH key:0000?", scanAll(t, rdb, "key:0000?", 100, ""), wantKeys(0, 10))
	sameSet(t, "SCAN MATCH key:01*", scanAll(t, rdb, "key:01*", 1000, ""), wantKeys(1000, 2000))
	sameSet(t, "SCAN MATCH key:0[0-1]*", scanAll(t, rdb, "key:0[0-1]*", 1000, ""), wantKeys(0, 2000))
	sameSet(t, "SCAN MATCH *", scanAll(t, rdb, "*", 1000, ""), wantKeys(0, nScanKeys))
	sameSet(t, "SCAN MATCH nomatch*", scanAll(t, rdb, "nomatch*", 1000, ""), map[string]bool{})
	sameSet(t, "SCAN TYPE string", scanAll(t, rdb, "", 1000, "string"), wantKeys(0, nScanKeys))
	sameSet(t, "SCAN TYPE STRING", scanAll(t, rdb, "", 1000, "STRING"), wantKeys(0, nScanKeys))
	sameSet(t, "SCAN TYPE hash", scanAll(t, rdb, "", 1000, "hash"), map[string]bool{})
	sameSet(t, "SCAN MATCH key:0999? TYPE string", scanAll(t, rdb, "key:0999?", 1000, "string"), wantKeys(9990, 10000))

	// KEYS with patterns.
	for _, k := range []struct {
		pattern string
		want    map[string]bool
	}{
		{"*", wantKeys(0, nScanKeys)},
		{"key:0000?", wantKeys(0, 10)},
		{"key:0999[5-9]", wantKeys(9995, 10000)},
		{"key:0999[^0-4]", wantKeys(9995, 10000)},
		{"key:0001[0-9]", wantKeys(10, 20)},
		{"key:00\\00?", wantKeys(0, 10)},
		{"nomatch", map[string]bool{}},
	} {
		keys, err := rdb.Keys(ctx, k.pattern).Result()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, key := range keys {
			got[key] = true
		}
		if len(got) != len(keys) {
			t.Errorf("KEYS %q returned duplicates", k.pattern)
		}
		sameSet(t, "KEYS "+k.pattern, got, k.want)
	}

	// FLUSHDB empties everything.
	runSteps(t, ts, goRedisDo(rdb), []step{
		{c("FLUSHDB"), "OK"},
		{c("DBSIZE"), int64(0)},
		{c("KEYS *"), []any{}},
		{c("SCAN 0"), []any{"0", []any{}}},
		{c("EXISTS key:00000"), int64(0)},
	})
}

func TestScanErrorsAndSmall(t *testing.T) {
	ts := startServer(t, withFakeClock(t0))
	rdb := newGoRedis(t, ts)
	runSteps(t, ts, goRedisDo(rdb), []step{
		{c("SCAN 0"), []any{"0", []any{}}},
		{c("DBSIZE"), int64(0)},
		{c("SCAN abc"), errText("ERR invalid cursor")},
		{c("SCAN 1x"), errText("ERR invalid cursor")},
		{c("SCAN 0 COUNT 0"), errText("ERR syntax error")},
		{c("SCAN 0 COUNT -1"), errText("ERR syntax error")},
		{c("SCAN 0 COUNT x"), errText("ERR value is not an integer or out of range")},
		{c("SCAN 0 MATCH"), errText("ERR syntax error")},
		{c("SCAN 0 FOO bar"), errText("ERR syntax error")},
		{c("SCAN 0 TYPE nosuchtype"), errText("ERR unknown type name 'nosuchtype'")},
		{c("CL.THROTTLE a 15 30 60"), th(0, 16, 15, -1, 2)},
		{c("CL.THROTTLE b 15 30 60"), th(0, 16, 15, -1, 2)},
		{c("DBSIZE"), int64(2)},
		{c("FLUSHDB SYNC"), "OK"},
		{c("FLUSHDB ASYNC"), "OK"},
		{c("FLUSHDB FOO"), errText("ERR syntax error")},
		{c("FLUSHALL"), "OK"},
		{c("DBSIZE"), int64(0)},
	})
	if err := rdb.Set(ctx, "one", 1, 0).Err(); err != nil {
		t.Fatal(err)
	}
	keys := scanAll(t, rdb, "", 10, "")
	var list []string
	for k := range keys {
		list = append(list, k)
	}
	sort.Strings(list)
	if fmt.Sprint(list) != "[one]" {
		t.Errorf("SCAN = %v", list)
	}
}
