package compat_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/celld/celld/internal/testutil"
)

// Parity with the real redis-cell module: redis-server 7 with
// libredis_cell.so loaded, beside an in-process celld, both given the same
// random CL.THROTTLE sequences; every reply must be byte-identical.
//
// Time: both clocks are frozen and moved together. celld runs on its fake
// clock (Config.Clock); redis-server runs under libfaketime with its wall
// clock (what redis-cell reads through clock_gettime, and what Redis expires
// keys by) read from a file the test rewrites, so both decide at the very
// same nanosecond. Nothing is compared "when both ran in the same second":
// every comparison is exact.
//
// The module is not built by this repository: the test skips unless
// CELLD_REDIS_CELL_MODULE points at a built libredis_cell.so
// (docs/redis-cell-parity.md).

// parityStart is where both clocks start: a whole second, as the spec's
// examples assume nothing about it; sequences move it by random steps.
const parityStart = int64(1_700_000_000_000_000_000)

// paritySeed is the random seed: CELLD_PARITY_SEED, or the time.
func paritySeed(t *testing.T) uint64 {
	if s := os.Getenv("CELLD_PARITY_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CELLD_PARITY_SEED=%q: %v", s, err)
		}
		return v
	}
	return uint64(time.Now().UnixNano())
}

// parityPair is a celld and a redis-cell, their clocks frozen at the same
// time, one connection to each.
type parityPair struct {
	t    *testing.T
	ts   *testServer
	ref  *testutil.RedisCell
	cell *testutil.Conn
	mod  *testutil.Conn
	now  int64
	log  []string // the sequence so far, for a failure message
}

func newParityPair(t *testing.T) *parityPair {
	ref := testutil.StartRedisCell(t, parityStart)
	ts := startServer(t, withFakeClock(parityStart))
	return &parityPair{t: t, ts: ts, ref: ref, cell: testutil.Dial(t, ts.Addr), mod: testutil.Dial(t, ref.Addr), now: parityStart}
}

// setClock moves both clocks to ns.
func (p *parityPair) setClock(ns int64) {
	p.ref.SetClock(p.t, ns)
	p.ts.clock.Store(ns)
	p.now = ns
	p.log = append(p.log, fmt.Sprintf("clock %+d ns", ns-parityStart))
}

// do sends args to both and fails on the first reply that differs.
func (p *parityPair) do(args ...string) string {
	p.t.Helper()
	p.log = append(p.log, strings.Join(quoteArgs(args), " "))
	want := p.mod.Do(args...)
	got := p.cell.Do(args...)
	if p.ref.Exited() {
		p.t.Fatalf("redis-server with redis-cell died on %q:\n%s\nsequence:\n  %s", args, p.ref.Log(), strings.Join(p.log, "\n  "))
	}
	if got != want {
		p.t.Fatalf("%q at clock %+d ns:\n celld:      %q\n redis-cell: %q\nsequence:\n  %s",
			args, p.now-parityStart, got, want, strings.Join(p.log, "\n  "))
	}
	return got
}

func quoteArgs(a []string) []string {
	out := make([]string, len(a))
	for i, s := range a {
		out[i] = strconv.Quote(s)
	}
	return out
}

// TestRedisCellParityExamples: the spec's worked examples and error lines,
// each checked against the module too (what both say is asserted, so a
// module that answered differently from the spec would fail here).
func TestRedisCellParityExamples(t *testing.T) {
	p := newParityPair(t)
	steps := []struct{ cmd, want string }{
		{"CL.THROTTLE user123 15 30 60", "*5\r\n:0\r\n:16\r\n:15\r\n:-1\r\n:2\r\n"},
		{"CL.THROTTLE user123 15 30 60", "*5\r\n:0\r\n:16\r\n:14\r\n:-1\r\n:4\r\n"},
		{"PTTL user123", ":4000\r\n"},
		{"GET user123", "$19\r\n1700000004000000000\r\n"},
		{"CL.THROTTLE a 0 1 2", "*5\r\n:0\r\n:1\r\n:0\r\n:-1\r\n:2\r\n"},
		{"CL.THROTTLE a 0 1 2", "*5\r\n:1\r\n:1\r\n:0\r\n:2\r\n:2\r\n"},
		{"CL.THROTTLE b 4 5 1 5", "*5\r\n:0\r\n:5\r\n:0\r\n:-1\r\n:1\r\n"},
		{"CL.THROTTLE c 4 5 1 6", "*5\r\n:1\r\n:5\r\n:5\r\n:-1\r\n:0\r\n"},
		{"EXISTS c", ":0\r\n"},
		{"CL.THROTTLE d -1 1 1", "*5\r\n:1\r\n:0\r\n:0\r\n:-1\r\n:0\r\n"},
		{"CL.THROTTLE e 15 -30 60", "*5\r\n:1\r\n:16\r\n:0\r\n:-1\r\n:0\r\n"},
		{"CL.THROTTLE f 10 666667 1", "*5\r\n:0\r\n:11\r\n:14\r\n:-1\r\n:0\r\n"},
		{"CL.THROTTLE g 15 0 60 x", "-Cell error: Store error: Couldn't parse as integer: x\r\n"},
		{"CL.THROTTLE g 15 0 60", "-Cell error: Store error: Zero rates are not supported\r\n"},
		{"CL.THROTTLE g 15 2000000000 1", "-Cell error: Store error: Zero rates are not supported\r\n"},
		{"CL.THROTTLE g x x x x x", "-Cell error: Store error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]\r\n"},
		{"CL.THROTTLE g 1 2", "-Cell error: Store error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]\r\n"},
		{"CL.THROTTLE g +15 0015 -0 1", "-Cell error: Store error: Zero rates are not supported\r\n"},
		{"CL.THROTTLE g 1.5 1 1", "-Cell error: Store error: Couldn't parse as integer: 1.5\r\n"},
		{"CL.THROTTLE g 1 9223372036854775808 1", "-Cell error: Store error: Couldn't parse as integer: 9223372036854775808\r\n"},
	}
	for _, s := range steps {
		if got := p.do(strings.Fields(s.cmd)...); got != s.want {
			t.Fatalf("%s: both answered %q, the spec says %q", s.cmd, got, s.want)
		}
	}
	// 2 s later the "0 1 2" key passes again.
	p.setClock(p.now + 2*int64(time.Second))
	if got := p.do("CL.THROTTLE", "a", "0", "1", "2"); got != "*5\r\n:0\r\n:1\r\n:0\r\n:-1\r\n:2\r\n" {
		t.Fatalf("after 2 s: %q", got)
	}
	// A 0 ms TTL keeps the key to the end of the millisecond, and it
	// decides the calls made in it (spec section 5 said "gone at once";
	// the module says otherwise, and celld follows the module).
	p.setClock(p.now + 3*int64(time.Second) + 17*int64(time.Microsecond))
	for _, s := range []struct {
		adv  time.Duration
		cmd  string
		want string
	}{
		{0, "CL.THROTTLE z 15 30 60 0", "*5\r\n:0\r\n:16\r\n:16\r\n:-1\r\n:0\r\n"},
		{0, "EXISTS z", ":1\r\n"},
		{0, "PTTL z", ":0\r\n"},
		{time.Millisecond, "EXISTS z", ":0\r\n"},
		{0, "CL.THROTTLE p0 15 1000 1", "*5\r\n:0\r\n:16\r\n:15\r\n:-1\r\n:1\r\n"},
		{498 * time.Microsecond, "CL.THROTTLE p0 15 1000 1 0", "*5\r\n:0\r\n:16\r\n:15\r\n:-1\r\n:0\r\n"},
		{time.Microsecond, "EXISTS p0", ":1\r\n"},
		{time.Microsecond, "CL.THROTTLE p0 15 1000 1", "*5\r\n:0\r\n:16\r\n:14\r\n:-1\r\n:1\r\n"},
		{2 * time.Millisecond, "CL.THROTTLE p0 15 1000 1 0", "*5\r\n:0\r\n:16\r\n:16\r\n:-1\r\n:0\r\n"},
		{0, "CL.THROTTLE hi 0 10000 1", "*5\r\n:0\r\n:1\r\n:0\r\n:-1\r\n:0\r\n"},
		{10 * time.Microsecond, "CL.THROTTLE hi 0 10000 1", "*5\r\n:1\r\n:1\r\n:0\r\n:0\r\n:0\r\n"},
		{time.Millisecond, "CL.THROTTLE hi 0 10000 1", "*5\r\n:0\r\n:1\r\n:0\r\n:-1\r\n:0\r\n"},
	} {
		if s.adv > 0 {
			p.setClock(p.now + int64(s.adv))
		}
		if got := p.do(strings.Fields(s.cmd)...); got != s.want {
			t.Fatalf("%s: both answered %q, the test expects %q", s.cmd, got, s.want)
		}
	}
	// Errors with arguments Redis cleans: CR/LF inside, a NUL, empty.
	for _, bad := range []string{"", "1\r\n2", "a\x00b", "12\n"} {
		p.do("CL.THROTTLE", "g", "1", bad, "1")
	}
	p.do("cl.throttle")
	p.do("Cl.ThRoTtLe", "", "1", "1", "1")
}

// TestRedisCellParityRandom: random sequences over a few keys with random
// parameters (0, negative and extreme values among them), random quantities
// (absent, 0, negative, larger than the limit), malformed arguments, and
// random clock moves (0, 1 ns, around the emission interval, ms, s, hours);
// after CL.THROTTLE calls the stored value (GET), PTTL, TYPE and EXISTS are
// compared too. Seed: CELLD_PARITY_SEED to replay a failure.
func TestRedisCellParityRandom(t *testing.T) {
	seed := paritySeed(t)
	t.Logf("CELLD_PARITY_SEED=%d", seed)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	p := newParityPair(t)
	sequences, steps := 60, 80
	if testing.Short() {
		sequences = 15
	}
	calls := 0
	for seq := range sequences {
		// Each sequence has its own keys, so earlier ones do not leak in.
		keys := []string{fmt.Sprintf("s%d:a", seq), fmt.Sprintf("s%d:b", seq), fmt.Sprintf("{s%d}", seq)}
		params := randParams(rng)
		p.log = p.log[:0]
		for range steps {
			// Parameters change now and then, on the same keys (the spec:
			// the current call's parameters apply to the stored TAT).
			if rng.IntN(8) == 0 {
				params = randParams(rng)
			}
			if rng.IntN(3) == 0 {
				p.setClock(p.now + randStep(rng, params))
			}
			key := keys[rng.IntN(len(keys))]
			switch r := rng.IntN(20); {
			case r == 0:
				p.do(badThrottle(rng, key)...)
			case r == 1:
				p.do("GET", key)
				p.do("PTTL", key)
			case r == 2:
				p.do("TYPE", key)
				p.do("EXISTS", key)
			case r == 3:
				// A stored TAT the module can read (an unsigned decimal
				// integer; anything else aborts the module's Redis).
				p.do("SET", key, randTAT(rng, p.now))
			default:
				args := append([]string{"CL.THROTTLE", key}, params...)
				if q, ok := randQuantity(rng); ok {
					args = append(args, q)
				}
				p.do(args...)
				calls++
			}
		}
	}
	t.Logf("%d sequences, %d CL.THROTTLE calls, identical", sequences, calls)
}

// randParams picks max_burst, count and period, mostly ordinary, sometimes
// 0, negative or extreme.
func randParams(rng *rand.Rand) []string {
	pick := func(ordinary []int64, odd []int64, hi int64) string {
		switch r := rng.IntN(10); {
		case r < 6:
			return strconv.FormatInt(ordinary[rng.IntN(len(ordinary))], 10)
		case r < 8:
			return strconv.FormatInt(rng.Int64N(hi)+1, 10)
		default:
			return strconv.FormatInt(odd[rng.IntN(len(odd))], 10)
		}
	}
	burst := pick([]int64{0, 1, 2, 5, 15, 100}, []int64{-1, -2, -100, 1 << 40, math.MaxInt64, math.MinInt64, math.MaxInt64 - 1}, 1000)
	count := pick([]int64{1, 2, 3, 7, 30, 1000, 666667}, []int64{0, -30, -1, 2_000_000_000, 1 << 50, math.MaxInt64, math.MinInt64}, 100_000)
	period := pick([]int64{1, 2, 10, 60, 3600, 86400}, []int64{0, -60, -1, 1 << 33, 1 << 40, math.MaxInt64, math.MinInt64}, 100_000)
	return []string{burst, count, period}
}

// randQuantity: absent half the time, else 1, 0, negative, large.
func randQuantity(rng *rand.Rand) (string, bool) {
	switch r := rng.IntN(16); {
	case r < 8:
		return "", false
	case r < 11:
		return "1", true
	case r == 11:
		return "0", true
	case r == 12:
		return strconv.FormatInt(-rng.Int64N(5)-1, 10), true
	case r == 13:
		return strconv.FormatInt(rng.Int64N(200)+2, 10), true
	case r == 14:
		return strconv.FormatInt([]int64{1 << 40, math.MaxInt64, math.MinInt64, -(1 << 40)}[rng.IntN(4)], 10), true
	}
	return strconv.FormatInt(rng.Int64N(20), 10), true
}

// randStep is a clock move: 0, 1 ns, sub-ms, around one emission interval
// of params, ms, seconds, hours (never backwards: both servers read a
// wall clock that, here, does not go back).
func randStep(rng *rand.Rand, params []string) int64 {
	ei := int64(0)
	if c, err1 := strconv.ParseInt(params[1], 10, 64); err1 == nil && c > 0 {
		if per, err2 := strconv.ParseInt(params[2], 10, 64); err2 == nil && per > 0 && per < 1<<32 {
			ei = int64(float64(per) * 1e9 / float64(c))
		}
	}
	switch r := rng.IntN(10); {
	case r == 0:
		return 0
	case r == 1:
		return 1
	case r == 2:
		return rng.Int64N(int64(time.Millisecond))
	case r <= 4 && ei > 0 && ei < int64(24*time.Hour):
		return max(ei+rng.Int64N(2001)-1000, 0)
	case r <= 6:
		return rng.Int64N(int64(2 * time.Second))
	case r == 7:
		return int64(time.Millisecond) * rng.Int64N(5000)
	case r == 8:
		return int64(time.Second) * rng.Int64N(120)
	}
	return rng.Int64N(int64(3 * time.Hour))
}

// randTAT is a stored value the module parses: around now, far in the
// past or future, 0, the u64 maximum, with a leading '+' or zeros.
func randTAT(rng *rand.Rand, now int64) string {
	switch rng.IntN(6) {
	case 0:
		return strconv.FormatInt(now+rng.Int64N(int64(time.Minute)), 10)
	case 1:
		return strconv.FormatInt(now-rng.Int64N(int64(time.Minute)), 10)
	case 2:
		return "0"
	case 3:
		return "18446744073709551615"
	case 4:
		return "+" + strconv.FormatInt(now+int64(time.Second), 10)
	}
	return "000" + strconv.FormatInt(now+rng.Int64N(int64(time.Hour)), 10)
}

// badThrottle is a CL.THROTTLE the module refuses: wrong arity or an
// argument that does not parse.
func badThrottle(rng *rand.Rand, key string) []string {
	bad := []string{"x", "", "1.5", "15.0", "1e3", "0x0f", "1_5", " 15", "15 ", "+", "-",
		"9223372036854775808", "-9223372036854775809", "١٢"}
	args := []string{"CL.THROTTLE", key, "5", "10", "60", "1"}
	switch rng.IntN(3) {
	case 0: // wrong arity
		n := []int{1, 2, 3, 4, 7, 8}[rng.IntN(6)]
		out := []string{"CL.THROTTLE"}
		for i := 1; i < n; i++ {
			out = append(out, bad[rng.IntN(len(bad))])
		}
		return out
	case 1:
		args = args[:5]
	}
	args[2+rng.IntN(len(args)-2)] = bad[rng.IntN(len(bad))]
	return args
}
