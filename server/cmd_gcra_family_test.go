package server

import (
	"strconv"
	"strings"
	"testing"

	"github.com/celld/celld/gcra"
)

// famExchange dispatches one command written as a line and returns the raw
// reply.
func famExchange(s *Server, c *client, line string) string {
	c.out = c.out[:0]
	s.dispatchLookup(c, bargs(strings.Fields(line)...))
	return string(c.out)
}

// arr5 is the RESP of five integers.
func arr5(v ...int) string {
	var b strings.Builder
	b.WriteString("*5\r\n")
	for _, x := range v {
		b.WriteString(":")
		b.WriteString(itoa(int64(x)))
		b.WriteString("\r\n")
	}
	return b.String()
}

// TestFamilyErrors: every error of spec section 2, in its order, with each
// command's own usage line; MTHROTTLE parses every group before checking
// any rate.
func TestFamilyErrors(t *testing.T) {
	s, c := newDispatchFixture(t)
	const p = "-Cell error: Store error: "
	tests := []struct{ cmd, want string }{
		{"CL.PTHROTTLE", p + "Usage: cl.pthrottle <key> <max_burst> <count per period> <period_ms> [<quantity>]\r\n"},
		{"cl.pthrottle k 1 2", p + "Usage: cl.pthrottle <key> <max_burst> <count per period> <period_ms> [<quantity>]\r\n"},
		{"cl.pthrottle k 1 2 3 4 5", p + "Usage: cl.pthrottle <key> <max_burst> <count per period> <period_ms> [<quantity>]\r\n"},
		{"CL.THROTTLE_RO k", p + "Usage: cl.throttle_ro <key> <max_burst> <count per period> <period> [<quantity>]\r\n"},
		{"cl.pthrottle_ro", p + "Usage: cl.pthrottle_ro <key> <max_burst> <count per period> <period_ms> [<quantity>]\r\n"},
		{"cl.mthrottle", p + "Usage: cl.mthrottle <key> <max_burst> <count per period> <period> <quantity> [<key> ...]\r\n"},
		{"cl.mthrottle k 1 2 3", p + "Usage: cl.mthrottle <key> <max_burst> <count per period> <period> <quantity> [<key> ...]\r\n"},
		{"cl.mthrottle k 1 2 3 4 k2", p + "Usage: cl.mthrottle <key> <max_burst> <count per period> <period> <quantity> [<key> ...]\r\n"},
		{"cl.mpthrottle k 1 2 3 4 k2 1 2 3", p + "Usage: cl.mpthrottle <key> <max_burst> <count per period> <period_ms> <quantity> [<key> ...]\r\n"},
		{"cl.pthrottle k 15 0 60 x", p + "Couldn't parse as integer: x\r\n"},
		{"cl.pthrottle k 15 0 60000", p + "Zero rates are not supported\r\n"},
		{"cl.pthrottle k 1 1000001 1", p + "Zero rates are not supported\r\n"},
		{"cl.throttle_ro k 1 1 1 1.5", p + "Couldn't parse as integer: 1.5\r\n"},
		{"cl.pthrottle_ro k 1 0 1", p + "Zero rates are not supported\r\n"},
		// all groups parsed first: group 1's zero rate loses to group 2's bad integer
		{"cl.mthrottle a 1 0 1 1 b 1 1 y 1", p + "Couldn't parse as integer: y\r\n"},
		{"cl.mthrottle a 1 1 1 1 b 1 0 1 1 c 1 1 1 z", p + "Couldn't parse as integer: z\r\n"},
		{"cl.mthrottle a 1 1 1 1 b 1 0 1 1 c 0 1 0 1", p + "Zero rates are not supported\r\n"},
		{"cl.mpthrottle a 1 1 1 q", p + "Couldn't parse as integer: q\r\n"},
	}
	for i, tt := range tests {
		if got := famExchange(s, c, tt.cmd); got != tt.want {
			t.Errorf("step %d: %s\n got %q\nwant %q", i, tt.cmd, got, tt.want)
		}
	}
	if n := s.store.Len(); n != 0 {
		t.Fatalf("errors wrote %d keys", n)
	}
	// an invalid stored value: the same error from every command, nothing written
	s.store.Load([]byte("bad"), []byte("nope"), 0)
	for _, cmd := range []string{"cl.pthrottle bad 1 1 1000", "cl.throttle_ro bad 1 1 1", "cl.pthrottle_ro bad 1 1 1",
		"cl.mthrottle ok 1 1 1 1 bad 1 1 1 1", "cl.mpthrottle bad 1 1 1 1"} {
		if got := famExchange(s, c, cmd); got != p+"invalid stored value\r\n" {
			t.Errorf("%s: %q", cmd, got)
		}
	}
	if _, ok := s.store.Get([]byte("ok"), s.nowMs()); ok {
		t.Error("a refused CL.MTHROTTLE wrote its first group")
	}
}

// TestFamilyReplies: each command against the spec's worked numbers, on
// one key shared with CL.THROTTLE.
func TestFamilyReplies(t *testing.T) {
	s, c := newDispatchFixture(t)
	steps := []struct{ cmd, want string }{
		{"cl.throttle_ro u 15 30 60", arr5(0, 16, 15, -1, 2)},
		{"cl.throttle_ro u 15 30 60", arr5(0, 16, 15, -1, 2)}, // nothing stored
		{"cl.pthrottle_ro u 15 30 60000", arr5(0, 16, 15, -1, 2000)},
		{"cl.pthrottle u 15 30 60000", arr5(0, 16, 15, -1, 2000)},
		{"cl.throttle u 15 30 60", arr5(0, 16, 14, -1, 4)}, // the same TAT, read by CL.THROTTLE
		{"cl.throttle_ro u 15 30 60 0", arr5(0, 16, 14, -1, 4)},
		{"cl.pthrottle u 15 30 60000 14", arr5(0, 16, 0, -1, 32000)},
		{"cl.pthrottle u 15 30 60000", arr5(1, 16, 0, 2000, 32000)},
		{"cl.throttle_ro u 15 30 60", arr5(1, 16, 0, 2, 32)},
		{"cl.mthrottle u 15 30 60 1", "*2\r\n" + arr5(1, 16, 0, 2, 32) + arr5(1, 16, 0, 2, 32)},
		{"cl.mpthrottle v 0 1 250 1 u 15 30 60000 0", "*3\r\n" + arr5(0, 1, 0, -1, 250) + arr5(0, 1, 0, -1, 250) + arr5(0, 16, 0, -1, 32000)},
	}
	for i, st := range steps {
		if got := famExchange(s, c, st.cmd); got != st.want {
			t.Errorf("step %d: %s\n got %q\nwant %q", i, st.cmd, got, st.want)
		}
	}
}

// TestFamilyModified: which replies count as writes for WATCH and client
// tracking.
func TestFamilyModified(t *testing.T) {
	tests := []struct {
		cmd, reply string
		want       bool
	}{
		{"cl.pthrottle", arr5(0, 1, 0, -1, 1), true},
		{"cl.pthrottle", arr5(1, 1, 0, 1, 1), false},
		{"cl.pthrottle", "-" + cellExpire + "\r\n", true},
		{"cl.pthrottle", "-" + cellZeroRate + "\r\n", false},
		{"cl.mthrottle", "*2\r\n" + arr5(0, 1, 0, -1, 1) + arr5(0, 1, 0, -1, 1), true},
		{"cl.mthrottle", "*3\r\n" + arr5(1, 1, 0, 1, 1) + arr5(0, 1, 0, -1, 1) + arr5(1, 1, 0, 1, 1), false},
		{"cl.mpthrottle", "-" + cellExpire + "\r\n", true},
		{"cl.mpthrottle", "-" + cellBadStored + "\r\n", false},
		{"cl.mpthrottle", "*2", false},
		{"cl.throttle_ro", arr5(0, 1, 0, -1, 1), false}, // not a write command at all
	}
	for i, tt := range tests {
		cmd := commands[tt.cmd]
		got := cmd.meta.write && modified(cmd, nil, []byte(tt.reply))
		if got != tt.want {
			t.Errorf("step %d: %s %q: modified = %v, want %v", i, tt.cmd, tt.reply, got, tt.want)
		}
	}
}

// TestFamilyTable: COMMAND INFO's arity, flags and key positions.
func TestFamilyTable(t *testing.T) {
	for _, tt := range []struct {
		name              string
		flags             string
		first, last, step int
	}{
		{"cl.pthrottle", "write", 1, 1, 1},
		{"cl.throttle_ro", "readonly fast", 1, 1, 1},
		{"cl.pthrottle_ro", "readonly fast", 1, 1, 1},
		{"cl.mthrottle", "write", 1, -1, 5},
		{"cl.mpthrottle", "write", 1, -1, 5},
	} {
		cmd := commands[tt.name]
		if cmd == nil {
			t.Fatalf("%s not in the table", tt.name)
		}
		if cmd.arity != -1 || strings.Join(cmd.flags, " ") != tt.flags || cmd.firstKey != tt.first || cmd.lastKey != tt.last || cmd.step != tt.step {
			t.Errorf("%s: arity %d flags %v keys %d/%d/%d", tt.name, cmd.arity, cmd.flags, cmd.firstKey, cmd.lastKey, cmd.step)
		}
	}
	if commands["cl.throttle"] == nil || commands["get"] == nil || commands["eval_ro"] == nil {
		t.Fatal("the family's entries displaced the rest of the table")
	}
}

// TestDispatchFamilyZeroAllocs pins zero allocations for a whole call of
// each family command through dispatch on existing keys, like
// TestDispatchThrottleZeroAllocs for CL.THROTTLE (MTHROTTLE with three
// groups, and with stackGroups).
func TestDispatchFamilyZeroAllocs(t *testing.T) {
	s, c := newDispatchFixture(t)
	many := []string{"CL.MTHROTTLE"}
	for i := range stackGroups {
		many = append(many, "m:"+itoa(int64(i)), "1000000000000", "1000", "1", "1")
	}
	for _, args := range [][][]byte{
		bargs("CL.PTHROTTLE", "alloc:p", "1000000000000", "1000", "1000"),
		bargs("CL.THROTTLE_RO", "alloc:p", "1000000000000", "1000", "1"),
		bargs("CL.PTHROTTLE_RO", "alloc:p", "1000000000000", "1000", "1000", "2"),
		bargs("CL.MTHROTTLE", "alloc:1", "1000000000000", "1000", "1", "1", "alloc:2", "100000", "1000", "1", "1", "a-key-longer-than-sixteen", "1000000", "1000", "60", "1"),
		bargs("CL.MPTHROTTLE", "alloc:1", "1000000000000", "1000", "1000", "1", "alloc:2", "100000", "1000", "1000", "1"),
		bargs(many...),
		bargs("CL.MTHROTTLE", "alloc:tight", "0", "1", "3600", "1", "alloc:1", "1000000000000", "1000", "1", "1"), // denied
	} {
		s.dispatchLookup(c, args)
		if c.out[0] != '*' {
			t.Fatalf("%s: %q", args[0], c.out)
		}
		n := testing.AllocsPerRun(5000, func() {
			c.out = c.out[:0]
			s.dispatchLookup(c, args)
		})
		if n != 0 {
			t.Errorf("dispatch %s (%d args) = %v allocs/op, want 0", args[0], len(args), n)
		}
	}
}

func BenchmarkDispatchPThrottle(b *testing.B) {
	benchFamilyDispatch(b, bargs("CL.PTHROTTLE", "bench:key", "1000000000000", "1000", "1000"))
}

func BenchmarkDispatchThrottleRO(b *testing.B) {
	benchFamilyDispatch(b, bargs("CL.THROTTLE_RO", "bench:key", "1000000000000", "1000", "1"))
}

func BenchmarkDispatchMThrottle3(b *testing.B) {
	benchFamilyDispatch(b, bargs("CL.MTHROTTLE", "bench:1", "1000000000000", "1000", "1", "1",
		"bench:2", "1000000000000", "1000", "1", "1", "bench:3", "1000000000000", "1000", "1", "1"))
}

func benchFamilyDispatch(b *testing.B, args [][]byte) {
	s, c := newDispatchFixture(b)
	s.dispatchLookup(c, args)
	if c.out[0] != '*' {
		b.Fatalf("reply %q", c.out)
	}
	b.ReportAllocs()
	for b.Loop() {
		c.out = c.out[:0]
		s.dispatchLookup(c, args)
	}
}

// TestAppendResult5: appendResult5 writes the bytes appendInt would, for
// every integer width and sign, after whatever b held, growing b when its
// capacity is short.
func TestAppendResult5(t *testing.T) {
	ns := []int64{-1 << 63, -1<<63 + 1, -100, -10, -9, -2, -1, 0, 1, 5, 9, 10, 11, 99, 100, 1000001, 999999, 1<<63 - 1}
	for p := int64(1); p <= 1e18; p *= 10 {
		ns = append(ns, p-1, p, p+1, -p, -p-1)
	}
	for i, n := range ns {
		m := ns[(i*7+3)%len(ns)]
		r := gcra.Result{Limited: i%2 == 0, Max: n, Remaining: m, RetryAfter: -n, ResetAfter: n / 3}
		want := []byte("prefix*5\r\n")
		want = appendInt(want, int64(i+1)%2)
		for _, v := range []int64{r.Max, r.Remaining, r.RetryAfter, r.ResetAfter} {
			want = appendInt(want, v)
		}
		for _, c := range []int{0, 7, 200} { // no room, none to spare, plenty
			b := append(make([]byte, 0, c), "prefix"...)
			if got := appendResult5(b, &r); string(got) != string(want) {
				t.Fatalf("appendResult5(%+v) = %q, want %q", r, got, want)
			}
		}
	}
}

// TestAppendOtherKeys: a pipeline batch prefetches every key of a
// CL.MTHROTTLE (and of DEL), up to maxPrefetchKeys in all.
func TestAppendOtherKeys(t *testing.T) {
	m := bargs("CL.MTHROTTLE", "a", "1", "1", "1", "1", "b", "1", "1", "1", "1", "c", "1", "1", "1", "1")
	got := appendOtherKeys(nil, commands["cl.mthrottle"], m)
	if len(got) != 2 || string(got[0]) != "b" || string(got[1]) != "c" {
		t.Errorf("CL.MTHROTTLE: %q", got)
	}
	if got := appendOtherKeys(nil, commands["cl.mthrottle"], m[:8]); len(got) != 1 || string(got[0]) != "b" {
		t.Errorf("CL.MTHROTTLE cut short: %q", got)
	}
	del := bargs("DEL", "x", "y", "z")
	if got := appendOtherKeys(nil, commands["del"], del); len(got) != 2 || string(got[1]) != "z" {
		t.Errorf("DEL: %q", got)
	}
	big := [][]byte{[]byte("DEL")}
	for range 1000 {
		big = append(big, []byte("k"))
	}
	if got := appendOtherKeys(make([][]byte, 5), commands["del"], big); len(got) != maxPrefetchKeys {
		t.Errorf("DEL with 1000 keys: %d prefetched, want the bound %d", len(got), maxPrefetchKeys)
	}
}

// TestPutReplyIntDigits: putReplyInt's digit count (from the bit length,
// one comparison) is right at both ends of every bit length and around
// every power of ten, for both signs.
func TestPutReplyIntDigits(t *testing.T) {
	var vs []int64
	for l := 1; l < 64; l++ {
		lo, hi := int64(1)<<(l-1), int64(1)<<l-1
		for d := int64(0); d < 3; d++ {
			vs = append(vs, lo+d, hi-d, -(lo + d), -(hi - d))
		}
	}
	for p := int64(1); p <= 1e18; p *= 10 {
		vs = append(vs, p-1, p, p+1, -p+1, -p, -p-1)
	}
	vs = append(vs, -1<<63, 1<<63-1)
	for _, v := range vs {
		var d [maxResultLen]byte
		n := putReplyInt(&d, 0, v)
		if want := ":" + strconv.FormatInt(v, 10) + "\r\n"; string(d[:n]) != want {
			t.Fatalf("putReplyInt(%d) = %q, want %q", v, d[:n], want)
		}
	}
}
