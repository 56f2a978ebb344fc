//go:build attack

package main

// Run with: go test -tags attack -run TestProcessSidecarLargeReply .
// (add -count=1; about a minute, most of it building the 1M-field hash)
//
// It fails on main (271428d): the sidecar re-parses an owner's incomplete
// reply from its first byte after every read (sidecar.replyEnd from
// upConn.deliverAll), so a reply of N small elements costs O(N^2 / read
// size): 1M elements (14 MB) took 7.5 s of parsing in 64 KiB reads on the
// test VM, against 35 ms for one pass. The loop that parses is the event
// loop of every client on it, and the owner is declared down when the
// reply takes longer than --upstream-timeout, so one LRANGE, HGETALL or
// KEYS of a large value stalls the loop's other clients and then sends
// every key of that owner to the fallback, which (local) answers from the
// sidecar's own keyspace: here, an empty list instead of the owner's.
//
// The fix (sidecar/, owned elsewhere): make the framing resumable; keep,
// per upConn, how far the pending reply has been scanned and a stack of
// the element counts still expected at each nesting level, and continue
// from there on the next read (or, smaller: re-scan only once the buffer
// has grown by half since the last failed scan, and always when a read
// drained the socket), so a reply costs one pass.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestProcessSidecarLargeReply: HGETALL of a hash of 1M fields (a reply of
// 2M elements, 30 MB; celld's per-key bound is 1,048,576 elements) through
// a sidecar returns the owner's hash, with a 2 s upstream timeout (one
// pass over the reply takes about 70 ms on the loaded test VM), and the
// owner is never declared unreachable.
func TestProcessSidecarLargeReply(t *testing.T) {
	const n = 1_000_000
	ownerAddr := freeAddr(t)
	owner := launchAt(t, t.TempDir(), ownerAddr, "--persist", "no", "--cluster-nodes", ownerAddr)
	side := mustLaunch(t, t.TempDir(), "--persist", "no", "--upstream", ownerAddr, "--upstream-timeout", "2s")
	ctx := context.Background()
	od := redis.NewClient(&redis.Options{Addr: owner.addr, ReadTimeout: time.Minute})
	defer od.Close()
	batch := make([]any, 0, 10_000)
	for i := 0; i < n; i++ {
		batch = append(batch, fmt.Sprintf("f%07d", i), "v")
		if len(batch) == cap(batch) {
			if err := od.HSet(ctx, "big", batch...).Err(); err != nil {
				t.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	sd := redis.NewClient(&redis.Options{Addr: side.addr, ReadTimeout: 5 * time.Minute})
	defer sd.Close()
	start := time.Now()
	got, err := sd.HGetAll(ctx, "big").Result()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("HGETALL through the sidecar: %v (after %v)", err, took)
	}
	t.Logf("HGETALL of %d fields through the sidecar: %v", n, took)
	if len(got) != n || got[fmt.Sprintf("f%07d", n-1)] != "v" {
		t.Fatalf("HGETALL through the sidecar: %d fields, want %d (the fallback answered); sidecar log:\n%s", len(got), n, side.logs)
	}
	if strings.Contains(side.logs.String(), "unreachable") {
		t.Fatalf("the owner was declared unreachable during one large reply; sidecar log:\n%s", side.logs)
	}
}
