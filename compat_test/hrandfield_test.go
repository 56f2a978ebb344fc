package compat_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	_ "github.com/celld/celld/data" // hashes
)

// TestHRandFieldPicks: HRANDFIELD with a count answers as Redis's rules
// say on a compact hash (10 fields) and a full one (600): a positive count
// gives that many distinct fields (all of them, in some order, when it is
// at least the hash's size), a negative one that many picks with
// repeats, and WITHVALUES pairs each field with its own value. It covers
// the paths that read a compact hash once with Each before picking.
func TestHRandFieldPicks(t *testing.T) {
	ts := startServer(t)
	rdb := newGoRedis(t, ts)
	ctx := context.Background()
	for _, n := range []int{10, 600} {
		key := "h" + strconv.Itoa(n)
		want := map[string]string{}
		for i := range n {
			f, v := "f"+strconv.Itoa(i), "v"+strconv.Itoa(i*7)
			want[f] = v
			if err := rdb.HSet(ctx, key, f, v).Err(); err != nil {
				t.Fatal(err)
			}
		}
		for _, count := range []int{1, 3, n / 2, n - 1, n, n + 5, -1, -(n + 20)} {
			for round := range 5 {
				pairs, err := rdb.HRandFieldWithValues(ctx, key, count).Result()
				if err != nil {
					t.Fatal(err)
				}
				wantLen := min(count, n)
				if count < 0 {
					wantLen = -count
				}
				if len(pairs) != wantLen {
					t.Fatalf("n %d count %d: %d pairs, want %d", n, count, len(pairs), wantLen)
				}
				seen := map[string]bool{}
				for _, p := range pairs {
					if v, ok := want[p.Key]; !ok || v != p.Value {
						t.Fatalf("n %d count %d round %d: pair %q=%q, the hash has %q", n, count, round, p.Key, p.Value, v)
					}
					if count > 0 && seen[p.Key] {
						t.Fatalf("n %d count %d: %q repeated", n, count, p.Key)
					}
					seen[p.Key] = true
				}
			}
		}
		enc, err := rdb.ObjectEncoding(ctx, key).Result()
		if wantEnc := map[int]string{10: "listpack", 600: "hashtable"}[n]; err != nil || enc != wantEnc {
			t.Fatalf("n %d: encoding %q (%v), want %q", n, enc, err, wantEnc)
		}
	}
}

// TestHRandFieldSmallCountOnBigHash: HRANDFIELD with a small count on a
// full (hashtable) hash is O(count) in Redis (random picks; a positive
// count below a third of the size is rejection-sampled). celld's negative
// path copies every field first (h.Each into a slice of n, 32 bytes each:
// 9ff3954's "read once" meant for compact hashes, applied to full ones,
// whose At is O(1)), and its positive path builds an n-entry permutation.
// On a 1,000,000-field hash, redis-benchmark: HRANDFIELD k -2 49 ms per
// call (Redis 7.0: 0.015 ms), HRANDFIELD k 2 ~4 ms (Redis 0.023 ms),
// ZRANDMEMBER z 2 168 ms (Redis 0.015 ms): one cheap command from any
// client holds the shard for that long and allocates O(n).
func TestHRandFieldSmallCountOnBigHash(t *testing.T) {
	ts := startServer(t)
	rdb := newGoRedis(t, ts)
	ctx := context.Background()
	const n = 200_000
	for i := 0; i < n; i += 1000 {
		args := []interface{}{"HSET", "big"}
		for j := i; j < i+1000; j++ {
			args = append(args, "f"+strconv.Itoa(j), "v")
		}
		if err := rdb.Do(ctx, args...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, count := range []int{-2, 2} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		const calls = 20
		for range calls {
			if err := rdb.Do(ctx, "HRANDFIELD", "big", count).Err(); err != nil {
				t.Fatal(err)
			}
		}
		took := time.Since(start) / calls
		runtime.ReadMemStats(&after)
		perCall := (after.TotalAlloc - before.TotalAlloc) / calls
		t.Logf("HRANDFIELD big %d on %d fields: %d bytes allocated, %v per call", count, n, perCall, took)
		if perCall > 256<<10 {
			t.Errorf("HRANDFIELD big %d: %d bytes allocated per call on a %d-field hash: O(n), want O(count)", count, perCall, n)
		}
	}
}
