package sidecar

import (
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/celld/celld/server"
	"github.com/redis/go-redis/v9"
)

// trickleProxy forwards connections to addr, passing what the owner sends
// back in pieces of at most chunk bytes with pause between them: an owner
// that answers a large reply steadily but takes longer than the sidecar's
// timeout to send all of it (as a 1M-element LRANGE does at full speed).
func trickleProxy(t testing.TB, addr string, chunk int, pause time.Duration) string {
	t.Helper()
	return listen(t, func(c net.Conn) {
		u, err := net.Dial("tcp", addr)
		if err != nil {
			c.Close()
			return
		}
		go func() {
			io.Copy(u, c)
			u.Close()
		}()
		go func() {
			defer c.Close()
			buf := make([]byte, chunk)
			for {
				n, err := u.Read(buf)
				if n > 0 {
					if _, werr := c.Write(buf[:n]); werr != nil {
						return
					}
					if n == chunk {
						time.Sleep(pause)
					}
				}
				if err != nil {
					return
				}
			}
		}()
	})
}

// TestSidecarLargeReplyNotTimeout: a reply that keeps streaming in for
// several times the upstream timeout (HGETALL of a 20k-field hash, about
// 400 KB, passed at 4 KiB per 10 ms: about a second against a 150 ms
// timeout) reaches the client whole, and the owner is not taken as down:
// the timeout is silence on the connection, not the time a reply takes.
// (Before, the owner was declared unreachable after 150 ms and the
// fallback answered.)
func TestSidecarLargeReplyNotTimeout(t *testing.T) {
	const fields = 20_000
	owner := serve(t, nil, server.Config{}, nil)
	od := client(t, owner.addr)
	args := make([]any, 0, 2*fields)
	for i := range fields {
		args = append(args, fmt.Sprintf("field%06d", i), "v")
	}
	if err := od.HSet(ctx, "big", args...).Err(); err != nil {
		t.Fatal(err)
	}
	proxy := trickleProxy(t, owner.addr, 4<<10, 10*time.Millisecond)
	side := sidecarNode(t, Config{Seeds: []string{proxy}, Fallback: Closed, Timeout: 150 * time.Millisecond})
	sd := redis.NewClient(&redis.Options{Addr: side.addr, MaxRetries: -1, ReadTimeout: time.Minute})
	defer sd.Close()
	start := time.Now()
	got, err := sd.HGetAll(ctx, "big").Result()
	if err != nil {
		t.Fatalf("HGETALL through the sidecar: %v after %v (the owner was taken as down)", err, time.Since(start))
	}
	t.Logf("HGETALL of %d fields through the trickling owner: %v", fields, time.Since(start))
	if len(got) != fields || got[fmt.Sprintf("field%06d", fields-1)] != "v" {
		t.Fatalf("HGETALL through the sidecar: %d fields, want %d", len(got), fields)
	}
	// The owner still decides: it was never declared down.
	if err := sd.Do(ctx, "CL.THROTTLE", "k", 1, 10, 60).Err(); err != nil {
		t.Fatalf("CL.THROTTLE after the large reply: %v", err)
	}
	if owner.st.Len() != 2 {
		t.Fatalf("owner keys %d, want 2 (big and k): the fallback decided", owner.st.Len())
	}
}

// TestSidecarFallbackNonLimitReads: what docs/sidecar.md says a read of
// non-limit data meets while its owner is down: `local` answers from the
// sidecar's own keyspace (an empty hash, no error: the key does not exist
// there), `closed` answers UPSTREAMDOWN naming the owner.
func TestSidecarFallbackNonLimitReads(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := ln.Addr().String()
	ln.Close() // connections to it are refused: the owner is down
	local := client(t, sidecarNode(t, Config{Seeds: []string{gone}, Fallback: Local, Timeout: 150 * time.Millisecond}).addr)
	if h, err := local.HGetAll(ctx, "big").Result(); err != nil || len(h) != 0 {
		t.Fatalf("local fallback HGETALL: %v, %v; want an empty hash", h, err)
	}
	closed := client(t, sidecarNode(t, Config{Seeds: []string{gone}, Fallback: Closed, Timeout: 150 * time.Millisecond}).addr)
	err = closed.HGetAll(ctx, "big").Err()
	if err == nil || !strings.HasPrefix(err.Error(), "UPSTREAMDOWN owner "+gone) {
		t.Fatalf("closed fallback HGETALL: %v, want UPSTREAMDOWN naming the owner", err)
	}
}
