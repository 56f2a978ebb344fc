package server

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestLimiterName(t *testing.T) {
	long := strings.Repeat("x", maxLimiterName)
	for i, c := range []struct {
		sep, key, want string
		ok             bool
	}{
		{":", "api:user:42", "api", true},
		{":", "api", "", true}, // no separator: limiter ""
		{":", ":x", "", true},
		{":", "", "", true},
		{"::", "a:b::c", "a:b", true},
		{"/", "login/1.2.3.4", "login", true},
		{":", long + ":k", long, true},
		{":", long + "y:k", "", false}, // too long: "other"
	} {
		tb := newDecisionTable(c.sep, 10)
		got, ok := tb.limiterName([]byte(c.key))
		if string(got) != c.want || ok != c.ok {
			t.Errorf("case %d: limiterName(%q, sep %q) = %q, %v; want %q, %v", i, c.key, c.sep, got, ok, c.want, c.ok)
		}
	}
}

func TestNearLimit(t *testing.T) {
	for _, c := range []struct {
		limit, remaining int64
		want             bool
	}{
		{10, 1, true}, {10, 2, false}, // 2*5 = 10 is not < 10
		{11, 2, true}, {5, 0, true}, {5, 1, false}, {1, 0, true},
		{1 << 62, 1<<62/5 - 1, true}, {1 << 62, 1<<62/5 + 1, false},
		{0, 0, false},
	} {
		if got := nearLimit(c.limit, c.remaining); got != c.want {
			t.Errorf("nearLimit(%d, %d) = %v, want %v", c.limit, c.remaining, got, c.want)
		}
	}
}

// The table keeps at most max names however many keys arrive; later names
// count as "other", cost no allocation and grow nothing.
func TestLimiterTableBounded(t *testing.T) {
	const max = 50
	tb := newDecisionTable(":", max)
	for i := range 10 * max {
		tb.lookup(fmt.Appendf(nil, "hostile%d:k", i)).count(1, decThrottle, VerdictDenied, 1, 0)
	}
	if n := tb.n.Load(); n != max {
		t.Fatalf("names kept = %d, want %d", n, max)
	}
	rows := tb.limiterDecisions()
	if len(rows) != max+1 {
		t.Fatalf("rows = %d, want %d (+ other)", len(rows), max+1)
	}
	last := rows[len(rows)-1]
	if last.Limiter != OtherLimiter || last.Denied != 9*max {
		t.Fatalf("other = %+v, want %d denials", last, 9*max)
	}
	key := []byte("neverseen:k")
	if n := testing.AllocsPerRun(1000, func() { tb.lookup(key).count(1, decThrottle, VerdictAllowed, 10, 9) }); n != 0 {
		t.Errorf("a new name on a full table: %v allocs", n)
	}
	if sl := tb.lookup(key); sl != &tb.other {
		t.Errorf("a new name on a full table counted as %q", sl.name)
	}
	if sl := tb.lookup([]byte("hostile7:x")); sl.name != "hostile7" {
		t.Errorf("a kept name counted as %q", sl.name)
	}
	off := newDecisionTable(":", -1)
	if sl := off.lookup([]byte("api:1")); sl != &off.other || off.slots != nil {
		t.Errorf("max -1 keeps names")
	}
}

// Many goroutines adding the same and different names: each name gets one
// slot, the bound holds, no count is lost (run with -race).
func TestLimiterTableConcurrent(t *testing.T) {
	const max, workers, per = 64, 8, 2000
	tb := newDecisionTable(":", max)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				tb.lookup(fmt.Appendf(nil, "n%d:k", i%(2*max))).count(int64(w), decPThrottle, VerdictAllowed, 100, 90)
			}
		}()
	}
	wg.Wait()
	if n := tb.n.Load(); n != max {
		t.Fatalf("names = %d, want %d", n, max)
	}
	seen := map[string]bool{}
	var total int64
	for _, r := range tb.limiterDecisions() {
		if seen[r.Limiter] {
			t.Fatalf("limiter %q twice", r.Limiter)
		}
		seen[r.Limiter] = true
		total += r.Allowed
	}
	if total != workers*per {
		t.Fatalf("counted %d, want %d", total, workers*per)
	}
}

func TestShadowPatterns(t *testing.T) {
	tb := newDecisionTable(":", 10)
	if tb.shadowed([]byte("a:1")) {
		t.Fatal("shadowed with no pattern")
	}
	tb.setShadow(" new:* , login:[0-9]* ,,")
	if got := tb.shadowText(); got != "new:*,login:[0-9]*" {
		t.Fatalf("shadowText = %q", got)
	}
	for key, want := range map[string]bool{"new:1": true, "new:": true, "login:7x": true, "login:x": false, "old:1": false, "": false} {
		if got := tb.shadowed([]byte(key)); got != want {
			t.Errorf("shadowed(%q) = %v, want %v", key, got, want)
		}
	}
	tb.setShadow("")
	if tb.shadow.Load() != nil || tb.shadowed([]byte("new:1")) {
		t.Fatal("'' did not clear the patterns")
	}
}

// decisionsOf returns the counts of command dc on limiter name.
func decisionsOf(s *Server, name, command string) LimiterDecisions {
	for _, r := range s.dec.limiterDecisions() {
		if r.Limiter == name && r.Command == command {
			return r
		}
	}
	return LimiterDecisions{}
}

// Shadow mode on CL.THROTTLE: a shadowed denial is answered
// [0, limit, 0, -1, reset], writes nothing and counts as shadow_denied; an
// enforced key beside it is still denied; CONFIG SET/GET shadow.
func TestThrottleShadow(t *testing.T) {
	s, c := newDispatchFixture(t)
	run := func(args ...string) string {
		t.Helper()
		c.out = c.out[:0]
		s.dispatchLookup(c, bargs(args...))
		return string(c.out)
	}
	if got := run("CONFIG", "SET", "shadow", "new:*"); got != "+OK\r\n" {
		t.Fatalf("CONFIG SET shadow: %q", got)
	}
	if got := run("CONFIG", "GET", "shadow"); got != "*2\r\n$6\r\nshadow\r\n$5\r\nnew:*\r\n" {
		t.Fatalf("CONFIG GET shadow: %q", got)
	}
	for _, key := range []string{"new:u1", "old:u1"} {
		if got := run("CL.THROTTLE", key, "0", "1", "60"); got != "*5\r\n:0\r\n:1\r\n:0\r\n:-1\r\n:60\r\n" {
			t.Fatalf("%s first call: %q", key, got)
		}
	}
	ver0, _ := s.store.Version([]byte("new:u1"), s.nowMs())
	if got := run("CL.THROTTLE", "new:u1", "0", "1", "60"); !strings.HasPrefix(got, "*5\r\n:0\r\n:1\r\n:0\r\n:-1\r\n:") {
		t.Fatalf("shadowed denial: %q", got)
	}
	if got := run("CL.THROTTLE", "old:u1", "0", "1", "60"); !strings.HasPrefix(got, "*5\r\n:1\r\n:1\r\n:0\r\n:") {
		t.Fatalf("enforced denial: %q", got)
	}
	if ver, _ := s.store.Version([]byte("new:u1"), s.nowMs()); ver != ver0 {
		t.Fatal("a shadowed denial wrote the key")
	}
	if got := run("CL.PTHROTTLE", "new:u1", "0", "1", "60000"); !strings.HasPrefix(got, "*5\r\n:0\r\n:1\r\n:0\r\n:-1\r\n:") {
		t.Fatalf("shadowed CL.PTHROTTLE: %q", got)
	}
	if got := run("CL.THROTTLE_RO", "new:u1", "0", "1", "60"); !strings.HasPrefix(got, "*5\r\n:0\r\n:1\r\n:0\r\n:-1\r\n:") {
		t.Fatalf("shadowed peek: %q", got)
	}
	if d := decisionsOf(s, "new", "cl.throttle"); d.Allowed != 1 || d.Denied != 0 || d.ShadowDenied != 1 || d.NearLimit != 1 {
		t.Errorf("new/cl.throttle = %+v", d)
	}
	if d := decisionsOf(s, "old", "cl.throttle"); d.Allowed != 1 || d.Denied != 1 || d.ShadowDenied != 0 {
		t.Errorf("old/cl.throttle = %+v", d)
	}
	if d := decisionsOf(s, "new", "cl.pthrottle"); d.ShadowDenied != 1 {
		t.Errorf("new/cl.pthrottle = %+v", d)
	}
	if d := decisionsOf(s, "new", "cl.throttle_ro"); d.ShadowDenied != 1 {
		t.Errorf("new/cl.throttle_ro = %+v", d)
	}
	// Enforce: the same key is now denied.
	run("CONFIG", "SET", "shadow", "")
	if got := run("CL.THROTTLE", "new:u1", "0", "1", "60"); !strings.HasPrefix(got, "*5\r\n:1\r\n") {
		t.Fatalf("after CONFIG SET shadow '': %q", got)
	}
	if got := run("CONFIG", "GET", "shadow"); got != "*2\r\n$6\r\nshadow\r\n$0\r\n\r\n" {
		t.Fatalf("CONFIG GET shadow: %q", got)
	}
	info := run("INFO", "limiters")
	for _, want := range []string{"# Limiters\r\n", "limiters:2\r\n", "limiters_max:100\r\n",
		"top_denied_1:limiter=new,allowed=1,denied=1,shadow_denied=3,near_limit=1\r\n",
		"top_denied_2:limiter=old,allowed=1,denied=1,shadow_denied=0,near_limit=1\r\n"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO limiters lacks %q:\n%s", want, info)
		}
	}
	if got := run("INFO", "stats"); !strings.Contains(got, "throttle_allowed:2\r\n") || !strings.Contains(got, "throttle_denied:2\r\n") {
		t.Errorf("INFO stats throttle counts:\n%s", got)
	}
	run("CONFIG", "RESETSTAT")
	if d := decisionsOf(s, "new", "cl.throttle"); d != (LimiterDecisions{}) {
		t.Errorf("after RESETSTAT: %+v", d)
	}
}

// Shadow mode on CL.MTHROTTLE: shadowed limits take no part in the
// decision.
func TestMThrottleShadow(t *testing.T) {
	s, c := newDispatchFixture(t)
	run := func(args ...string) string {
		t.Helper()
		c.out = c.out[:0]
		s.dispatchLookup(c, bargs(args...))
		return string(c.out)
	}
	version := func(k string) uint32 {
		v, _ := s.store.Version([]byte(k), s.nowMs())
		return v
	}
	run("CONFIG", "SET", "shadow", "new:*")
	run("CL.THROTTLE", "new:x", "0", "1", "60") // new:x has no token left
	vNew, vOld := version("new:x"), version("old:x")

	// Only the shadowed group denies: answered allowed, old:x charged, new:x untouched.
	got := run("CL.MTHROTTLE", "old:x", "9", "1", "60", "1", "new:x", "0", "1", "60", "1")
	want := "*3\r\n*5\r\n:0\r\n:1\r\n:0\r\n:-1\r\n"
	if !strings.HasPrefix(got, want) || !strings.Contains(got, "*5\r\n:0\r\n:10\r\n:9\r\n:-1\r\n") {
		t.Fatalf("shadowed group: %q", got)
	}
	if version("new:x") != vNew {
		t.Error("the shadowed group's key was written")
	}
	if version("old:x") == vOld {
		t.Error("the enforced group was not charged")
	}
	if d := decisionsOf(s, "new", "cl.mthrottle"); d.ShadowDenied != 1 {
		t.Errorf("new/cl.mthrottle = %+v", d)
	}

	// An enforced group denies too: denied, bound by it, nothing written.
	run("CL.THROTTLE", "old:y", "0", "1", "60")
	vOld = version("old:x")
	got = run("CL.MTHROTTLE", "old:x", "9", "1", "60", "1", "new:x", "0", "1", "3600", "1", "old:y", "0", "1", "60", "1")
	if !strings.HasPrefix(got, "*4\r\n*5\r\n:1\r\n:1\r\n:0\r\n") {
		t.Fatalf("enforced denial: %q", got)
	}
	if version("old:x") != vOld {
		t.Error("a denied call wrote")
	}
	if d := decisionsOf(s, "old", "cl.mthrottle"); d.Denied != 1 {
		t.Errorf("old/cl.mthrottle = %+v", d)
	}

	// Every group shadowed and denied: nothing written.
	got = run("CL.MPTHROTTLE", "new:x", "0", "1", "60000", "1")
	if !strings.HasPrefix(got, "*2\r\n*5\r\n:0\r\n:1\r\n:0\r\n:-1\r\n") {
		t.Fatalf("all shadowed: %q", got)
	}
	if version("new:x") != vNew {
		t.Error("the shadowed key was written")
	}
}

// Per-limiter counting and shadow mode keep CL.THROTTLE and the family at
// zero allocations (beside TestDispatchThrottleZeroAllocs, which runs with
// the default table).
func TestDecisionsZeroAllocs(t *testing.T) {
	s, c := newDispatchFixture(t)
	s.dec.setShadow("shadow:*,other:*")
	for _, args := range [][][]byte{
		bargs("CL.THROTTLE", "api:user:1", "1000000000000", "1000", "1"),                                     // allowed
		bargs("CL.THROTTLE", "a-key-without-separator", "0", "1", "3600"),                                    // denied
		bargs("CL.THROTTLE", "shadow:user:1", "0", "1", "3600"),                                              // shadow-denied
		bargs("CL.PTHROTTLE", "shadow:user:2", "0", "1", "3600000"),                                          // shadow-denied
		bargs("CL.THROTTLE_RO", "shadow:user:1", "0", "1", "3600"),                                           // shadow-denied peek
		bargs("CL.MTHROTTLE", "api:u", "1000000000000", "1000", "1", "1", "shadow:u", "0", "1", "3600", "1"), // shadowed group
		bargs("CL.MTHROTTLE", "api:t", "0", "1", "3600", "1", "shadow:u", "0", "1", "3600", "1"),             // enforced denial
	} {
		for range 2 {
			c.out = c.out[:0]
			s.dispatchLookup(c, args)
		}
		if c.out[0] != '*' {
			t.Fatalf("%s: %q", args[1], c.out)
		}
		n := testing.AllocsPerRun(2000, func() {
			c.out = c.out[:0]
			s.dispatchLookup(c, args)
		})
		if n != 0 {
			t.Errorf("%s %s = %v allocs/op, want 0", args[0], args[1], n)
		}
	}
}

// fixtureMaxLimiters is newDispatchFixture's Config.MetricsMaxLimiters (0:
// the default table, on); the ...LimitersOff benchmarks set it to -1.
var fixtureMaxLimiters int

// limitersOff runs bench with per-limiter counting off (every decision
// "other", no lookup), for the on/off comparison in docs/limiter-metrics.md.
func limitersOff(b *testing.B, bench func(*testing.B)) {
	fixtureMaxLimiters = -1
	defer func() { fixtureMaxLimiters = 0 }()
	bench(b)
}

func BenchmarkBatchThrottleLimitersOff(b *testing.B) { limitersOff(b, BenchmarkBatchThrottle) }
func BenchmarkDispatchThrottleLimitersOff(b *testing.B) {
	limitersOff(b, BenchmarkDispatchThrottle)
}
func BenchmarkDispatchThrottleParallelLimitersOff(b *testing.B) {
	limitersOff(b, BenchmarkDispatchThrottleParallel)
}

// The family's counters are DecisionCmd(familyCmd)+1.
func TestDecisionCmdsMatchFamily(t *testing.T) {
	if decisionCmds.names[decThrottle] != "cl.throttle" {
		t.Fatal(decisionCmds.names[decThrottle])
	}
	for fc := range numFamily {
		if got := decisionCmds.names[DecisionCmd(fc)+1]; got != familyNames[fc] {
			t.Errorf("DecisionCmd(%d)+1 = %s, want %s", fc, got, familyNames[fc])
		}
	}
}

// BenchmarkDecisionCount is the per-decision cost of per-limiter counting
// alone: find the limiter of a key in a table of 100 names, add one.
func BenchmarkDecisionCount(b *testing.B) {
	tb := newDecisionTable(":", 100)
	for i := range 100 {
		tb.lookup(fmt.Appendf(nil, "lim%d:x", i))
	}
	keys := make([][]byte, 100)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "lim%d:user:%d", i, i*7919)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tb.lookup(keys[i%len(keys)]).count(1, decThrottle, VerdictAllowed, 16, 9)
	}
}

// BenchmarkDecisionCountOff is the same with counting off (every decision
// "other"): the floor.
func BenchmarkDecisionCountOff(b *testing.B) {
	tb := newDecisionTable(":", -1)
	key := []byte("lim1:user:1")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		tb.lookup(key).count(1, decThrottle, VerdictAllowed, 16, 9)
	}
}

// BenchmarkDecideSameLimiter is one connection's decisions on keys of one
// limiter (the usual case, served by the client's remembered limiter).
func BenchmarkDecideSameLimiter(b *testing.B) {
	s, c := newDispatchFixture(b)
	keys := make([][]byte, 100)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "api:user:%d", i*7919)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		s.decide(c, decThrottle, keys[i%len(keys)], false, 16, 9)
	}
}
