package server

import (
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/celld/celld/store"
)

// testEpoch is the injected wall clock, in ns.
const testEpoch int64 = 1_700_000_000_000_000_000

// newDispatchFixture returns a Server (not listening) with an injected
// clock and a fake client whose replies accumulate in c.out, for calling
// s.dispatch directly.
func newDispatchFixture(tb testing.TB) (*Server, *client) {
	tb.Helper()
	var clock atomic.Int64
	clock.Store(testEpoch)
	s, err := New(Config{
		Clock:              func() int64 { return clock.Add(1) },
		Logger:             slog.New(slog.NewTextHandler(io.Discard, nil)),
		MetricsMaxLimiters: fixtureMaxLimiters, // decisions_test.go
	}, store.New(store.Options{}))
	if err != nil {
		tb.Fatal(err)
	}
	return s, newFakeClient(tb, s)
}

// newFakeClient is a client as the server builds one for a connection
// (newClient), over one end of a net.Pipe, not registered with the server.
func newFakeClient(tb testing.TB, s *Server) *client {
	tb.Helper()
	a, b := net.Pipe()
	tb.Cleanup(func() { a.Close(); b.Close() })
	c := newClient(s, a)
	c.out = make([]byte, 0, 512)
	return c
}

// throttleArgs: burst 1e12, 1000 per second (EI 1 ms): every call is
// allowed and writes the key with a positive TTL.
func throttleArgs(key string) [][]byte {
	return bargs("CL.THROTTLE", key, "1000000000000", "1000", "1")
}

func BenchmarkDispatchThrottle(b *testing.B) {
	s, c := newDispatchFixture(b)
	args := throttleArgs("bench:key")
	s.dispatchLookup(c, args)
	if c.out[0] != '*' {
		b.Fatalf("reply %q", c.out)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.out = c.out[:0]
		s.dispatchLookup(c, args)
	}
	b.StopTimer()
	if c.out[0] != '*' || c.out[5] != '0' {
		b.Fatalf("reply %q", c.out)
	}
}

func BenchmarkDispatchThrottleParallel(b *testing.B) {
	s, _ := newDispatchFixture(b)
	var id atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		c := newFakeClient(b, s)
		keys := make([][][]byte, 1024)
		base := id.Add(1)
		for i := range keys {
			keys[i] = throttleArgs("bench:" + strconv.FormatInt(base, 10) + ":" + strconv.Itoa(i))
		}
		i := 0
		for pb.Next() {
			c.out = c.out[:0]
			s.dispatchLookup(c, keys[i%len(keys)])
			i++
		}
	})
}

// TestDispatchThrottleZeroAllocs pins zero allocations for a whole
// CL.THROTTLE through dispatch (lookup, arity, parse, store, reply) on an
// existing key, allowed and denied.
func TestDispatchThrottleZeroAllocs(t *testing.T) {
	s, c := newDispatchFixture(t)
	args := throttleArgs("alloc:key")
	s.dispatchLookup(c, args)
	if want := "*5\r\n:0\r\n:1000000000001\r\n"; string(c.out[:len(want)]) != want {
		t.Fatalf("first reply %q", c.out)
	}
	ver0, _ := s.store.Version([]byte("alloc:key"), s.nowMs())
	n := testing.AllocsPerRun(10_000, func() {
		c.out = c.out[:0]
		s.dispatchLookup(c, args)
	})
	if n != 0 {
		t.Errorf("dispatch CL.THROTTLE (allowed, existing key) = %v allocs/op, want 0", n)
	}
	if ver, _ := s.store.Version([]byte("alloc:key"), s.nowMs()); ver == ver0 {
		t.Fatal("the measured calls did not write the key")
	}

	denied := bargs("cl.throttle", "alloc:tight", "0", "1", "3600")
	s.dispatchLookup(c, denied)
	c.out = c.out[:0]
	s.dispatchLookup(c, denied)
	if want := "*5\r\n:1\r\n"; string(c.out[:len(want)]) != want {
		t.Fatalf("second tight call not denied: %q", c.out)
	}
	n = testing.AllocsPerRun(10_000, func() {
		c.out = c.out[:0]
		s.dispatchLookup(c, denied)
	})
	if n != 0 {
		t.Errorf("dispatch CL.THROTTLE (denied) = %v allocs/op, want 0", n)
	}
}

// TestDispatchOtherCommandsAllocs reports (does not pin) the allocations of
// a few other hot commands.
func TestDispatchOtherCommandsAllocs(t *testing.T) {
	s, c := newDispatchFixture(t)
	s.dispatchLookup(c, throttleArgs("k"))
	for _, args := range [][][]byte{
		bargs("PING"),
		bargs("GET", "k"),
		bargs("EXISTS", "k"),
		bargs("PTTL", "k"),
		bargs("TYPE", "k"),
	} {
		n := testing.AllocsPerRun(1000, func() {
			c.out = c.out[:0]
			s.dispatchLookup(c, args)
		})
		t.Logf("%s: %v allocs/op", args[0], n)
	}
}
