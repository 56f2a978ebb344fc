package compat_test

import (
	"fmt"
	"io"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/celld/celld/data" // CL.WINDOW
	"github.com/celld/celld/metrics"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// CL.WINDOW (spec/windows.md) over real sockets, through go-redis (RESP3)
// and rueidis, every test with both clients where the contract's last
// section names a feature: pipelines, MULTI/EXEC, EVAL, WATCH, CLIENT
// TRACKING, cluster routing, commandstats, metrics, COMMAND INFO/DOCS and
// bounded memory. The fake clock starts at t0, a multiple of 10 s, so
// FIXED and SLIDING windows of 1 s start there.

// wnd is a CL.WINDOW reply.
func wnd(limited, limit, remaining, retry, reset int64) []any {
	return []any{limited, limit, remaining, retry, reset}
}

// windowClients is familyClients with error texts compared without their
// "ERR " prefix (rueidis drops it in some paths).
func windowClients(t *testing.T, f func(t *testing.T, ts *testServer, send do)) {
	familyClients(t, func(t *testing.T, ts *testServer, raw do) {
		f(t, ts, func(args ...any) (any, error) {
			v, err := raw(args...)
			if e, ok := v.(errText); ok {
				v = errText(strings.TrimPrefix(string(e), "ERR "))
			}
			return v, err
		})
	})
}

const wrongType = "WRONGTYPE Operation against a key holding the wrong kind of value"

func TestWindowTranscript(t *testing.T) {
	windowClients(t, func(t *testing.T, ts *testServer, send do) {
		runSteps(t, ts, send, []step{
			// LOG, the default mode: an exact sliding log
			{c("CL.WINDOW log 3 1000"), wnd(0, 3, 2, -1, 1000)},
			{c("PTTL log"), int64(1000)},
			{c("TYPE log"), "cl.window"},
			{c("CL.WINDOW log 3 1000 2"), wnd(0, 3, 0, -1, 1000)},
			// full: the oldest unit leaves in 1000 ms
			{c("CL.WINDOW log 3 1000"), wnd(1, 3, 0, 1000, 1000)},
			{c("CL.WINDOW log 3 1000 0"), wnd(0, 3, 0, -1, 1000)}, // a peek
			{c("CL.WINDOW log 3 1000 4"), wnd(1, 3, 0, -1, 1000)}, // never fits
			advance(400 * time.Millisecond),
			{c("CL.WINDOW log 5 1000 1"), wnd(0, 5, 1, -1, 1000)},
			{c("PTTL log"), int64(1000)},
			// 3 units must make room: the 2nd oldest, at t0, leaves at t0+1000
			{c("CL.WINDOW log 5 1000 3"), wnd(1, 5, 1, 600, 1000)},
			{c("CL.WINDOW log 5 1000 1 log"), wnd(0, 5, 0, -1, 1000)},
			// one key, one kind of state
			{c("CL.WINDOW log 5 1000 FIXED"), errText(wrongType)},
			{c("CL.THROTTLE log 1 1 1"), errText(wrongType)},
			{c("CL.PTHROTTLE log 1 1 1000"), errText(wrongType)},
			{c("GET log"), errText(wrongType)},
			{c("CL.THROTTLE tat 1 1 1"), th(0, 2, 1, -1, 1)},
			{c("CL.WINDOW tat 5 1000"), errText(wrongType)},
			{c("SET str 5"), "OK"},
			{c("CL.WINDOW str 1 1"), errText(wrongType)},
			// FIXED: the window [t0, t0+1000) ends in 600 ms
			{c("CL.WINDOW fx 2 1000 FIXED"), wnd(0, 2, 1, -1, 600)},
			{c("PTTL fx"), int64(600)},
			{c("CL.WINDOW fx 2 1000 1 fixed"), wnd(0, 2, 0, -1, 600)},
			{c("CL.WINDOW fx 2 1000 Fixed"), wnd(1, 2, 0, 600, 600)},
			{c("CL.WINDOW none 2 1000 0 FIXED"), wnd(0, 2, 2, -1, 0)},
			{c("EXISTS none"), int64(0)},
			{c("TYPE fx"), "cl.window"},
			// SLIDING: 5 units now; in the next window they weigh (1000−e)/1000
			{c("CL.WINDOW sl 10 1000 5 SLIDING"), wnd(0, 10, 5, -1, 1600)},
			{c("PTTL sl"), int64(1600)},
			advance(time.Second),
			{c("CL.WINDOW sl 10 1000 0 sliding"), wnd(0, 10, 7, -1, 600)},
			{c("CL.WINDOW sl 10 1000 8 SLIDING"), wnd(1, 10, 7, 200, 600)},
			advance(200 * time.Millisecond),
			{c("CL.WINDOW sl 10 1000 8 SLIDING"), wnd(0, 10, 0, -1, 1400)},
			{c("CL.WINDOW sl 10 1000 LOG"), errText(wrongType)},
			// errors
			{c("CL.WINDOW k"), errText("wrong number of arguments for 'cl.window' command")},
			{c("CL.WINDOW k 1"), errText("wrong number of arguments for 'cl.window' command")},
			{c("CL.WINDOW k 1 1000 1 LOG x"), errText("wrong number of arguments for 'cl.window' command")},
			{c("CL.WINDOW k x 1000"), errText("value is not an integer or out of range")},
			{c("CL.WINDOW k +1 1000"), errText("value is not an integer or out of range")},
			{c("CL.WINDOW k 01 1000"), errText("value is not an integer or out of range")},
			{c("CL.WINDOW k 1 1e3"), errText("value is not an integer or out of range")},
			{c("CL.WINDOW k 1 1000 9223372036854775808"), errText("value is not an integer or out of range")},
			{c("CL.WINDOW k 0 1000"), errText("limit must be at least 1")},
			{c("CL.WINDOW k -1 1000"), errText("limit must be at least 1")},
			{c("CL.WINDOW k 1 0"), errText("window_ms must be at least 1")},
			{c("CL.WINDOW k 1 1000 -1"), errText("quantity must not be negative")},
			{c("CL.WINDOW k 1 1000 MINUTE"), errText("value is not an integer or out of range")},
			{c("CL.WINDOW k 1 1000 1 MINUTE"), errText("syntax error")},
			{c("CL.WINDOW k 1 1000 LOG 1"), errText("value is not an integer or out of range")},
			{c("EXISTS k"), int64(0)},
			// huge numbers are fine
			{c("CL.WINDOW big 9223372036854775807 9223372036854775807 9223372036854775807 SLIDING"), wnd(0, 9223372036854775807, 0, -1, 9223372036854775807)},
			{c("CL.WINDOW big2 9223372036854775807 9223372036854775807 9223372036854775807"), wnd(0, 9223372036854775807, 0, -1, 9223372036854775807)},
		})
	})
}

// TestWindowDeniedNotRecorded: unlike the sorted-set pattern, a client that
// keeps retrying is let in as soon as the window has room.
func TestWindowDeniedNotRecorded(t *testing.T) {
	windowClients(t, func(t *testing.T, ts *testServer, send do) {
		steps := []step{{c("CL.WINDOW r 1 100"), wnd(0, 1, 0, -1, 100)}}
		for i := int64(1); i < 10; i++ {
			steps = append(steps, advance(10*time.Millisecond), step{c("CL.WINDOW r 1 100"), wnd(1, 1, 0, 100-10*i, 100-10*i)})
		}
		steps = append(steps, advance(10*time.Millisecond), step{c("CL.WINDOW r 1 100"), wnd(0, 1, 0, -1, 100)})
		runSteps(t, ts, send, steps)
	})
}

func TestWindowPipelines(t *testing.T) {
	var cmds [][]any
	var want []any
	for i := int64(1); i <= 150; i++ {
		cmds = append(cmds, []any{"CL.WINDOW", "p", "100", "1000"})
		if i <= 100 {
			want = append(want, wnd(0, 100, 100-i, -1, 1000))
		} else {
			want = append(want, wnd(1, 100, 0, 1000, 1000))
		}
		cmds = append(cmds, []any{"CL.WINDOW", "f", "100", "1000", "FIXED"}, []any{"CL.WINDOW", "s", "100", "1000", "SLIDING"})
		if i <= 100 {
			want = append(want, wnd(0, 100, 100-i, -1, 1000), wnd(0, 100, 100-i, -1, 2000))
		} else {
			// SLIDING: in the next window the 100 units weigh 100×(1000−e)/1000,
			// so one more fits from e = 10
			want = append(want, wnd(1, 100, 0, 1000, 1000), wnd(1, 100, 0, 1010, 2000))
		}
	}
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
		pipe := newGoRedis(t, ts).Pipeline()
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

// TestWindowMultiExecScripts: inside MULTI/EXEC a denied call is a reply
// like any other; EVAL calls CL.WINDOW; EVAL_RO refuses it (a write).
func TestWindowMultiExecScripts(t *testing.T) {
	t.Run("multi", func(t *testing.T) {
		ts := startServer(t, withFakeClock(t0))
		rdb := newGoRedis(t, ts)
		var res []*redis.Cmd
		_, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			res = append(res, p.Do(ctx, "CL.WINDOW", "m", "1", "1000"), p.Do(ctx, "CL.WINDOW", "m", "1", "1000"), p.Do(ctx, "PTTL", "m"))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		want := []any{wnd(0, 1, 0, -1, 1000), wnd(1, 1, 0, 1000, 1000), int64(1000)}
		for i, r := range res {
			if got, _ := goRedisReply(r.Result()); fmt.Sprint(got) != fmt.Sprint(want[i]) {
				t.Errorf("EXEC reply %d: %s, want %s", i, show(got), show(want[i]))
			}
		}
	})
	windowClients(t, func(t *testing.T, ts *testServer, send do) {
		runSteps(t, ts, send, []step{
			{[]any{"EVAL", "return redis.call('CL.WINDOW', KEYS[1], 2, 1000, 'FIXED')", "1", "e"}, wnd(0, 2, 1, -1, 1000)},
			{[]any{"EVAL", "return redis.call('cl.window', KEYS[1], 2, 1000, 1, 'fixed')", "1", "e"}, wnd(0, 2, 0, -1, 1000)},
			{[]any{"EVAL", "return redis.pcall('CL.WINDOW', KEYS[1], 2, 1000, 'LOG')", "1", "e"}, errText(wrongType)},
			{[]any{"EVAL_RO", "return redis.pcall('CL.WINDOW', KEYS[1], 2, 1000, 0, 'FIXED')", "1", "e"},
				errText("Write commands are not allowed from read-only scripts.")},
		})
	})
}

// TestWindowWatch: a peek and a denied call by another client leave a
// watcher's EXEC alone; an allowed call aborts it.
func TestWindowWatch(t *testing.T) {
	others := []struct {
		cmd   []any
		abort bool
	}{
		{[]any{"CL.WINDOW", "w", "1", "60000", "0"}, false},
		{[]any{"CL.WINDOW", "w", "1", "60000"}, false}, // full: denied
		{[]any{"CL.WINDOW", "w", "2", "60000"}, true},  // room under a larger limit: written
	}
	t.Run("go-redis", func(t *testing.T) {
		ts := startServer(t, withFakeClock(t0))
		rdb, other := newGoRedis(t, ts), newGoRedis(t, ts)
		for i, o := range others {
			rdb.Do(ctx, "CL.WINDOW", "w", "1", "60000") // w holds one unit
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
			cl.Do(ctx, cl.B().Arbitrary("CL.WINDOW", "w", "1", "60000").Build())
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

// TestWindowTracking: an allowed call invalidates the key for a tracking
// client; a denied one does not.
func TestWindowTracking(t *testing.T) {
	ts := startServer(t)
	rc := resp3Conn(t, ts)
	if got := rc.exchange(t, "CLIENT", "TRACKING", "on"); got != "+OK\r\n" {
		t.Fatalf("CLIENT TRACKING on: %q", got)
	}
	writers := map[string]do{"go-redis": goRedisDo(newGoRedis(t, ts)), "rueidis": rueidisDo(newRueidis(t, ts))}
	for _, name := range []string{"go-redis", "rueidis"} {
		w := writers[name]
		k := name + ":k"
		w("CL.WINDOW", k, "1", "3600000", "FIXED")                            // full
		rc.exchange(t, "TYPE", k)                                             // a read: k is tracked
		if _, err := w("CL.WINDOW", k, "1", "3600000", "FIXED"); err != nil { // denied
			t.Fatal(err)
		}
		expectNoPush(t, rc)
		if _, err := w("CL.WINDOW", k, "2", "3600000", "FIXED"); err != nil { // allowed
			t.Fatal(err)
		}
		if got := readValue(t, rc); got != push(k) {
			t.Fatalf("%s: got %q, want the invalidation of %s", name, got, k)
		}
		expectNoPush(t, rc)
	}
}

// TestWindowCluster: cluster clients route CL.WINDOW by its key.
func TestWindowCluster(t *testing.T) {
	nodes := startClusterNodes(t, 3)
	t.Run("go-redis", func(t *testing.T) {
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{nodes[0].Addr}})
		t.Cleanup(func() { rdb.Close() })
		send := goRedisDo(rdb)
		for u := range 30 {
			k := "win:" + strconv.Itoa(u)
			got, err := send("CL.WINDOW", k, "5", "60000", "FIXED")
			if g, ok := got.([]any); err != nil || !ok || len(g) != 5 || g[0] != int64(0) || g[2] != int64(4) {
				t.Fatalf("CL.WINDOW %s: %s %v", k, show(got), err)
			}
		}
	})
	t.Run("rueidis", func(t *testing.T) {
		cl, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{nodes[1].Addr}, DisableCache: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		for u := range 30 {
			k := "rwin:" + strconv.Itoa(u)
			got, err := rueidisReply(cl.Do(ctx, cl.B().Arbitrary("CL.WINDOW").Keys(k).Args("5", "60000", "2").Build()).ToAny())
			if g, ok := got.([]any); err != nil || !ok || len(g) != 5 || g[0] != int64(0) || g[2] != int64(3) {
				t.Fatalf("CL.WINDOW %s: %s %v", k, show(got), err)
			}
		}
	})
}

// TestWindowCommandInfoStats: COMMAND INFO (arity -4, keys 1/1/1), COMMAND
// DOCS and GETKEYS, INFO commandstats and celld_decisions_total.
func TestWindowCommandInfoStats(t *testing.T) {
	familyClients(t, func(t *testing.T, ts *testServer, send do) {
		got, err := send("COMMAND", "INFO", "cl.window")
		if err != nil {
			t.Fatal(err)
		}
		info := got.([]any)[0].([]any)
		if info[0] != "cl.window" || info[1] != int64(-4) || fmt.Sprint(info[2]) != "[write denyoom fast]" ||
			info[3] != int64(1) || info[4] != int64(1) || info[5] != int64(1) {
			t.Errorf("COMMAND INFO cl.window: %s", show(info))
		}
		docs, _ := send("COMMAND", "DOCS", "cl.window")
		if s := fmt.Sprint(docs); !strings.Contains(s, "summary") || !strings.Contains(s, "generic") {
			t.Errorf("COMMAND DOCS cl.window: %s", s)
		}
		if got, _ := send("COMMAND", "GETKEYS", "CL.WINDOW", "user:1", "10", "1000", "FIXED"); fmt.Sprint(got) != "[user:1]" {
			t.Errorf("COMMAND GETKEYS: %s", show(got))
		}
		for _, cmd := range []string{"CL.WINDOW s 1 1000", "CL.WINDOW s 1 1000", "CL.WINDOW s 1 1000 0", "CL.WINDOW s 0 1000", "CL.WINDOW f 5 1000 FIXED"} {
			send(c(cmd)...)
		}
		info2, _ := send("INFO", "commandstats")
		if !strings.Contains(fmt.Sprint(info2), "cmdstat_cl.window:calls=5,") || !strings.Contains(fmt.Sprint(info2), "failed_calls=1") {
			t.Errorf("INFO commandstats:\n%s", info2)
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
			`celld_decisions_total{command="cl.window",decision="allowed",limiter=""} 3`,
			`celld_decisions_total{command="cl.window",decision="denied",limiter=""} 1`,
		} {
			if !strings.Contains(string(body), want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	})
}

// TestWindowHostileMemory: a huge limit and one call per ms for far more
// ms than window.MaxLogEntries: the key's memory stops growing at the
// entry cap, and it still counts every unit.
func TestWindowHostileMemory(t *testing.T) {
	ts := startServer(t, withFakeClock(t0))
	rdb := newGoRedis(t, ts)
	used := func() int64 { return ts.Store.UsedMemory() }
	before := used()
	var afterCap int64
	for i := int64(1); i <= 5000; i++ {
		pipe := rdb.Pipeline()
		r := pipe.Do(ctx, "CL.WINDOW", "hostile", "1000000000", "86400000", "2")
		if _, err := pipe.Exec(ctx); err != nil {
			t.Fatal(err)
		}
		v, _ := r.Slice()
		if v[2] != int64(1_000_000_000-2*i) {
			t.Fatalf("call %d: %v", i, v)
		}
		ts.Advance(time.Millisecond)
		if i == 1100 {
			afterCap = used()
		}
	}
	grown := used() - before
	if final := used(); final != afterCap {
		t.Errorf("used memory kept growing past the entry cap: %d after 1100 calls, %d after 5000", afterCap-before, final-before)
	}
	if grown > 16<<10 {
		t.Errorf("one LOG key at the entry cap is charged %d bytes", grown)
	}
}
