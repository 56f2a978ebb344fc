package server

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// trackingFixture is a dispatch fixture plus a second client (no socket:
// pushes to it are dropped) with CLIENT TRACKING on, which has read key.
func trackingFixture(tb testing.TB, key string) (*Server, *client) {
	tb.Helper()
	s, c := newDispatchFixture(tb)
	tr := &client{srv: s, id: 99, proto: 3, resp3: true, multiLen: -1, authed: true}
	for _, args := range [][]string{{"CLIENT", "TRACKING", "ON"}, {"GET", key}} {
		tr.out = tr.out[:0]
		s.dispatchLookup(tr, bargs(args...))
		if strings.HasPrefix(string(tr.out), "-") {
			tb.Fatalf("%v: %q", args, tr.out)
		}
	}
	if s.ext.trk.active.Load() != 1 || s.ext.trk.numKeys() != 1 {
		tb.Fatalf("tracking clients %d, keys %d", s.ext.trk.active.Load(), s.ext.trk.numKeys())
	}
	return s, c
}

// BenchmarkDispatchThrottleWhileTracking is BenchmarkDispatchThrottle while
// another client tracks a different key: every allowed CL.THROTTLE then
// looks its key up in the tracking table.
func BenchmarkDispatchThrottleWhileTracking(b *testing.B) {
	s, c := trackingFixture(b, "tracked")
	args := throttleArgs("bench:key")
	s.dispatchLookup(c, args)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c.out = c.out[:0]
		s.dispatchLookup(c, args)
	}
}

// A write of an untracked key while someone tracks allocates nothing; the
// tracked key is invalidated (and forgotten) by its first write.
func TestTrackingWriteAllocs(t *testing.T) {
	s, c := trackingFixture(t, "tracked")
	args := throttleArgs("other")
	s.dispatchLookup(c, args)
	if n := testing.AllocsPerRun(1000, func() {
		c.out = c.out[:0]
		s.dispatchLookup(c, args)
	}); n != 0 {
		t.Errorf("CL.THROTTLE while tracking = %v allocs/op, want 0", n)
	}
	s.dispatchLookup(c, throttleArgs("tracked"))
	if n := s.ext.trk.numKeys(); n != 0 {
		t.Errorf("tracked key still remembered after a write (%d keys)", n)
	}
}

func TestModified(t *testing.T) {
	for _, tc := range []struct {
		cmd   []string
		reply string
		want  bool
	}{
		{[]string{"CL.THROTTLE", "k", "1", "1", "1"}, "*5\r\n:0\r\n:2\r\n:1\r\n:-1\r\n:1\r\n", true},
		{[]string{"CL.THROTTLE", "k", "1", "1", "1"}, "*5\r\n:1\r\n:2\r\n:0\r\n:1\r\n:1\r\n", false},
		{[]string{"CL.THROTTLE", "k", "x", "1", "1"}, "-Cell error: Store error: Couldn't parse as integer: x\r\n", false},
		{[]string{"CL.THROTTLE", "k", "1", "1", "1"}, "-" + cellExpire + "\r\n", true},
		{[]string{"SET", "k", "1"}, "+OK\r\n", true},
		{[]string{"SET", "k", "1", "NX"}, "$-1\r\n", false},
		{[]string{"SET", "k", "1", "NX"}, "_\r\n", false},
		{[]string{"SET", "k", "1", "GET"}, "$-1\r\n", true},
		{[]string{"SET", "k", "1", "GET"}, "$1\r\n5\r\n", true},
		{[]string{"DEL", "k"}, ":0\r\n", false},
		{[]string{"DEL", "k", "j"}, ":1\r\n", true},
		{[]string{"EXPIRE", "k", "1"}, ":0\r\n", false},
		{[]string{"PERSIST", "k"}, ":1\r\n", true},
		{[]string{"FLUSHDB"}, "+OK\r\n", true},
		{[]string{"SET", "k"}, "-ERR wrong number of arguments for 'set' command\r\n", false},
	} {
		cmd := lookup(commands, []byte(tc.cmd[0]))
		if got := modified(cmd, bargs(tc.cmd...), []byte(tc.reply)); got != tc.want {
			t.Errorf("modified(%v, %q) = %v, want %v", tc.cmd, tc.reply, got, tc.want)
		}
	}
}

func TestErrorKind(t *testing.T) {
	for msg, want := range map[string]string{
		"ERR syntax error\r\n":                  "ERR",
		"Cell error: Store error: Usage\r\n":    "Cell",
		"NOAUTH Authentication required.\r\n":   "NOAUTH",
		"MOVED 3999 127.0.0.1:6381\r\n":         "MOVED",
		"WHATEVER something\r\n":                "OTHER",
		"ERR\r\n":                               "ERR",
		"LOADING celld is loading the data\r\n": "LOADING",
	} {
		if got := errorKinds[errorKind([]byte(msg))]; got != want {
			t.Errorf("errorKind(%q) = %s, want %s", msg, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { errorKind([]byte("WRONGTYPE x\r\n")) }); n != 0 {
		t.Errorf("errorKind allocates %v", n)
	}
}

// Per-command counters belong to each Server, and INFO commandstats and
// Stats agree.
func TestCommandStatsPerServer(t *testing.T) {
	s1, c1 := newDispatchFixture(t)
	s2, _ := newDispatchFixture(t)
	s1.dispatchLookup(c1, throttleArgs("a"))
	s1.dispatchLookup(c1, bargs("GET", "a"))
	s1.dispatchLookup(c1, bargs("GET", "nope"))
	s1.dispatchLookup(c1, bargs("CLIENT", "GETREDIR"))
	find := func(st Stats, name string) CommandStats {
		for _, cs := range st.Commands {
			if cs.Name == name {
				return cs
			}
		}
		return CommandStats{}
	}
	st := s1.Stats()
	if cs := find(st, "cl.throttle"); cs.Calls != 1 || cs.Sampled != 1 || cs.SampledTime <= 0 {
		t.Errorf("cl.throttle stats %+v", cs)
	}
	if cs := find(st, "client|getredir"); cs.Calls != 1 {
		t.Errorf("client|getredir stats %+v", cs)
	}
	if cs := find(st, "client"); cs.Calls != 0 {
		t.Errorf("the CLIENT container is reported: %+v", cs)
	}
	if st.KeyspaceHits != 1 || st.KeyspaceMisses != 1 || st.ThrottleAllowed != 1 || st.Keys != 1 {
		t.Errorf("hits %d misses %d allowed %d keys %d", st.KeyspaceHits, st.KeyspaceMisses, st.ThrottleAllowed, st.Keys)
	}
	if got := s2.Stats().Commands; len(got) != 0 {
		t.Errorf("second server sees the first's counters: %+v", got)
	}
	c1.out = c1.out[:0]
	s1.dispatchLookup(c1, bargs("INFO", "commandstats"))
	if !strings.Contains(string(c1.out), "cmdstat_cl.throttle:calls=1,usec=") ||
		!strings.Contains(string(c1.out), "cmdstat_client|getredir:calls=1,") {
		t.Errorf("INFO commandstats:\n%s", c1.out)
	}
}

// TestTrackingTableCountsInUsedMemory: the tracking table's estimate
// (trackedKeyCost plus 8 B per client id) is charged to the store's
// account as keys are remembered, and credited back as they are
// invalidated by a write or by FLUSHALL; and the estimate is within 25% of
// what remembering a key costs the heap.
func TestTrackingTableCountsInUsedMemory(t *testing.T) {
	s, c := trackingFixture(t, "tracked")
	tr := &client{srv: s, id: 98, proto: 3, resp3: true, multiLen: -1, authed: true}
	s.dispatchLookup(tr, bargs("CLIENT", "TRACKING", "ON"))
	one := trackedKeyCost(len("tracked")) + 8
	if got := s.store.OverheadMemory(); got != one {
		t.Fatalf("one tracked key: overhead %d, want %d", got, one)
	}
	s.dispatchLookup(tr, bargs("GET", "tracked")) // a second client id
	if got := s.store.OverheadMemory(); got != one+8 {
		t.Fatalf("one key, two clients: overhead %d, want %d", got, one+8)
	}
	c.out = c.out[:0]
	s.dispatchLookup(c, throttleArgs("tracked"))
	if got := s.store.OverheadMemory(); got != 0 {
		t.Fatalf("after the tracked key's write: overhead %d, want 0", got)
	}
	for i := range 100 {
		s.dispatchLookup(tr, bargs("GET", "k:"+strconv.Itoa(i)))
	}
	if got := s.store.OverheadMemory(); got < 100*trackedKeyCost(3) {
		t.Fatalf("100 tracked keys: overhead %d", got)
	}
	c.out = c.out[:0]
	s.dispatchLookup(c, bargs("FLUSHALL"))
	if got := s.store.OverheadMemory(); got != 0 {
		t.Fatalf("after FLUSHALL: overhead %d, want 0", got)
	}

	// The estimate against the heap.
	const n = 100_000
	for _, klen := range []int{8, 20, 40} {
		var tt trackingTable
		keys := make([][]byte, n)
		for i := range keys {
			keys[i] = fmt.Appendf(nil, "%0*d", klen, i)
		}
		var a, b runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&a)
		for i := range keys {
			tt.rememberLocked(nil, keys[i], 7)
		}
		runtime.GC()
		runtime.ReadMemStats(&b)
		runtime.KeepAlive(keys)
		measured := float64(b.HeapAlloc-a.HeapAlloc) / n
		est := float64(tt.mem) / n
		if est < measured*0.75 || est > measured*1.25 {
			t.Errorf("key of %d bytes: estimated %.0f B, measured %.0f B", klen, est, measured)
		}
		t.Logf("key of %d bytes: estimated %.0f B, measured %.0f B", klen, est, measured)
	}
}
