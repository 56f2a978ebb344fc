package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// baseLogKey is one LOG key of testdata/datadir-main-f3c96f0-window's
// want.txt: its units, and for k = 1..used, the newest unit's time minus
// the k-th unit's, oldest first (reset_after − retry_after of a call
// denied by exactly k units: time-independent, so a later restore must
// read the same).
type baseLogKey struct {
	key  string
	used int64
	gaps []int64
}

// windowGaps reads a LOG key's units and gaps as want.txt records them,
// with the calls gen.sh made (limit 100000, window 10^12 ms), pipelined.
func windowGaps(t *testing.T, rdb *redis.Client, key string) (int64, []int64) {
	t.Helper()
	ctx := context.Background()
	const limit, w = 100000, 1_000_000_000_000
	v, err := rdb.Do(ctx, "CL.WINDOW", key, limit, w, 0).Int64Slice()
	if err != nil {
		t.Fatalf("peek %s: %v", key, err)
	}
	used := limit - v[2]
	pipe := rdb.Pipeline()
	cmds := make([]*redis.IntSliceCmd, used)
	for k := range used {
		cmds[k] = redis.NewIntSliceCmd(ctx, "CL.WINDOW", key, limit, w, limit-used+k+1)
		pipe.Process(ctx, cmds[k])
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	gaps := make([]int64, used)
	for k, c := range cmds {
		d := c.Val()
		if d[0] != 1 {
			t.Fatalf("%s: a call of %d units was allowed", key, limit-used+int64(k)+1)
		}
		gaps[k] = d[4] - d[3]
	}
	return used, gaps
}

// TestMainF3c96f0WindowLogReads: a data directory written by main at
// f3c96f0 (LOG states in the plain format, before the header: keys in
// its base file and in its change log, kill -9; gen.sh) restores every
// unit of every LOG key where it was (want.txt: what that server
// answered); then an allowed call on each, SIGTERM and a restart keep
// them all and add the new unit (the states now written in the header
// format).
func TestMainF3c96f0WindowLogReads(t *testing.T) {
	src := filepath.Join("testdata", "datadir-main-f3c96f0-window")
	dir := t.TempDir()
	var want []baseLogKey
	for _, name := range []string{"base-0000000000000019.dat", "changes-000000000000001a.log", "want.txt"} {
		b, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if name != "want.txt" {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			f := strings.Fields(line)
			k := baseLogKey{key: f[0]}
			k.used, _ = strconv.ParseInt(f[1], 10, 64)
			for _, g := range f[2:] {
				n, _ := strconv.ParseInt(g, 10, 64)
				k.gaps = append(k.gaps, n)
			}
			if int64(len(k.gaps)) != k.used {
				t.Fatalf("want.txt %s: %d gaps for %d units", k.key, len(k.gaps), k.used)
			}
			want = append(want, k)
		}
	}
	if len(want) != 40 {
		t.Fatalf("want.txt holds %d keys, want 40", len(want))
	}
	c := mustLaunch(t, dir)
	rdb := c.client()
	ctx := context.Background()
	for _, k := range want {
		used, gaps := windowGaps(t, rdb, k.key)
		if used != k.used || !slices.Equal(gaps, k.gaps) {
			t.Fatalf("%s restored %d units, gaps %v; f3c96f0 answered %d, %v", k.key, used, gaps, k.used, k.gaps)
		}
		if err := rdb.Do(ctx, "CL.WINDOW", k.key, 100000, 1_000_000_000_000, 1).Err(); err != nil {
			t.Fatal(err)
		}
	}
	c.termOK()
	c = mustLaunch(t, dir)
	rdb = c.client()
	for _, k := range want {
		used, gaps := windowGaps(t, rdb, k.key)
		if used != k.used+1 || gaps[used-1] != 0 {
			t.Fatalf("%s after a call and a restart: %d units, gaps %v; want %d, the newest at 0", k.key, used, gaps, k.used+1)
		}
		shift := gaps[0] - k.gaps[0] // the new unit's distance from the old newest
		for i, g := range k.gaps {
			if gaps[i] != g+shift {
				t.Fatalf("%s after a call and a restart: gaps %v, before %v (+%d)", k.key, gaps, k.gaps, shift)
			}
		}
	}
	c.termOK()
}
