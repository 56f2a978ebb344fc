package sidecar

import (
	"net"
	"testing"
	"time"

	"github.com/celld/celld/server"
	"github.com/redis/go-redis/v9"
)

// onLoops runs fn on every event loop of sc, one after the other, and
// returns when all have run it.
func onLoops(t *testing.T, sc *Sidecar, fn func(ls *loopState)) {
	t.Helper()
	sc.mu.Lock()
	var loops []*loopState
	for _, ls := range sc.loops {
		loops = append(loops, ls)
	}
	sc.mu.Unlock()
	for _, ls := range loops {
		done := make(chan struct{})
		if !ls.l.Post(func() { fn(ls); close(done) }) {
			t.Fatal("loop stopped")
		}
		<-done
	}
}

// TestSidecarLoopTablesBounded: the per-loop table of connections by
// owner id (loopState.plain, the RESP2 database-0 fast path) holds only
// ids below loopTableMax. Owner ids are never reused, so a long-lived
// sidecar whose upstream changed addresses often (failovers to new pods,
// redirects to new nodes) reaches large ids: here the id counter is set
// to 1,048,576 as after that many owners came and went. Before, the
// first RESP2 command for such an owner grew each loop's table to
// 1,048,577 entries (8 MiB per loop and lane); now that owner takes the
// map (slow path), and is still answered by its owner.
func TestSidecarLoopTablesBounded(t *testing.T) {
	if sidecarIOLoops < 0 {
		t.Skip("loop path only")
	}
	owner := ownerCluster(t, 1)[0]
	// A plain seed that names the owner: the owner gets a fresh id.
	var seed string
	seed = hostileUpstream(t, func(args []string) string {
		if args[0] == "cluster" {
			h, p, _ := net.SplitHostPort(owner.addr)
			return slotsReply([4]string{"0", "16383", h, p})
		}
		return "-ERR unknown command\r\n"
	})
	sc, err := New(Config{Seeds: []string{seed}, Timeout: 5 * time.Second, RefreshInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	sc.mu.Lock()
	sc.nextID = 1 << 20
	sc.mu.Unlock()
	sc.Start()
	side := serve(t, nil, server.Config{}, sc)
	rdb := redis.NewClient(&redis.Options{Addr: side.addr, MaxRetries: -1, Protocol: 2})
	defer rdb.Close()
	for i := range 3 {
		if r := cmdInts(t, rdb.Do(ctx, "CL.THROTTLE", "k", 9, 10, 60)); r[1] != 10 || r[2] != int64(9-i) {
			t.Fatalf("call %d: %v, want the owner's decision (limit 10, remaining %d)", i, r, 9-i)
		}
	}
	if n := sc.StatsRef().Forwarded.Load(); n != 3 {
		t.Fatalf("forwarded %d, want 3", n)
	}
	onLoops(t, sc, func(ls *loopState) {
		for lane, plain := range ls.plain {
			if len(plain) > 4096 {
				t.Errorf("loop table (lane %d): %d entries, want at most 4096", lane, len(plain))
			}
		}
	})
}
