package sidecar

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/celld/celld/server"
	"github.com/redis/go-redis/v9"
)

// TestSidecarLargeWriteReplyNotLost: a write whose reply carries stored
// data (LPOP key count, GETDEL) is as large as a bulk read's, but it
// travelled on the decision lane, where a reply not whole within
// --upstream-timeout of being sent takes its owner down and the fallback
// answers. The owner has then applied the write, and the data popped or
// deleted there reached nobody: with the local fallback the client got a
// nil (an empty list, a missing key) for data that existed.
//
// hostile15 found on 73bbdf8, with real processes on one host and no
// fault: LPOP L 1000000 of a 1M-element list (107 MB) through a sidecar
// answered *-1 after 0.27 s while the owner's list was emptied; GETDEL of
// a 200 MB string answered $-1 after 0.26 s and the key was gone on the
// owner. Here the owner's replies pass a proxy at 4 KiB per 10 ms, so
// the replies (~300-400 KB) take about a second against a 150 ms timeout,
// as TestSidecarLargeReplyNotTimeout does for HGETALL.
func TestSidecarLargeWriteReplyNotLost(t *testing.T) {
	const elems = 20_000
	for _, tc := range []struct {
		name  string
		fill  func(od *redis.Client) error
		run   func(sd *redis.Client) (int, error) // elements or bytes the client got
		want  int
		check func(od *redis.Client) int // what is left on the owner
	}{
		{"LPOP count",
			func(od *redis.Client) error {
				vals := make([]any, elems)
				for i := range vals {
					vals[i] = fmt.Sprintf("element%08d", i)
				}
				return od.RPush(ctx, "L", vals...).Err()
			},
			func(sd *redis.Client) (int, error) {
				got, err := sd.LPopCount(ctx, "L", elems).Result()
				return len(got), err
			},
			elems,
			func(od *redis.Client) int { return int(od.LLen(ctx, "L").Val()) },
		},
		{"GETDEL",
			func(od *redis.Client) error { return od.Set(ctx, "S", strings.Repeat("v", 400_000), 0).Err() },
			func(sd *redis.Client) (int, error) {
				got, err := sd.GetDel(ctx, "S").Result()
				return len(got), err
			},
			400_000,
			func(od *redis.Client) int { return int(od.Exists(ctx, "S").Val()) },
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			owner := serve(t, nil, server.Config{}, nil)
			od := client(t, owner.addr)
			if err := tc.fill(od); err != nil {
				t.Fatal(err)
			}
			proxy := trickleProxy(t, owner.addr, 4<<10, 10*time.Millisecond)
			side := sidecarNode(t, Config{Seeds: []string{proxy}, Fallback: Local, Timeout: 150 * time.Millisecond})
			sd := redis.NewClient(&redis.Options{Addr: side.addr, MaxRetries: -1, ReadTimeout: time.Minute})
			defer sd.Close()
			start := time.Now()
			got, err := tc.run(sd)
			left := tc.check(od)
			t.Logf("%s through a sidecar: the client got %d (want %d), %v, after %v; %d left on the owner", tc.name, got, tc.want, err, time.Since(start), left)
			if got != tc.want || err != nil {
				t.Errorf("%s: the client got %d of %d (%v) and the owner kept %d: the owner applied it, the reply was lost to the fallback", tc.name, got, tc.want, err, left)
			}
		})
	}
}

// TestSidecarSentWriteNotAnsweredByFallback: a write on the decision lane
// (a script that pops a list) whose reply is slower than
// --upstream-timeout. The owner applies it; the timeout takes the owner
// down. Before, the request then got the fallback's answer (local: the
// script ran on the sidecar's empty keyspace, nil) and the popped
// elements were lost silently. Now a write that was sent answers
// UPSTREAMDOWN saying it may have been applied; the fallback answers only
// requests that never reached the owner (the next EVAL, sent while the
// owner is taken as down, gets the local answer), and a CL.THROTTLE keeps
// its documented fallback decision.
//
// hostile15 found: EVAL "return redis.call('LPOP',KEYS[1],1000000)" 1 L
// on a 1M-element list through a sidecar answered $-1 after the owner
// popped everything. Here the owner's replies pass a proxy at 4 KiB per
// 10 ms (the ~300 KB reply takes about 0.75 s against a 150 ms timeout).
func TestSidecarSentWriteNotAnsweredByFallback(t *testing.T) {
	const elems = 20_000
	owner := serve(t, nil, server.Config{}, nil)
	od := client(t, owner.addr)
	vals := make([]any, elems)
	for i := range vals {
		vals[i] = fmt.Sprintf("element%08d", i)
	}
	if err := od.RPush(ctx, "L", vals...).Err(); err != nil {
		t.Fatal(err)
	}
	proxy := trickleProxy(t, owner.addr, 4<<10, 10*time.Millisecond)
	side := sidecarNode(t, Config{Seeds: []string{proxy}, Fallback: Local, Timeout: 150 * time.Millisecond})
	sd := redis.NewClient(&redis.Options{Addr: side.addr, MaxRetries: -1, ReadTimeout: time.Minute})
	defer sd.Close()
	const script = "return redis.call('LPOP',KEYS[1],ARGV[1])"
	start := time.Now()
	got, err := sd.Eval(ctx, script, []string{"L"}, elems).Result()
	left := od.LLen(ctx, "L").Val()
	t.Logf("EVAL LPOP %d through a sidecar: %T %v after %v; %d left on the owner", elems, got, err, time.Since(start), left)
	if err == nil || !strings.HasPrefix(err.Error(), "UPSTREAMDOWN") || !strings.Contains(err.Error(), "may have been applied") {
		n := -1
		if l, ok := got.([]any); ok {
			n = len(l)
		}
		if n != elems { // the whole reply is right too; anything else hides the pop
			t.Errorf("the owner popped %d elements; the client got %T (%d elements), err %v: want them all or an UPSTREAMDOWN error",
				elems-int(left), got, n, err)
		}
	}
	// The owner is now taken as down: a write that never reaches it gets
	// the fallback's answer (local: the sidecar's own keyspace).
	if err := sd.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Errorf("SET while the owner is taken as down: %v, want the local fallback's OK", err)
	}
	if n := side.sc.stats.WritesUnknown.Load(); n != 1 {
		t.Errorf("upstream_writes_unknown %d, want 1", n)
	}
}
