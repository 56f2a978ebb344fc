package compat_test

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/celld/celld/metrics"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// The GCRA family (spec/gcra-family.md) over real sockets, through
// go-redis (RESP3) and rueidis (Do with the raw command), each test run
// with both clients.

// familyClients runs f once per client kind, each on a fresh server with a
// fake clock at t0.
func familyClients(t *testing.T, f func(t *testing.T, ts *testServer, send do)) {
	t.Run("go-redis", func(t *testing.T) {
		ts := startServer(t, withFakeClock(t0))
		f(t, ts, goRedisDo(newGoRedis(t, ts)))
	})
	t.Run("rueidis", func(t *testing.T) {
		ts := startServer(t, withFakeClock(t0))
		f(t, ts, rueidisDo(newRueidis(t, ts)))
	})
}

// sec is CL.THROTTLE's seconds for a positive duration: whole seconds, plus
// one when the fraction holds a whole ms.
func sec(ns int64) int64 {
	s := ns / 1e9
	if ns%1e9 >= 1e6 {
		s++
	}
	return s
}

// multi builds a CL.MTHROTTLE reply: the verdict, then each group.
func multi(verdict []any, groups ...[]any) []any {
	out := []any{verdict}
	for _, g := range groups {
		out = append(out, g)
	}
	return out
}

const cellErr = "Cell error: Store error: "

// TestFamilyTranscript: each command's replies and errors, and the state
// they share with CL.THROTTLE, as a transcript (1 µs between commands).
func TestFamilyTranscript(t *testing.T) {
	familyClients(t, func(t *testing.T, ts *testServer, send do) {
		runSteps(t, ts, send, []step{
			// peeks create nothing
			{c("CL.THROTTLE_RO user 15 30 60"), th(0, 16, 15, -1, 2)},
			{c("CL.PTHROTTLE_RO user 15 30 60000"), th(0, 16, 15, -1, 2000)},
			{c("EXISTS user"), int64(0)},
			// ms periods: the same TAT and TTL as CL.THROTTLE 15 30 60
			{c("CL.PTHROTTLE user 15 30 60000"), th(0, 16, 15, -1, 2000)},
			{c("PTTL user"), int64(2000)},
			{c("CL.THROTTLE user 15 30 60"), th(0, 16, 14, -1, 4)},
			{c("CL.THROTTLE_RO user 15 30 60"), th(0, 16, 13, -1, 6)},
			// 4 s used, 14 more fill the bucket exactly; 13 more then wait 26 s
			{c("CL.PTHROTTLE user 15 30 60000 14"), th(0, 16, 0, -1, 32000)},
			{c("CL.PTHROTTLE user 15 30 60000 13"), th(1, 16, 0, 26000, 32000)},
			{c("PTTL user"), int64(31999)},
			// a 250 ms window
			{c("CL.PTHROTTLE api 0 1 250"), th(0, 1, 0, -1, 250)},
			{c("CL.PTHROTTLE api 0 1 250"), th(1, 1, 0, 250, 250)},
			advance(100 * time.Millisecond),
			{c("CL.PTHROTTLE_RO api 0 1 250"), th(1, 1, 0, 150, 150)},
			// CL.MTHROTTLE: all allowed, smallest remaining binds
			{c("CL.MTHROTTLE {u}:s 9 10 1 1 {u}:m 99 1000 60 1"), multi(th(0, 10, 9, -1, 1), th(0, 10, 9, -1, 1), th(0, 100, 99, -1, 1))},
			// quota of the second group used up alone: the call is denied
			{c("CL.THROTTLE {u}:m 99 1000 60 99"), th(0, 100, 0, -1, 6)},
			{c("GET {u}:s"), strconv.FormatInt(t0+14*int64(tick)+2e8, 10)},
			{c("CL.MTHROTTLE {u}:s 9 10 1 1 {u}:m 99 1000 60 1"), multi(th(1, 100, 0, 1, 6), th(0, 10, 8, -1, 1), th(1, 100, 0, 1, 6))},
			// and {u}:s kept its quota: unchanged
			{c("GET {u}:s"), strconv.FormatInt(t0+14*int64(tick)+2e8, 10)},
			{c("CL.MPTHROTTLE {u}:s 9 10 1000 1"), multi(th(0, 10, 8, -1, 200), th(0, 10, 8, -1, 200))},
			// errors, verbatim
			{c("CL.PTHROTTLE k 1 2"), errText(cellErr + "Usage: cl.pthrottle <key> <max_burst> <count per period> <period_ms> [<quantity>]")},
			{c("CL.THROTTLE_RO k 1 2 3 4 5"), errText(cellErr + "Usage: cl.throttle_ro <key> <max_burst> <count per period> <period> [<quantity>]")},
			{c("CL.PTHROTTLE_RO"), errText(cellErr + "Usage: cl.pthrottle_ro <key> <max_burst> <count per period> <period_ms> [<quantity>]")},
			{c("CL.MTHROTTLE a 1 1 1"), errText(cellErr + "Usage: cl.mthrottle <key> <max_burst> <count per period> <period> <quantity> [<key> ...]")},
			{c("CL.MPTHROTTLE a 1 1 1 1 b"), errText(cellErr + "Usage: cl.mpthrottle <key> <max_burst> <count per period> <period_ms> <quantity> [<key> ...]")},
			{c("CL.MTHROTTLE a 1 0 1 1 b 1 1 x 1"), errText(cellErr + "Couldn't parse as integer: x")},
			{c("CL.MTHROTTLE a 1 1 1 1 b 1 0 1 1"), errText(cellErr + "Zero rates are not supported")},
			{c("CL.PTHROTTLE k 1 1000001 1"), errText(cellErr + "Zero rates are not supported")},
			{c("EXISTS a b k"), int64(0)},
		})
	})
}

// TestFamilyPThrottleDifferential: on random arguments, CL.PTHROTTLE with
// p×1000 ms and CL.THROTTLE with p s leave the same value and PTTL on twin
// keys, and decide alike.
func TestFamilyPThrottleDifferential(t *testing.T) {
	familyClients(t, func(t *testing.T, ts *testServer, send do) {
		rng := rand.New(rand.NewPCG(1, 1000))
		for i := range 300 {
			b, n, p, q := rng.Int64N(20)-1, rng.Int64N(50)+1, rng.Int64N(120)+1, rng.Int64N(4)
			if i%3 == 0 {
				ts.Advance(time.Duration(rng.Int64N(3e9)))
			}
			k := "k" + strconv.Itoa(rng.IntN(4))
			rs, err1 := send("CL.THROTTLE", "s:"+k, b, n, p, q)
			rm, err2 := send("CL.PTHROTTLE", "m:"+k, b, n, p*1000, q)
			if err1 != nil || err2 != nil {
				t.Fatal(err1, err2)
			}
			as, am := rs.([]any), rm.([]any)
			if as[0] != am[0] || as[2] != am[2] || (as[3] == int64(-1)) != (am[3] == int64(-1)) {
				t.Fatalf("call %d (%d %d %d q %d): THROTTLE %v, PTHROTTLE %v", i, b, n, p, q, as, am)
			}
			vs, _ := send("GET", "s:"+k)
			vm, _ := send("GET", "m:"+k)
			ps, _ := send("PTTL", "s:"+k)
			pm, _ := send("PTTL", "m:"+k)
			if vs != vm || ps != pm {
				t.Fatalf("call %d: THROTTLE left %v (PTTL %v), PTHROTTLE %v (PTTL %v)", i, vs, ps, vm, pm)
			}
		}
	})
}

// TestFamilyPipelines: 250 CL.PTHROTTLE and 20 CL.MTHROTTLE at one instant
// in one pipeline; every reply in order; the denied CL.MTHROTTLE calls
// use up nothing of the group that would have passed.
func TestFamilyPipelines(t *testing.T) {
	var cmds [][]any
	var want []any
	for i := int64(1); i <= 250; i++ {
		cmds = append(cmds, []any{"CL.PTHROTTLE", "p", "199", "100", "1000"}) // EI 10 ms, limit 200
		if i <= 200 {
			want = append(want, th(0, 200, 200-i, -1, 10*i))
		} else {
			want = append(want, th(1, 200, 0, 10, 2000))
		}
	}
	for i := int64(1); i <= 20; i++ {
		cmds = append(cmds, []any{"CL.MTHROTTLE", "m1", "9", "10", "1", "1", "m2", "99", "100", "60", "1"}) // EI 100 ms / 600 ms
		if i <= 10 {
			g1 := th(0, 10, 10-i, -1, sec(i*1e8))
			want = append(want, multi(g1, g1, th(0, 100, 100-i, -1, sec(i*6e8))))
		} else {
			g1 := th(1, 10, 0, 1, 1)
			want = append(want, multi(g1, g1, th(0, 100, 89, -1, 7)))
		}
	}
	cmds = append(cmds, []any{"GET", "m2"})
	want = append(want, strconv.FormatInt(t0+6e9, 10))
	// the same limits in ms (CL.MPTHROTTLE), and peeks at what is stored
	for i := int64(1); i <= 12; i++ {
		cmds = append(cmds, []any{"CL.MPTHROTTLE", "mp1", "9", "10", "1000", "1", "mp2", "99", "100", "60000", "1"})
		if i <= 10 {
			g1 := th(0, 10, 10-i, -1, 100*i)
			want = append(want, multi(g1, g1, th(0, 100, 100-i, -1, 600*i)))
		} else {
			g1 := th(1, 10, 0, 100, 1000)
			want = append(want, multi(g1, g1, th(0, 100, 89, -1, 6600)))
		}
	}
	cmds = append(cmds,
		[]any{"CL.THROTTLE_RO", "m1", "9", "10", "1"},         // used up by the CL.MTHROTTLEs
		[]any{"CL.PTHROTTLE_RO", "p", "199", "100", "1000"},   // used up by the CL.PTHROTTLEs
		[]any{"CL.PTHROTTLE_RO", "mp2", "99", "100", "60000"}, // 10 of 100 used
		[]any{"CL.THROTTLE_RO", "fresh", "9", "10", "1"},
		[]any{"EXISTS", "fresh"}) // a peek creates nothing
	want = append(want, th(1, 10, 0, 1, 1), th(1, 200, 0, 10, 2000), th(0, 100, 89, -1, 6600),
		th(0, 10, 9, -1, 1), int64(0))
	check := func(t *testing.T, got []any) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%d replies, want %d", len(got), len(want))
		}
		for i := range want {
			if fmt.Sprint(got[i]) != fmt.Sprint(want[i]) {
				t.Fatalf("reply %d to %v: %s, want %s", i, cmds[i], show(got[i]), show(want[i]))
			}
		}
	}
	t.Run("go-redis", func(t *testing.T) {
		ts := startServer(t, withFakeClock(t0))
		rdb := newGoRedis(t, ts)
		pipe := rdb.Pipeline()
		res := make([]*redis.Cmd, len(cmds))
		for i, cmd := range cmds {
			res[i] = pipe.Do(ctx, cmd...)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		got := make([]any, len(res))
		for i, r := range res {
			got[i], _ = goRedisReply(r.Result())
		}
		check(t, got)
	})
	t.Run("rueidis", func(t *testing.T) {
		ts := startServer(t, withFakeClock(t0))
		cl := newRueidis(t, ts)
		built := make(rueidis.Commands, len(cmds))
		for i, cmd := range cmds {
			s := make([]string, len(cmd))
			for j, a := range cmd {
				s[j] = argString(a)
			}
			built[i] = cl.B().Arbitrary(s...).Build()
		}
		got := make([]any, len(cmds))
		for i, r := range cl.DoMulti(ctx, built...) {
			got[i], _ = rueidisReply(r.ToAny())
		}
		check(t, got)
	})
}

// TestFamilyMultiExec: inside MULTI/EXEC a denied CL.MTHROTTLE writes
// nothing and does not abort the transaction; the other commands run.
func TestFamilyMultiExec(t *testing.T) {
	setup := [][]any{{"CL.THROTTLE", "tight", "0", "1", "60"}}
	tx := [][]any{
		{"CL.MTHROTTLE", "free", "9", "10", "1", "1", "tight", "0", "1", "60", "1"},
		{"CL.THROTTLE_RO", "free", "9", "10", "1"},
		{"CL.PTHROTTLE", "free", "9", "10", "1000"},
		{"CL.PTHROTTLE_RO", "free", "9", "10", "1000"},
		{"CL.MPTHROTTLE", "free", "9", "10", "1000", "1", "tight", "0", "1", "60000", "1"},
		{"CL.MPTHROTTLE", "free", "9", "10", "1000", "1"},
		{"EXISTS", "free"},
	}
	want := []any{
		multi(th(1, 1, 0, 60, 60), th(0, 10, 9, -1, 1), th(1, 1, 0, 60, 60)),
		th(0, 10, 9, -1, 1),
		th(0, 10, 9, -1, 100),
		th(0, 10, 8, -1, 200), // what a second CL.PTHROTTLE would answer
		multi(th(1, 1, 0, 60000, 60000), th(0, 10, 8, -1, 200), th(1, 1, 0, 60000, 60000)),
		multi(th(0, 10, 8, -1, 200), th(0, 10, 8, -1, 200)), // the denial wrote nothing
		int64(1),
	}
	t.Run("go-redis", func(t *testing.T) {
		ts := startServer(t, withFakeClock(t0))
		rdb := newGoRedis(t, ts)
		for _, s := range setup {
			rdb.Do(ctx, s...)
		}
		var res []*redis.Cmd
		_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			for _, cmd := range tx {
				res = append(res, p.Do(ctx, cmd...))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if got, _ := goRedisReply(r.Result()); fmt.Sprint(got) != fmt.Sprint(want[i]) {
				t.Errorf("EXEC reply %d: %s, want %s", i, show(got), show(want[i]))
			}
		}
	})
	t.Run("rueidis", func(t *testing.T) {
		ts := startServer(t, withFakeClock(t0))
		cl := newRueidis(t, ts)
		send := rueidisDo(cl)
		for _, s := range setup {
			send(s...)
		}
		cmds := rueidis.Commands{cl.B().Multi().Build()}
		for _, cmd := range tx {
			s := make([]string, len(cmd))
			for j, a := range cmd {
				s[j] = argString(a)
			}
			cmds = append(cmds, cl.B().Arbitrary(s...).Build())
		}
		cmds = append(cmds, cl.B().Exec().Build())
		rs := cl.DoMulti(ctx, cmds...)
		got, err := rueidisReply(rs[len(rs)-1].ToAny())
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("EXEC: %s, want %s", show(got), show(want))
		}
	})
}

// TestFamilyScripts: the family through redis.call; the peeks run in
// EVAL_RO, the writes are refused there.
func TestFamilyScripts(t *testing.T) {
	familyClients(t, func(t *testing.T, ts *testServer, raw do) {
		// rueidis drops an error's "ERR " prefix; compare without it
		send := func(args ...any) (any, error) {
			v, err := raw(args...)
			if e, ok := v.(errText); ok {
				v = errText(strings.TrimPrefix(string(e), "ERR "))
			}
			return v, err
		}
		const roErr = "Write commands are not allowed from read-only scripts."
		runSteps(t, ts, send, []step{
			{[]any{"EVAL_RO", "return redis.call('CL.THROTTLE_RO', KEYS[1], 4, 5, 1)", "1", "s"}, th(0, 5, 4, -1, 1)},
			{[]any{"EVAL_RO", "return redis.call('CL.PTHROTTLE_RO', KEYS[1], 4, 5, 1000)", "1", "s"}, th(0, 5, 4, -1, 200)},
			{[]any{"EVAL_RO", "return redis.pcall('CL.PTHROTTLE', KEYS[1], 4, 5, 1000)", "1", "s"}, errText(roErr)},
			{[]any{"EVAL_RO", "return redis.pcall('CL.MTHROTTLE', KEYS[1], 4, 5, 1, 1)", "1", "s"}, errText(roErr)},
			{[]any{"EVAL", "return redis.call('CL.MTHROTTLE', KEYS[1], 4, 5, 1, 1, KEYS[2], 0, 1, 1, 1)", "2", "s", "t"},
				multi(th(0, 1, 0, -1, 1), th(0, 5, 4, -1, 1), th(0, 1, 0, -1, 1))},
			{[]any{"EVAL", "return redis.call('CL.PTHROTTLE', KEYS[1], 4, 5, 1000)", "1", "s"}, th(0, 5, 3, -1, 400)},
			{[]any{"EVAL_RO", "return redis.call('CL.THROTTLE_RO', KEYS[1], 4, 5, 1)", "1", "s"}, th(0, 5, 2, -1, 1)},
			{[]any{"EVAL_RO", "return redis.pcall('CL.MPTHROTTLE', KEYS[1], 4, 5, 1000, 1)", "1", "s"}, errText(roErr)},
			{[]any{"EVAL", "return redis.call('CL.MPTHROTTLE', KEYS[1], 4, 5, 1000, 1, KEYS[2], 0, 1, 1000, 1)", "2", "s", "t"},
				multi(th(1, 1, 0, 1000, 1000), th(0, 5, 2, -1, 600), th(1, 1, 0, 1000, 1000))}, // t is used up: nothing written
			{[]any{"EVAL_RO", "return redis.call('CL.PTHROTTLE_RO', KEYS[1], 4, 5, 1000)", "1", "s"}, th(0, 5, 2, -1, 600)},
		})
	})
}

// TestFamilyWatch: a peek and a denied CL.MTHROTTLE by another client do
// not abort a watcher's EXEC; an allowed CL.MTHROTTLE naming the key does.
func TestFamilyWatch(t *testing.T) {
	others := []struct {
		cmd   []any
		abort bool
	}{
		{[]any{"CL.THROTTLE_RO", "w", "0", "1", "60"}, false},
		{[]any{"CL.PTHROTTLE_RO", "w", "0", "1", "60000", "0"}, false},
		{[]any{"CL.MTHROTTLE", "x", "9", "10", "1", "1", "w", "0", "1", "60", "1"}, false}, // w is used up: denied
		{[]any{"CL.MTHROTTLE", "x", "9", "10", "1", "1", "w", "0", "1", "60", "0"}, true},  // allowed: writes w
		{[]any{"CL.MPTHROTTLE", "w", "0", "1", "60000", "0"}, true},                        // the same TAT, rewritten
		{[]any{"CL.PTHROTTLE", "w", "0", "1", "60000", "-1"}, true},                        // a refund
		{[]any{"CL.PTHROTTLE", "w", "9", "1", "1", "-1"}, false},                           // EI 1 ms: denied
	}
	t.Run("go-redis", func(t *testing.T) {
		ts := startServer(t, withFakeClock(t0))
		rdb, other := newGoRedis(t, ts), newGoRedis(t, ts)
		for i, o := range others {
			rdb.Do(ctx, "CL.THROTTLE", "w", "0", "1", "60") // w is used up
			err := rdb.Watch(ctx, func(tx *redis.Tx) error {
				if err := other.Do(ctx, o.cmd...).Err(); err != nil {
					return err
				}
				_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error { p.Ping(ctx); return nil })
				return err
			}, "w")
			if aborted := err == redis.TxFailedErr; aborted != o.abort || (err != nil && !aborted) {
				t.Errorf("step %d: %v: EXEC error %v, want aborted=%v", i, o.cmd, err, o.abort)
			}
			ts.Advance(time.Hour)
		}
	})
	t.Run("rueidis", func(t *testing.T) {
		ts := startServer(t, withFakeClock(t0))
		cl, other := newRueidis(t, ts), newRueidis(t, ts)
		for i, o := range others {
			cl.Do(ctx, cl.B().Arbitrary("CL.THROTTLE", "w", "0", "1", "60").Build())
			err := cl.Dedicated(func(dc rueidis.DedicatedClient) error {
				if err := dc.Do(ctx, dc.B().Watch().Key("w").Build()).Error(); err != nil {
					return err
				}
				if _, err := rueidisDo(other)(o.cmd...); err != nil {
					return err
				}
				rs := dc.DoMulti(ctx, dc.B().Multi().Build(), dc.B().Ping().Build(), dc.B().Exec().Build())
				err := rs[2].Error()
				if rueidis.IsRedisNil(err) {
					if !o.abort {
						return fmt.Errorf("EXEC aborted")
					}
					return nil
				}
				if err == nil && o.abort {
					return fmt.Errorf("EXEC ran; want aborted")
				}
				return err
			})
			if err != nil {
				t.Errorf("step %d: %v: %v", i, o.cmd, err)
			}
			ts.Advance(time.Hour)
		}
	})
}

// TestFamilyTracking: with CLIENT TRACKING, an allowed CL.MTHROTTLE (sent
// by go-redis or rueidis) invalidates each key it writes; a denied one and
// the peeks invalidate nothing; rueidis's client-side cache sees the new
// value.
func TestFamilyTracking(t *testing.T) {
	ts := startServer(t)
	rc := resp3Conn(t, ts)
	if got := rc.exchange(t, "CLIENT", "TRACKING", "on"); got != "+OK\r\n" {
		t.Fatalf("CLIENT TRACKING on: %q", got)
	}
	writers := map[string]do{"go-redis": goRedisDo(newGoRedis(t, ts)), "rueidis": rueidisDo(newRueidis(t, ts))}
	for _, name := range []string{"go-redis", "rueidis"} {
		w := writers[name]
		a, b := name+":a", name+":b"
		w("CL.THROTTLE", b, "0", "1", "3600") // b is used up
		rc.exchange(t, "GET", a)
		rc.exchange(t, "GET", b)
		for _, cmd := range [][]any{
			{"CL.THROTTLE_RO", a, "9", "10", "1"},
			{"CL.PTHROTTLE_RO", b, "9", "10", "1000"},
			{"CL.MTHROTTLE", a, "9", "10", "1", "1", b, "0", "1", "3600", "1"}, // denied
		} {
			if _, err := w(cmd...); err != nil {
				t.Fatal(err)
			}
		}
		expectNoPush(t, rc)
		if _, err := w("CL.MTHROTTLE", a, "9", "10", "1", "1", b, "0", "1", "3600", "0"); err != nil { // allowed
			t.Fatal(err)
		}
		for _, k := range []string{a, b} {
			if got := readValue(t, rc); got != push(k) {
				t.Fatalf("%s: got %q, want the invalidation of %s", name, got, k)
			}
		}
		expectNoPush(t, rc)
		// the ms commands the same way: a denial is silent, writes
		// invalidate each key written
		rc.exchange(t, "GET", a)
		rc.exchange(t, "GET", b)
		if _, err := w("CL.MPTHROTTLE", a, "9", "10", "1000", "1", b, "0", "1", "3600000", "1"); err != nil { // denied
			t.Fatal(err)
		}
		expectNoPush(t, rc)
		if _, err := w("CL.PTHROTTLE", a, "9", "10", "1000"); err != nil {
			t.Fatal(err)
		}
		if got := readValue(t, rc); got != push(a) {
			t.Fatalf("%s: CL.PTHROTTLE: got %q, want the invalidation of %s", name, got, a)
		}
		rc.exchange(t, "GET", a)
		if _, err := w("CL.MPTHROTTLE", a, "9", "10", "1000", "1", b, "0", "1", "3600000", "0"); err != nil { // allowed
			t.Fatal(err)
		}
		for _, k := range []string{a, b} {
			if got := readValue(t, rc); got != push(k) {
				t.Fatalf("%s: CL.MPTHROTTLE: got %q, want the invalidation of %s", name, got, k)
			}
		}
		expectNoPush(t, rc)
	}
	// a peek is a read: the tracking client is told when the key it peeked
	// at is written by someone else
	rc.exchange(t, "CL.THROTTLE_RO", "peeked", "9", "10", "1")
	rc.exchange(t, "CL.PTHROTTLE_RO", "peeked:ms", "9", "10", "1000")
	expectNoPush(t, rc)
	writers["go-redis"]("CL.MTHROTTLE", "peeked", "9", "10", "1", "1")
	writers["rueidis"]("CL.PTHROTTLE", "peeked:ms", "9", "10", "1000")
	for _, k := range []string{"peeked", "peeked:ms"} {
		if got := readValue(t, rc); got != push(k) {
			t.Fatalf("after a peek at %s and a write: got %q, want its invalidation", k, got)
		}
	}

	cached := newRueidisCached(t, ts)
	w := newRueidis(t, ts)
	get := func() string {
		v, err := cached.DoCache(ctx, cached.B().Get().Key("c").Cache(), time.Minute).ToString()
		if err != nil && !rueidis.IsRedisNil(err) {
			t.Fatal(err)
		}
		return v
	}
	get()
	w.Do(ctx, w.B().Arbitrary("CL.MPTHROTTLE", "c", "9", "10", "1000", "1").Build())
	deadline := time.Now().Add(30 * time.Second)
	for get() == "" {
		if time.Now().After(deadline) {
			t.Fatal("rueidis's cache kept the key's old (missing) value after CL.MPTHROTTLE wrote it")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestFamilyCluster: CL.MTHROTTLE's keys must share a slot (CROSSSLOT
// otherwise); with hash tags, go-redis's and rueidis's cluster clients
// route every family command to its owner.
func TestFamilyCluster(t *testing.T) {
	nodes := startClusterNodes(t, 3)
	const crossSlot = "CROSSSLOT Keys in request don't hash to the same slot"
	t.Run("go-redis", func(t *testing.T) {
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{nodes[0].Addr}})
		t.Cleanup(func() { rdb.Close() })
		send := goRedisDo(rdb)
		for u := range 20 {
			tag := "{g" + strconv.Itoa(u) + "}"
			// (periods of 60 s: the wall clock moves between two calls, by
			// more than 100 ms on a loaded machine, and the replies must not
			// depend on it)
			got, err := send("CL.MTHROTTLE", tag+":s", "9", "10", "60", "1", tag+":ip", "99", "100", "60", "1")
			if err != nil || fmt.Sprint(got) != fmt.Sprint(multi(th(0, 10, 9, -1, 6), th(0, 10, 9, -1, 6), th(0, 100, 99, -1, 1))) {
				t.Fatalf("CL.MTHROTTLE %s: %v %v", tag, show(got), err)
			}
			if got, _ := send("CL.PTHROTTLE", tag+":p", "9", "10", "60000"); fmt.Sprint(got) != fmt.Sprint(th(0, 10, 9, -1, 6000)) {
				t.Fatalf("CL.PTHROTTLE %s: %s", tag, show(got))
			}
			if got, _ := send("CL.THROTTLE_RO", tag+":s", "9", "10", "60"); fmt.Sprint(got) != fmt.Sprint(th(0, 10, 8, -1, 12)) {
				t.Fatalf("CL.THROTTLE_RO %s: %s", tag, show(got))
			}
			got, err = send("CL.MPTHROTTLE", tag+":a", "9", "10", "1000", "1", tag+":b", "0", "1", "1000", "1")
			if err != nil || fmt.Sprint(got) != fmt.Sprint(multi(th(0, 1, 0, -1, 1000), th(0, 10, 9, -1, 100), th(0, 1, 0, -1, 1000))) {
				t.Fatalf("CL.MPTHROTTLE %s: %s %v", tag, show(got), err)
			}
			checkPeekAfterOne(t, "CL.PTHROTTLE_RO "+tag, func() (any, error) { return send("CL.PTHROTTLE_RO", tag+":p", "9", "10", "60000") })
		}
		// keys on different slots: CROSSSLOT from the node that gets it
		plain := newGoRedis(t, nodes[0])
		k1, k2 := "a", "b"
		if got, _ := goRedisDo(plain)("CL.MTHROTTLE", k1, "1", "1", "1", "1", k2, "1", "1", "1", "1"); got != errText(crossSlot) {
			t.Fatalf("CL.MTHROTTLE across slots: %s", show(got))
		}
		if got, _ := goRedisDo(plain)("CL.MPTHROTTLE", k1, "1", "1", "1", "1", k2, "1", "1", "1", "1"); got != errText(crossSlot) {
			t.Fatalf("CL.MPTHROTTLE across slots: %s", show(got))
		}
	})
	t.Run("rueidis", func(t *testing.T) {
		cl, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{nodes[1].Addr}, DisableCache: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		for u := range 20 {
			tag := "{r" + strconv.Itoa(u) + "}"
			r := cl.Do(ctx, cl.B().Arbitrary("CL.MPTHROTTLE").Keys(tag+":a").Args("9", "10", "1000", "1").Keys(tag+":b").Args("0", "1", "1000", "1").Build())
			got, err := rueidisReply(r.ToAny())
			if err != nil || fmt.Sprint(got) != fmt.Sprint(multi(th(0, 1, 0, -1, 1000), th(0, 10, 9, -1, 100), th(0, 1, 0, -1, 1000))) {
				t.Fatalf("CL.MPTHROTTLE %s: %s %v", tag, show(got), err)
			}
			// wall clock here: some ms may have passed since the write
			r = cl.Do(ctx, cl.B().Arbitrary("CL.PTHROTTLE_RO").Keys(tag+":b").Args("0", "1", "1000").Build())
			got, _ = rueidisReply(r.ToAny())
			if g, ok := got.([]any); !ok || len(g) != 5 || g[0] != int64(1) || g[3].(int64) < 1 || g[3].(int64) > 1000 || g[3] != g[4] {
				t.Fatalf("CL.PTHROTTLE_RO %s: %s, want [1 1 0 r r] with 0 < r <= 1000", tag, show(got))
			}
			r = cl.Do(ctx, cl.B().Arbitrary("CL.MTHROTTLE").Keys(tag+":s").Args("9", "10", "60", "1").Keys(tag+":ip").Args("99", "100", "60", "1").Build())
			got, err = rueidisReply(r.ToAny())
			if err != nil || fmt.Sprint(got) != fmt.Sprint(multi(th(0, 10, 9, -1, 6), th(0, 10, 9, -1, 6), th(0, 100, 99, -1, 1))) {
				t.Fatalf("CL.MTHROTTLE %s: %s %v", tag, show(got), err)
			}
			r = cl.Do(ctx, cl.B().Arbitrary("CL.PTHROTTLE").Keys(tag+":p").Args("9", "10", "60000").Build())
			if got, err := rueidisReply(r.ToAny()); err != nil || fmt.Sprint(got) != fmt.Sprint(th(0, 10, 9, -1, 6000)) {
				t.Fatalf("CL.PTHROTTLE %s: %s %v", tag, show(got), err)
			}
			r = cl.Do(ctx, cl.B().Arbitrary("CL.THROTTLE_RO").Keys(tag+":s").Args("9", "10", "60").Build())
			if got, err := rueidisReply(r.ToAny()); err != nil || fmt.Sprint(got) != fmt.Sprint(th(0, 10, 8, -1, 12)) {
				t.Fatalf("CL.THROTTLE_RO %s: %s %v", tag, show(got), err)
			}
			checkPeekAfterOne(t, "CL.PTHROTTLE_RO "+tag, func() (any, error) {
				return rueidisReply(cl.Do(ctx, cl.B().Arbitrary("CL.PTHROTTLE_RO").Keys(tag+":p").Args("9", "10", "60000").Build()).ToAny())
			})
		}
		// rueidis's cluster builder refuses keys of different slots itself;
		// a single-node rueidis client shows the server's answer
		single, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{nodes[0].Addr}, DisableCache: true, ForceSingleClient: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(single.Close)
		for _, cmd := range []string{"CL.MTHROTTLE", "CL.MPTHROTTLE"} {
			if got, _ := rueidisDo(single)(cmd, "a", "1", "1", "1", "1", "b", "1", "1", "1", "1"); got != errText(crossSlot) {
				t.Fatalf("%s across slots: %s", cmd, show(got))
			}
		}
	})
}

// checkPeekAfterOne checks a CL.PTHROTTLE_RO 9 10 60000 (EI 6 s) peek at
// a key one CL.PTHROTTLE wrote a moment ago on the wall clock: allowed,
// 8 left, reset 12 s less the time that passed (under 6 s, however loaded
// the machine: the test allows up to 1 s).
func checkPeekAfterOne(t *testing.T, what string, peek func() (any, error)) {
	t.Helper()
	got, err := peek()
	g, ok := got.([]any)
	if err != nil || !ok || len(g) != 5 || fmt.Sprint(g[:4]) != "[0 10 8 -1]" || g[4].(int64) > 12000 || g[4].(int64) < 11000 {
		t.Fatalf("%s: %s %v, want [0 10 8 -1 r] with 11000 <= r <= 12000", what, show(got), err)
	}
}

// TestFamilyCommandInfoDocs: COMMAND INFO's arity, flags and key positions
// (1/-1/5 for the multi commands), COMMAND GETKEYS and COMMAND DOCS.
func TestFamilyCommandInfoDocs(t *testing.T) {
	familyClients(t, func(t *testing.T, ts *testServer, send do) {
		for _, tt := range []struct {
			name  string
			flags []any
			keys  [3]int64
		}{
			{"cl.pthrottle", []any{"write"}, [3]int64{1, 1, 1}},
			{"cl.throttle_ro", []any{"readonly", "fast"}, [3]int64{1, 1, 1}},
			{"cl.pthrottle_ro", []any{"readonly", "fast"}, [3]int64{1, 1, 1}},
			{"cl.mthrottle", []any{"write"}, [3]int64{1, -1, 5}},
			{"cl.mpthrottle", []any{"write"}, [3]int64{1, -1, 5}},
		} {
			got, err := send("COMMAND", "INFO", tt.name)
			if err != nil {
				t.Fatal(err)
			}
			info := got.([]any)[0].([]any)
			if info[0] != tt.name || info[1] != int64(-1) || fmt.Sprint(info[2]) != fmt.Sprint(tt.flags) ||
				info[3] != tt.keys[0] || info[4] != tt.keys[1] || info[5] != tt.keys[2] {
				t.Errorf("COMMAND INFO %s: %s", tt.name, show(info))
			}
			docs, err := send("COMMAND", "DOCS", tt.name)
			if err != nil {
				t.Fatal(err)
			}
			if s := fmt.Sprint(docs); !strings.Contains(s, "summary") || !strings.Contains(s, "generic") || !strings.Contains(s, tt.name) {
				t.Errorf("COMMAND DOCS %s: %s", tt.name, s)
			}
		}
		got, _ := send("COMMAND", "GETKEYS", "CL.MTHROTTLE", "{u}:a", "1", "1", "1", "1", "{u}:b", "1", "1", "1", "1", "{u}:c", "1", "1", "1", "1")
		if fmt.Sprint(got) != "[{u}:a {u}:b {u}:c]" {
			t.Errorf("COMMAND GETKEYS CL.MTHROTTLE: %s", show(got))
		}
	})
}

// TestFamilyStats: INFO commandstats counts each command, and the
// Prometheus exporter's celld_decisions_total counts each one's decisions
// (a peek counts what it reports; CL.MTHROTTLE counts once per call).
func TestFamilyStats(t *testing.T) {
	familyClients(t, func(t *testing.T, ts *testServer, send do) {
		for _, cmd := range []string{
			"CL.PTHROTTLE p 0 1 1000", "CL.PTHROTTLE p 0 1 1000", "CL.PTHROTTLE p 0 1 1000",
			"CL.THROTTLE_RO p 0 1 1", "CL.PTHROTTLE_RO p 0 1 1000 0",
			"CL.MTHROTTLE m 5 1 1 1 n 5 1 1 1", "CL.MTHROTTLE m 5 1 1 1 p 0 1 1 1",
			"CL.MPTHROTTLE q 5 1 1 1", "CL.MPTHROTTLE m", // the last one is an error
		} {
			send(c(cmd)...)
		}
		info, err := send("INFO", "commandstats")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"cmdstat_cl.pthrottle:calls=3,", "cmdstat_cl.throttle_ro:calls=1,", "cmdstat_cl.pthrottle_ro:calls=1,",
			"cmdstat_cl.mthrottle:calls=2,", "cmdstat_cl.mpthrottle:calls=2,"} {
			if !strings.Contains(fmt.Sprint(info), want) {
				t.Errorf("INFO commandstats lacks %q:\n%s", want, info)
			}
		}
		if !strings.Contains(fmt.Sprint(info), "cmdstat_cl.mpthrottle:calls=2,usec=") || !strings.Contains(fmt.Sprint(info), "failed_calls=1") {
			t.Errorf("CL.MPTHROTTLE's usage error not counted as failed:\n%s", info)
		}
		exp := metrics.New(metrics.Config{})
		exp.SetStats(ts.Srv.Stats)
		srv := httptest.NewServer(exp.Handler())
		defer srv.Close()
		resp, err := srv.Client().Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, want := range []string{
			`celld_decisions_total{command="cl.pthrottle",decision="allowed",limiter=""} 1`,
			`celld_decisions_total{command="cl.pthrottle",decision="denied",limiter=""} 2`,
			`celld_decisions_total{command="cl.throttle_ro",decision="denied",limiter=""} 1`,
			`celld_decisions_total{command="cl.pthrottle_ro",decision="allowed",limiter=""} 1`,
			`celld_decisions_total{command="cl.mthrottle",decision="allowed",limiter=""} 1`,
			`celld_decisions_total{command="cl.mthrottle",decision="denied",limiter=""} 1`,
			`celld_decisions_total{command="cl.mpthrottle",decision="allowed",limiter=""} 1`,
			`celld_decisions_total{command="cl.mpthrottle",decision="denied",limiter=""} 0`,
			`celld_commands_total{command="cl.mthrottle"} 2`,
		} {
			if !strings.Contains(string(body), want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	})
}
