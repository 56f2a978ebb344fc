package data

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/celld/celld/server"
	"github.com/celld/celld/store"
)

// A server on 127.0.0.1:0 with an injected clock, and a raw connection to
// it that writes a prebuilt pipeline and reads the replies into a fixed
// buffer, so that what allocates per call is the server's work alone.

type rawServer struct {
	conn  net.Conn
	clock *atomic.Int64
	buf   []byte
}

func startRaw(tb testing.TB) *rawServer {
	tb.Helper()
	clock := new(atomic.Int64)
	clock.Store(1_700_000_000_000_000_000)
	srv, err := server.New(server.Config{
		Addr:   "127.0.0.1:0",
		Clock:  func() int64 { return clock.Load() },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, store.New(store.Options{}))
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
	})
	return &rawServer{conn: conn, clock: clock, buf: make([]byte, 1<<20)}
}

func resp(args ...string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.Bytes()
}

// pipeline sends req (n commands) and reads until n replies of five
// integers (or errors) have arrived; it returns the replies' bytes.
func (r *rawServer) pipeline(tb testing.TB, req []byte, n int) []byte {
	if _, err := r.conn.Write(req); err != nil {
		tb.Fatal(err)
	}
	got := 0
	for replies := 0; replies < n; {
		m, err := r.conn.Read(r.buf[got:])
		if err != nil {
			tb.Fatal(err)
		}
		got += m
		replies = bytes.Count(r.buf[:got], []byte("*5\r\n")) + bytes.Count(r.buf[:got], []byte("\r\n-"))
		if got > 0 && r.buf[0] == '-' {
			replies++
		}
	}
	return r.buf[:got]
}

// callsFor builds a pipeline of n calls over keys keys.
func callsFor(cmd []string, keys, n int) []byte {
	var b bytes.Buffer
	for i := range n {
		args := append([]string{cmd[0], fmt.Sprintf("%s:%d", strings.Join(cmd[1:], ":"), i%keys)}, cmd[1:]...)
		b.Write(resp(args...))
	}
	return b.Bytes()
}

var windowCmds = map[string][]string{
	"cl.throttle":     {"CL.THROTTLE", "1000000000000", "1000", "1"},
	"cl.window-log":   {"CL.WINDOW", "100", "1000"},
	"cl.window-fixed": {"CL.WINDOW", "100", "1000", "FIXED"},
	"cl.window-slide": {"CL.WINDOW", "100", "1000", "SLIDING"},
	"cl.window-full":  {"CL.WINDOW", "100", "100000"}, // a full log of 100 entries, denied
}

// TestWindowZeroAllocsPerCall: on existing keys, CL.WINDOW in each mode
// allocates nothing per call through the whole server (parse, dispatch,
// store, reply), allowed or denied: the process's allocations per call
// stay at CL.THROTTLE's (0 plus noise from the runtime and the test's
// reader).
func TestWindowZeroAllocsPerCall(t *testing.T) {
	r := startRaw(t)
	const keys, n = 64, 2000
	for name, cmd := range windowCmds {
		req := callsFor(cmd, keys, n)
		for range 3 { // create the keys and grow every buffer
			r.clock.Add(int64(time.Millisecond))
			r.pipeline(t, req, n)
		}
		if name == "cl.window-full" { // 100 entries at distinct ms, then full
			for range 110 {
				r.clock.Add(int64(time.Millisecond))
				r.pipeline(t, callsFor(cmd, keys, keys), keys)
			}
		}
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		const rounds = 10
		for range rounds {
			r.clock.Add(int64(time.Millisecond))
			out := r.pipeline(t, req, n)
			if bytes.Contains(out, []byte("\r\n-")) || out[0] == '-' {
				t.Fatalf("%s: an error reply: %q", name, out[:min(len(out), 200)])
			}
		}
		runtime.ReadMemStats(&m1)
		per := float64(m1.Mallocs-m0.Mallocs) / (rounds * n)
		t.Logf("%s: %.4f allocations per call", name, per)
		if per > 0.02 {
			t.Errorf("%s: %.4f allocations per call on existing keys, want 0", name, per)
		}
	}
}

// BenchmarkWindowPipeline is one call per op through a real socket,
// pipelines of 16, over 1,024 keys, for CL.THROTTLE and CL.WINDOW's modes
// (the LOG row limit 100 per second; "full" is a hot key set whose logs
// hold 100 entries and whose calls are denied).
func BenchmarkWindowPipeline(b *testing.B) {
	for _, name := range []string{"cl.throttle", "cl.window-log", "cl.window-fixed", "cl.window-slide", "cl.window-full"} {
		b.Run(strings.TrimPrefix(name, "cl."), func(b *testing.B) {
			r := startRaw(b)
			cmd := windowCmds[name]
			const keys, p = 1024, 16
			req := callsFor(cmd, keys, keys)
			r.pipeline(b, req, keys)
			if name == "cl.window-full" {
				for range 110 {
					r.clock.Add(int64(time.Millisecond))
					r.pipeline(b, req, keys)
				}
			}
			batches := make([][]byte, keys/p)
			for i := range batches {
				var bb bytes.Buffer
				for j := range p {
					args := append([]string{cmd[0], fmt.Sprintf("%s:%d", strings.Join(cmd[1:], ":"), i*p+j)}, cmd[1:]...)
					bb.Write(resp(args...))
				}
				batches[i] = bb.Bytes()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += p {
				if i%keys == 0 && name != "cl.window-full" {
					r.clock.Add(int64(10 * time.Millisecond))
				}
				r.pipeline(b, batches[(i/p)%len(batches)], p)
			}
		})
	}
}

// TestWindowInBlock: a pipelined batch prefetches the window block of a
// LOG call's key (the default mode, with or without a quantity) and not of
// a FIXED or SLIDING call's, whose counters live in the key's entry. Fails
// if every CL.WINDOW asks for the block prefetch (the lock and lookup it
// costs for nothing), or if a LOG call does not.
func TestWindowInBlock(t *testing.T) {
	for _, c := range []struct {
		call string
		want bool
	}{
		{"CL.WINDOW k 10 1000", true},
		{"CL.WINDOW k 10 1000 3", true},
		{"CL.WINDOW k 10 1000 LOG", true},
		{"CL.WINDOW k 10 1000 2 log", true},
		{"CL.WINDOW k 10 1000 FIXED", false},
		{"CL.WINDOW k 10 1000 sliding", false},
		{"CL.WINDOW k 10 1000 0 Fixed", false},
		{"CL.WINDOW k 10 1000 2 SLIDING", false},
		{"CL.WINDOW k 10 1000 2 BOGUS", true}, // an error reply; no harm either way
		{"CL.WINDOW k 10 1000 2 SLOW", false}, // the first letter only: an error reply, no prefetch
		{"CL.WINDOW k 10 1000 2 fx", false},
		{"CL.WINDOW k 10 1000 2 LOGX", true},
		{"CL.WINDOW k 10 1000 -1", true},
		{"CL.WINDOW k 10 1000 2 \x00", true},
	} {
		var args [][]byte
		for _, f := range strings.Fields(c.call) {
			args = append(args, []byte(f))
		}
		if got := windowInBlock(args); got != c.want {
			t.Errorf("%s: %v, want %v", c.call, got, c.want)
		}
	}
}

// TestWindowIntMatchesParseInt: CL.WINDOW's integer parse answers as
// parseInt (Redis's rule) on every input: its fast path's lengths and
// digits, signs, leading zeros, 18-20 digits around the int64 bounds,
// junk bytes anywhere. Fails if the fast path accepts what parseInt
// rejects or parses a value differently.
func TestWindowIntMatchesParseInt(t *testing.T) {
	ins := []string{"", "0", "00", "01", "1", "9", "-0", "-1", "+1", " 1", "1 ", "1a", "a1",
		"100", "1000", "999999999999999999", "100000000000000000", "9223372036854775807",
		"9223372036854775808", "-9223372036854775808", "-9223372036854775809",
		"18446744073709551615", "99999999999999999999", "1234567890123456789", "12345678901234567/"}
	rng := uint64(1)
	next := func() uint64 { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng }
	for range 20000 {
		n := int(next()%21) + 1
		b := make([]byte, n)
		for i := range b {
			b[i] = '0' + byte(next()%10)
			if next()%50 == 0 {
				b[i] = byte(next() % 256)
			}
		}
		ins = append(ins, string(b))
	}
	for _, in := range ins {
		gv, gok := windowInt([]byte(in))
		wv, wok := parseInt([]byte(in))
		if gv != wv || gok != wok {
			t.Fatalf("%q: windowInt %d %v, parseInt %d %v", in, gv, gok, wv, wok)
		}
	}
}

// BenchmarkWindowInBlock is the parser's per-call question for CL.WINDOW
// (windowInBlock), for bench/window.sh's calls: FIXED and SLIDING with a
// quantity, LOG without a mode.
func BenchmarkWindowInBlock(b *testing.B) {
	for _, c := range []string{"CL.WINDOW wf:000000012345 100 1000 1 FIXED",
		"CL.WINDOW ws:000000012345 100 1000 1 SLIDING", "CL.WINDOW wl:000000012345 100 1000"} {
		var args [][]byte
		for _, f := range strings.Fields(c) {
			args = append(args, []byte(f))
		}
		b.Run(strings.Fields(c)[len(args)-1], func(b *testing.B) {
			n := 0
			for range b.N {
				if windowInBlock(args) {
					n++
				}
			}
			if n > b.N {
				b.Fatal(n)
			}
		})
	}
}
