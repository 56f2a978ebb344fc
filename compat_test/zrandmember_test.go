package compat_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	_ "github.com/celld/celld/data" // sorted sets
)

// TestZRandMemberPicks: ZRANDMEMBER with a count answers as Redis's rules
// say on a compact sorted set (10 members) and a full one (600): a positive
// count gives that many distinct members (all of them when it is at least
// the set's size), a negative one that many picks with repeats, and
// WITHSCORES pairs each member with its own score, flat in RESP2 and as
// [member, double] pairs in RESP3. It covers every path of the picker
// (repeats, all, shuffle of a copy, rejection sampling) in both encodings.
func TestZRandMemberPicks(t *testing.T) {
	ts := startServer(t)
	ctx := context.Background()
	for _, proto := range []int{2, 3} {
		rdb := newGoRedis(t, ts, func(o *redis.Options) { o.Protocol = proto })
		for _, n := range []int{10, 600} {
			key := "z" + strconv.Itoa(n)
			want := map[string]float64{}
			for i := range n {
				m, s := "m"+strconv.Itoa(i), float64(i)*1.5-7
				want[m] = s
				if err := rdb.ZAdd(ctx, key, redis.Z{Score: s, Member: m}).Err(); err != nil {
					t.Fatal(err)
				}
			}
			for _, count := range []int{1, 2, 3, n / 4, n / 2, n - 1, n, n + 5, -1, -2, -(n + 20)} {
				for round := range 5 {
					// Raw replies, so the RESP2/RESP3 shapes are checked as sent.
					v, err := rdb.Do(ctx, "ZRANDMEMBER", key, count, "WITHSCORES").Slice()
					if err != nil {
						t.Fatal(err)
					}
					var pairs []redis.Z
					if proto == 3 {
						for _, p := range v {
							pp, ok := p.([]any)
							if !ok || len(pp) != 2 {
								t.Fatalf("resp3 n %d count %d: element %#v, want [member, score]", n, count, p)
							}
							f, ok := pp[1].(float64)
							if !ok {
								t.Fatalf("resp3 n %d count %d: score %#v, want a double", n, count, pp[1])
							}
							pairs = append(pairs, redis.Z{Member: pp[0], Score: f})
						}
					} else {
						if len(v)%2 != 0 {
							t.Fatalf("resp2 n %d count %d: %d items, want pairs", n, count, len(v))
						}
						for i := 0; i < len(v); i += 2 {
							f, err := strconv.ParseFloat(v[i+1].(string), 64)
							if err != nil {
								t.Fatalf("resp2 n %d count %d: score %#v", n, count, v[i+1])
							}
							pairs = append(pairs, redis.Z{Member: v[i], Score: f})
						}
					}
					wantLen := min(count, n)
					if count < 0 {
						wantLen = -count
					}
					if len(pairs) != wantLen {
						t.Fatalf("resp%d n %d count %d: %d pairs, want %d", proto, n, count, len(pairs), wantLen)
					}
					seen := map[string]bool{}
					for _, p := range pairs {
						m, _ := p.Member.(string)
						if s, ok := want[m]; !ok || s != p.Score {
							t.Fatalf("resp%d n %d count %d round %d: pair %q=%v, the set has %v", proto, n, count, round, m, p.Score, s)
						}
						if count > 0 && seen[m] {
							t.Fatalf("resp%d n %d count %d: %q repeated", proto, n, count, m)
						}
						seen[m] = true
					}
					members, err := rdb.ZRandMember(ctx, key, count).Result()
					if err != nil || len(members) != wantLen {
						t.Fatalf("resp%d n %d count %d: %d members (%v), want %d", proto, n, count, len(members), err, wantLen)
					}
				}
			}
			one, err := rdb.Do(ctx, "ZRANDMEMBER", key).Text()
			if _, ok := want[one]; err != nil || !ok {
				t.Fatalf("ZRANDMEMBER %s: %q (%v), not a member", key, one, err)
			}
			enc, err := rdb.ObjectEncoding(ctx, key).Result()
			if wantEnc := map[int]string{10: "listpack", 600: "skiplist"}[n]; err != nil || enc != wantEnc {
				t.Fatalf("n %d: encoding %q (%v), want %q", n, enc, err, wantEnc)
			}
			rdb.Del(ctx, key)
		}
	}
}

// TestZRandMemberSmallCountOnBigSet: ZRANDMEMBER with a small count on a
// big (skiplist) sorted set is O(count) in Redis (random picks; a positive
// count below a third of the size is rejection-sampled). celld copied every
// member into a slice first (and shuffled it for a positive count): on
// 1,000,000 members ZRANDMEMBER z 2 took 168 ms (Redis 0.015 ms). Bytes
// allocated per call, not time, decide: O(n) is megabytes here.
func TestZRandMemberSmallCountOnBigSet(t *testing.T) {
	ts := startServer(t)
	rdb := newGoRedis(t, ts)
	ctx := context.Background()
	const n = 200_000
	for i := 0; i < n; i += 1000 {
		args := []interface{}{"ZADD", "big"}
		for j := i; j < i+1000; j++ {
			args = append(args, j, "m"+strconv.Itoa(j))
		}
		if err := rdb.Do(ctx, args...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]any{{-2}, {2}, {-2, "WITHSCORES"}, {2, "WITHSCORES"}, {1000}} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		const calls = 20
		for range calls {
			if err := rdb.Do(ctx, append([]any{"ZRANDMEMBER", "big"}, args...)...).Err(); err != nil {
				t.Fatal(err)
			}
		}
		took := time.Since(start) / calls
		runtime.ReadMemStats(&after)
		perCall := (after.TotalAlloc - before.TotalAlloc) / calls
		t.Logf("ZRANDMEMBER big %v on %d members: %d bytes allocated, %v per call", args, n, perCall, took)
		if perCall > 256<<10 {
			t.Errorf("ZRANDMEMBER big %v: %d bytes allocated per call on a %d-member set: O(n), want O(count)", args, perCall, n)
		}
	}
}
