package sidecar

import (
	"bytes"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/celld/celld/server"
	"github.com/redis/go-redis/v9"
)

// thinkingProxy forwards connections to addr; when what a client sent
// holds one of the words (any case), the owner's next bytes back are held
// for delay first: an owner silent before the first byte of a reply it is
// still computing (HGETALL of a million fields). The hand-shake and
// everything else pass at once.
func thinkingProxy(t testing.TB, addr string, delay time.Duration, words ...string) string {
	t.Helper()
	return listen(t, func(c net.Conn) {
		u, err := net.Dial("tcp", addr)
		if err != nil {
			c.Close()
			return
		}
		var hold atomic.Bool
		go func() {
			defer u.Close()
			buf := make([]byte, 64<<10)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					low := bytes.ToLower(buf[:n])
					for _, w := range words {
						if bytes.Contains(low, []byte(w)) {
							hold.Store(true)
						}
					}
					if _, werr := u.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
		go func() {
			defer c.Close()
			buf := make([]byte, 64<<10)
			for {
				n, err := u.Read(buf)
				if n > 0 {
					if hold.Swap(false) {
						time.Sleep(delay)
					}
					if _, werr := c.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
	})
}

func TestIsBulk(t *testing.T) {
	for name, want := range map[string]bool{
		"HGETALL": true, "hgetall": true, "LRange": true, "KEYS": true, "zrangestore": true, "SORT_RO": true,
		"CL.THROTTLE": false, "HGET": false, "GET": false, "SET": false, "DEL": false, "ZADD": false,
		"LLEN": false, "h": false, "": false, "HGETALLX": false, "\xff": false,
	} {
		if got := isBulkName([]byte(name)); got != want {
			t.Errorf("isBulkName(%q) = %v, want %v", name, got, want)
		}
	}
	for name, want := range map[string]int{
		"GET": laneValue, "get": laneValue, "MGet": laneValue, "GETRANGE": laneValue, "HGET": laneValue,
		"HGETALL": laneBulk, "CL.THROTTLE": laneDecision, "SET": laneDecision, "GETSET": laneValue, "LPOP": laneBulk, "INCR": laneDecision,
		"ge": laneDecision, "GETX": laneDecision, "": laneDecision,
	} {
		if got := laneKind([]byte(name)); got != want {
			t.Errorf("laneKind(%q) = %d, want %d", name, got, want)
		}
	}
	for _, n := range bulkNames {
		if laneKind([]byte(n)) != laneBulk {
			t.Errorf("bulk read %q is not in laneKind's switch", n)
		}
	}
	for _, n := range valueNames {
		if laneKind([]byte(n)) != laneValue {
			t.Errorf("value read %q is not in laneKind's switch", n)
		}
	}
	get := &server.ForwardReq{Args: [][]byte{[]byte("GET"), []byte("k")}}
	if !isBulk(get) || slowFirst(get) {
		t.Error("GET goes on the bulk lane with the decision timeout for its first byte")
	}
	unit := [][][]byte{{[]byte("HSET"), []byte("h"), []byte("f"), []byte("v")}, {[]byte("hgetall"), []byte("h")}}
	if !isBulk(&server.ForwardReq{Unit: unit}) || isBulk(&server.ForwardReq{Unit: unit[:1]}) {
		t.Error("a transaction is bulk exactly when one of its commands is")
	}
}

// TestSidecarBulkReadAllowance: an owner silent for 400 ms before the
// first byte of an HGETALL reply, against a 100 ms --upstream-timeout: the
// bulk read gets the owner's whole hash (before, the owner was taken as
// down and the local fallback answered an empty hash), nothing falls back,
// a write pipelined before the read is seen by it (one lane per owner
// within a pipeline, in order), while a decision (CL.THROTTLE) that meets
// the same silence still falls back at the 100 ms timeout; and a bulk read
// silent for longer than --upstream-bulk-timeout falls back too.
func TestSidecarBulkReadAllowance(t *testing.T) {
	const fields = 1000
	owner := serve(t, nil, server.Config{}, nil)
	od := client(t, owner.addr)
	args := make([]any, 0, 2*fields)
	for i := range fields {
		args = append(args, fmt.Sprintf("field%04d", i), "v")
	}
	if err := od.HSet(ctx, "big", args...).Err(); err != nil {
		t.Fatal(err)
	}
	proxy := thinkingProxy(t, owner.addr, 400*time.Millisecond, "hgetall", "throttle")
	side := sidecarNode(t, Config{Seeds: []string{proxy}, Fallback: Local, Timeout: 100 * time.Millisecond, BulkTimeout: 5 * time.Second})
	st := side.sc.StatsRef()
	sd := redis.NewClient(&redis.Options{Addr: side.addr, MaxRetries: -1, ReadTimeout: time.Minute})
	defer sd.Close()

	start := time.Now()
	got, err := sd.HGetAll(ctx, "big").Result()
	took := time.Since(start)
	if err != nil || len(got) != fields {
		t.Fatalf("HGETALL through the sidecar: %d fields, %v after %v; want %d fields (the fallback answered)", len(got), err, took, fields)
	}
	if took < 400*time.Millisecond {
		t.Fatalf("HGETALL answered in %v: the proxy did not hold the reply, the test tests nothing", took)
	}
	var hs *redis.IntCmd
	var hg *redis.MapStringStringCmd
	if _, err := sd.Pipelined(ctx, func(p redis.Pipeliner) error {
		hs = p.HSet(ctx, "big", "extra", "1")
		hg = p.HGetAll(ctx, "big")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if hs.Val() != 1 || len(hg.Val()) != fields+1 || hg.Val()["extra"] != "1" {
		t.Fatalf("pipeline HSET, HGETALL: %d, %d fields; want 1, %d fields with extra (the read ran before the write)", hs.Val(), len(hg.Val()), fields+1)
	}
	if n, e := st.FallbackByMode[Local].Load(), st.UpstreamErrors.Load(); n != 0 || e != 0 {
		t.Fatalf("after the bulk reads: %d fallback decisions, %d upstream errors; want 0, 0", n, e)
	}
	if side.sc.State() != "ok" {
		t.Fatalf("upstream state %q after the bulk reads, want ok", side.sc.State())
	}

	// The control: a decision meeting the same silence falls back (the
	// decision timeout still holds), answered well before the proxy lets
	// the owner's reply through.
	start = time.Now()
	if err := sd.Do(ctx, "CL.THROTTLE", "k", 1, 10, 60).Err(); err != nil {
		t.Fatal(err)
	}
	if n := st.FallbackByMode[Local].Load(); n != 1 {
		t.Fatalf("CL.THROTTLE through a silent owner: %d fallback decisions after %v, want 1", n, time.Since(start))
	}

	// A bulk read silent for longer than its own allowance falls back.
	short := sidecarNode(t, Config{Seeds: []string{proxy}, Fallback: Closed, Timeout: 100 * time.Millisecond, BulkTimeout: 200 * time.Millisecond})
	sc := redis.NewClient(&redis.Options{Addr: short.addr, MaxRetries: -1, ReadTimeout: time.Minute})
	defer sc.Close()
	if err := sc.HGetAll(ctx, "big").Err(); err == nil || !bytes.HasPrefix([]byte(err.Error()), []byte("UPSTREAMDOWN")) {
		t.Fatalf("HGETALL silent for 400 ms against a 200 ms bulk timeout: %v, want UPSTREAMDOWN", err)
	}
}
