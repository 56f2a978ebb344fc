package compat_test

import (
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The spec's worked examples (section 6) and the storage rules (section 5),
// as transcripts run through go-redis in RESP3 (its default: HELLO 3) and in
// RESP2. The fake clock starts at t0 and moves 1 µs before every command.

// tatAt is the decimal text GET returns for a TAT of t0 + d.
func tatAt(d time.Duration) string { return strconv.FormatUint(uint64(t0+int64(d)), 10) }

// protocols runs f once per go-redis protocol, each on a fresh server.
func protocols(t *testing.T, f func(t *testing.T, ts *testServer, send do)) {
	for _, p := range []struct {
		name string
		mods []func(*redis.Options)
	}{{"resp3", nil}, {"resp2", []func(*redis.Options){resp2}}} {
		t.Run(p.name, func(t *testing.T) {
			ts := startServer(t, withFakeClock(t0))
			f(t, ts, goRedisDo(newGoRedis(t, ts, p.mods...)))
		})
	}
}

func TestWorkedExampleTwentyCalls(t *testing.T) {
	// CL.THROTTLE user123 15 30 60: calls 1–16 → [0,16,16−i,−1,2i],
	// calls 17–20 → [1,16,0,2,32].
	var steps []step
	for i := int64(1); i <= 20; i++ {
		want := th(0, 16, 16-i, -1, 2*i)
		if i > 16 {
			want = th(1, 16, 0, 2, 32)
		}
		steps = append(steps, step{c("CL.THROTTLE user123 15 30 60"), want})
	}
	protocols(t, func(t *testing.T, ts *testServer, send do) { runSteps(t, ts, send, steps) })
}

func TestWorkedExamples(t *testing.T) {
	protocols(t, func(t *testing.T, ts *testServer, send do) {
		runSteps(t, ts, send, []step{
			// 0 1 2 twice, then again after 2 s.
			{c("CL.THROTTLE a 0 1 2"), th(0, 1, 0, -1, 2)},
			{c("CL.THROTTLE a 0 1 2"), th(1, 1, 0, 2, 2)},
			advance(2 * time.Second),
			{c("CL.THROTTLE a 0 1 2"), th(0, 1, 0, -1, 2)},

			// Quantity equal to the limit on a fresh key is allowed.
			{c("CL.THROTTLE b 4 5 1 5"), th(0, 5, 0, -1, 1)},

			// Quantity above the limit: denied, retry −1, remaining = limit,
			// nothing written.
			{c("CL.THROTTLE c 4 5 1 6"), th(1, 5, 5, -1, 0)},
			{c("EXISTS c"), int64(0)},
			{c("CL.THROTTLE c2 15 30 60 17"), th(1, 16, 16, -1, 0)},
			{c("EXISTS c2"), int64(0)},

			// Quantity 0 ("peek") on a fresh key: allowed, written with a 0 ms
			// TTL, so it is gone once this millisecond ends (redis-cell's
			// RedisModule_SetExpire(key, 0): checked against the module,
			// TestRedisCellParityRandom).
			{c("CL.THROTTLE d 15 30 60 0"), th(0, 16, 16, -1, 0)},
			{c("EXISTS d"), int64(1)},
			{c("PTTL d"), int64(0)},
			advance(time.Millisecond),
			{c("EXISTS d"), int64(0)},
			{c("GET d"), nil},

			// Negative quantity refunds: 5 1 10 three times, then −1.
			{c("CL.THROTTLE e 5 1 10"), th(0, 6, 5, -1, 10)},
			{c("CL.THROTTLE e 5 1 10"), th(0, 6, 4, -1, 20)},
			{c("CL.THROTTLE e 5 1 10"), th(0, 6, 3, -1, 30)},
			{c("CL.THROTTLE e 5 1 10 -1"), th(0, 6, 4, -1, 20)},

			// max_burst −1: limit 0, always denied.
			{c("CL.THROTTLE f -1 1 1"), th(1, 0, 0, -1, 0)},
			{c("CL.THROTTLE f -1 1 1"), th(1, 0, 0, -1, 0)},
			{c("EXISTS f"), int64(0)},

			// count < 0 xor period < 0: EI < 0, denied.
			{c("CL.THROTTLE g 15 -30 60"), th(1, 16, 0, -1, 0)},
			{c("CL.THROTTLE g 15 30 -60"), th(1, 16, 0, -1, 0)},
			// Both negative behaves like both positive.
			{c("CL.THROTTLE h 15 -30 -60"), th(0, 16, 15, -1, 2)},
			{c("CL.THROTTLE h 15 30 60"), th(0, 16, 14, -1, 4)},
		})
	})
}

func TestPeekOnExistingKey(t *testing.T) {
	protocols(t, func(t *testing.T, ts *testServer, send do) {
		runSteps(t, ts, send, []step{
			// at t0+1µs: TAT = t0+1µs+2s, TTL 2000 ms.
			{c("CL.THROTTLE k 15 30 60"), th(0, 16, 15, -1, 2)},
			{c("GET k"), tatAt(tick + 2*time.Second)},
			// A peek rewrites the same TAT, never limited.
			{c("CL.THROTTLE k 15 30 60 0"), th(0, 16, 15, -1, 2)},
			{c("CL.THROTTLE k 15 30 60 0"), th(0, 16, 15, -1, 2)},
			{c("GET k"), tatAt(tick + 2*time.Second)},
			// The TTL is rewritten from the same TAT: trunc((2 s − 3 µs)/1 ms).
			{c("PTTL k"), int64(1999)},
		})
	})
}

func TestParametersChangeBetweenCalls(t *testing.T) {
	protocols(t, func(t *testing.T, ts *testServer, send do) {
		runSteps(t, ts, send, []step{
			// TAT = now + 2 s.
			{c("CL.THROTTLE k 15 30 60"), th(0, 16, 15, -1, 2)},
			// 1 per second, burst 1: DVT 2 s, the new TAT would be 3 s − 1 µs
			// ahead: denied, retry 1 s − 1 µs → 1, reset 2 s − 1 µs → 2.
			{c("CL.THROTTLE k 1 1 1"), th(1, 2, 0, 1, 2)},
			// Back to the first parameters: the stored TAT is unchanged.
			{c("CL.THROTTLE k 15 30 60"), th(0, 16, 14, -1, 4)},
		})
	})
}

func TestStoredTATInFutureAndPast(t *testing.T) {
	protocols(t, func(t *testing.T, ts *testServer, send do) {
		runSteps(t, ts, send, []step{
			// A TAT 10 s ahead (set at t0+1µs; the call runs at t0+2µs).
			{[]any{"SET", "fut", tatAt(tick + 10*time.Second)}, "OK"},
			// new TAT = TAT + 2 s: 12 s − 1 µs ahead; remaining (32−12)/2 = 10.
			{c("CL.THROTTLE fut 15 30 60"), th(0, 16, 10, -1, 12)},
			{c("GET fut"), tatAt(tick + 12*time.Second)},
			// A TAT in the past counts as now.
			{c("SET past 5"), "OK"},
			{c("CL.THROTTLE past 15 30 60"), th(0, 16, 15, -1, 2)},
			{c("GET past"), tatAt(5*tick + 2*time.Second)},
			// "+5" reads as 5 (spec section 7): also in the past.
			{c("SET plus +5"), "OK"},
			{c("GET plus"), "+5"},
			{c("CL.THROTTLE plus 15 30 60"), th(0, 16, 15, -1, 2)},
			{c("GET plus"), tatAt(9*tick + 2*time.Second)},
		})
	})
}

func TestStoredValueAndTTL(t *testing.T) {
	protocols(t, func(t *testing.T, ts *testServer, send do) {
		runSteps(t, ts, send, []step{
			// Right after 15 30 60 (same ms): PTTL 2000.
			{c("CL.THROTTLE one 15 30 60"), th(0, 16, 15, -1, 2)},
			{c("PTTL one"), int64(2000)},
			{c("TTL one"), int64(2)},
			{c("TYPE one"), "string"},
			{c("GET one"), tatAt(tick + 2*time.Second)},
			{c("STRLEN one"), int64(19)},

			// Three calls: PTTL trunc((6 s − 2 µs)/1 ms) = 5999.
			{c("CL.THROTTLE three 15 30 60"), th(0, 16, 15, -1, 2)},
			{c("CL.THROTTLE three 15 30 60"), th(0, 16, 14, -1, 4)},
			{c("CL.THROTTLE three 15 30 60"), th(0, 16, 13, -1, 6)},
			{c("PTTL three"), int64(5999)},
			{c("GET three"), tatAt(7*tick + 6*time.Second)},
		})
	})
}

// TestTTLRules covers section 5's TTL cases: 0 ms (gone), −1 ms (no TTL) and
// below −1 ms (written without TTL, error 4).
func TestTTLRules(t *testing.T) {
	protocols(t, func(t *testing.T, ts *testServer, send do) {
		runSteps(t, ts, send, []step{
			// 1000 per second: EI = 1 ms. Quantity −1: increment −1 ms, so the
			// new TAT is 1 ms in the past and ms = trunc(−1e6/1e6) = −1: kept
			// with no TTL. remaining = (16 ms + 1 ms)/1 ms = 17; reset 0.
			{c("CL.THROTTLE m1 15 1000 1 -1"), th(0, 16, 17, -1, 0)},
			{c("EXISTS m1"), int64(1)},
			{c("PTTL m1"), int64(-1)},
			{c("TTL m1"), int64(-1)},
			{c("GET m1"), tatAt(tick - time.Millisecond)},

			// Quantity −2: ms = −2: the value is written with no TTL and the
			// call answers the expire error.
			{c("CL.THROTTLE m2 15 1000 1 -2"), errText("Cell error: Store error: Error while setting key expire")},
			{c("PTTL m2"), int64(-1)},
			{c("GET m2"), tatAt(6*tick - 2*time.Millisecond)},

			// The brief's construction: a key whose stored TAT lies far in the
			// past and that has a TTL; a big negative quantity. The past TAT
			// counts as now (t0+11µs), so new TAT = now − 5 × 2 s = now − 10 s:
			// ms = −10000 < −1. The old TTL is gone, the value written.
			{c("SET old 1000 PX 100000"), "OK"},
			{c("PTTL old"), int64(100000)},
			{c("CL.THROTTLE old 15 30 60 -5"), errText("Cell error: Store error: Error while setting key expire")},
			{c("PTTL old"), int64(-1)},
			{c("GET old"), tatAt(11*tick - 10*time.Second)},
			{c("TYPE old"), "string"},

			// Quantity 0 on a fresh key: ms = 0, the key expires at now's
			// millisecond: there to its end, gone after.
			{c("CL.THROTTLE z 15 30 60 0"), th(0, 16, 16, -1, 0)},
			{c("EXISTS z"), int64(1)},
			{c("PTTL z"), int64(0)},
			advance(time.Millisecond),
			{c("EXISTS z"), int64(0)},
			{c("PTTL z"), int64(-2)},

			// ms = 0 on an existing key: a TAT 0.499 ms ahead is rewritten
			// with a 0 ms TTL, and still decides a call in the same
			// millisecond (redis-cell answers the same, checked with the
			// module's clock frozen); after the millisecond it is forgotten.
			{c("CL.THROTTLE p0 15 1000 1"), th(0, 16, 15, -1, 1)},
			{c("PTTL p0"), int64(1)},
			advance(498 * time.Microsecond),
			{c("CL.THROTTLE p0 15 1000 1 0"), th(0, 16, 15, -1, 0)},
			{c("EXISTS p0"), int64(1)},
			{c("CL.THROTTLE p0 15 1000 1"), th(0, 16, 14, -1, 1)},
			advance(2 * time.Millisecond),
			{c("CL.THROTTLE p0 15 1000 1 0"), th(0, 16, 16, -1, 0)},
		})
	})
}

// TestFreshKeyExpiresWithItsTAT: the key lives until its TTL passes and then
// a call starts from a full bucket.
func TestFreshKeyExpiresWithItsTAT(t *testing.T) {
	protocols(t, func(t *testing.T, ts *testServer, send do) {
		runSteps(t, ts, send, []step{
			{c("CL.THROTTLE k 0 1 2"), th(0, 1, 0, -1, 2)},
			{c("PTTL k"), int64(2000)},
			advance(2*time.Second + time.Millisecond),
			{c("EXISTS k"), int64(0)},
			{c("CL.THROTTLE k 0 1 2"), th(0, 1, 0, -1, 2)},
		})
	})
}

// TestCaseAndBinaryKeys: the command name is case-insensitive, keys are
// binary-safe (NUL, 0xff, the empty key).
func TestCaseAndBinaryKeys(t *testing.T) {
	protocols(t, func(t *testing.T, ts *testServer, send do) {
		nul, ff := "a\x00b", "\xff\xfe\x80"
		runSteps(t, ts, send, []step{
			{c("Cl.ThRoTtLe k 15 30 60"), th(0, 16, 15, -1, 2)},
			{c("cl.throttle k 15 30 60"), th(0, 16, 14, -1, 4)},
			{c("CL.THROTTLE k 15 30 60"), th(0, 16, 13, -1, 6)},

			{[]any{"CL.THROTTLE", nul, 15, 30, 60}, th(0, 16, 15, -1, 2)},
			{[]any{"CL.THROTTLE", nul, 15, 30, 60}, th(0, 16, 14, -1, 4)},
			{[]any{"CL.THROTTLE", "a", 15, 30, 60}, th(0, 16, 15, -1, 2)}, // not the same key
			{[]any{"CL.THROTTLE", ff, 15, 30, 60}, th(0, 16, 15, -1, 2)},
			{[]any{"CL.THROTTLE", "", 15, 30, 60}, th(0, 16, 15, -1, 2)},
			{[]any{"CL.THROTTLE", "", 15, 30, 60}, th(0, 16, 14, -1, 4)},
			{[]any{"EXISTS", nul, ff, ""}, int64(3)},
			{[]any{"TYPE", ""}, "string"},
			{[]any{"GET", nul}, tatAt(4*tick + 4*time.Second)},
			{[]any{"DEL", ""}, int64(1)},
			{[]any{"EXISTS", ""}, int64(0)},
		})
		keys, err := send("KEYS", "*")
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, k := range keys.([]any) {
			got[k.(string)] = true
		}
		for _, k := range []string{"k", nul, "a", ff} {
			if !got[k] {
				t.Errorf("KEYS * lacks %q: %s", k, show(keys))
			}
		}
		if len(got) != 4 {
			t.Errorf("KEYS * = %s, want 4 keys", show(keys))
		}
	})
}

// TestQuantityDefaultIsOne: the 4-argument form equals quantity 1.
func TestQuantityDefaultIsOne(t *testing.T) {
	protocols(t, func(t *testing.T, ts *testServer, send do) {
		var steps []step
		for i := int64(1); i <= 3; i++ {
			steps = append(steps,
				step{c("CL.THROTTLE four 2 1 10"), th(0, 3, 3-i, -1, 10*i)},
				step{c("CL.THROTTLE five 2 1 10 1"), th(0, 3, 3-i, -1, 10*i)})
		}
		steps = append(steps,
			step{c("CL.THROTTLE four 2 1 10"), th(1, 3, 0, 10, 30)},
			step{c("CL.THROTTLE five 2 1 10 1"), th(1, 3, 0, 10, 30)})
		runSteps(t, ts, send, steps)
	})
}

// TestWideTimes: section 4's arithmetic is wide. A stored TAT can be any
// unsigned 64-bit value and now ± increment can leave int64; the reply is
// what exact integer arithmetic gives. Nothing clamps a far-future TAT.
func TestWideTimes(t *testing.T) {
	protocols(t, func(t *testing.T, ts *testServer, send do) {
		runSteps(t, ts, send, []step{
			// A TAT 100 s ahead with a 32 s bucket (set at t0+1µs, used at
			// t0+2µs): denied, retry 70 s − 1 µs → 70, reset 100 s − 1 µs
			// → 100, and it stays as it was.
			{[]any{"SET", "ahead", tatAt(tick + 100*time.Second)}, "OK"},
			{c("CL.THROTTLE ahead 15 30 60"), th(1, 16, 0, 70, 100)},
			{c("GET ahead"), tatAt(tick + 100*time.Second)},

			// The largest stored value, 2^64−1 ns (year 2554). At now =
			// t0+5µs the TAT is 16746744073.709549615 s ahead: reset
			// 16746744074; retry is 30 s less.
			{c("SET max 18446744073709551615"), "OK"},
			{c("CL.THROTTLE max 15 30 60"), th(1, 16, 0, 16746744044, 16746744074)},
			{c("GET max"), "18446744073709551615"},

			// period MaxInt64 s: EI saturates at MaxInt64 ns and now + EI
			// leaves int64. Allowed; ttl = MaxInt64 ns → 9223372037 s; the
			// stored TAT is now + MaxInt64 as an unsigned number (20 digits)
			// and the TTL MaxInt64/1e6 ms.
			{c("CL.THROTTLE big 0 1 9223372036854775807"), th(0, 1, 0, -1, 9223372037)},
			{c("GET big"), strconv.FormatUint(uint64(t0+7e3)+math.MaxInt64, 10)}, // set at t0+7µs
			{c("PTTL big"), int64(math.MaxInt64 / 1_000_000)},
			// Next call (1 µs later): the TAT is MaxInt64 − 1 µs ahead.
			{c("CL.THROTTLE big 0 1 9223372036854775807"), th(1, 1, 0, 9223372037, 9223372037)},
		})
	})
}
