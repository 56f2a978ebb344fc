package compat_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// rueidis with DisableCache: true, so every reply comes from the server
// (the default, cached client is tracking_test.go's). rueidis speaks RESP3
// (HELLO 3) by default and, like kvrocks-friendly clients, strips a leading
// "ERR " from error texts: Cell errors, which have no such prefix, reach the
// caller whole.

func TestRueidisTypedBuilder(t *testing.T) {
	ts := startServer(t, withFakeClock(t0))
	cl := newRueidis(t, ts)
	throttle := func(key string, burst, count, period int64) rueidis.Completed {
		return cl.B().ClThrottle().Key(key).MaxBurst(burst).CountPerPeriod(count).Period(period).Build()
	}
	throttleQ := func(key string, burst, count, period, q int64) rueidis.Completed {
		return cl.B().ClThrottle().Key(key).MaxBurst(burst).CountPerPeriod(count).Period(period).Quantity(q).Build()
	}
	steps := []struct {
		cmd  rueidis.Completed
		want []int64
		err  string
	}{
		// Twenty calls of user123 15 30 60, then the other worked examples.
		0:  {cmd: throttle("user123", 15, 30, 60), want: []int64{0, 16, 15, -1, 2}},
		1:  {cmd: throttle("user123", 15, 30, 60), want: []int64{0, 16, 14, -1, 4}},
		2:  {cmd: throttleQ("user123", 15, 30, 60, 14), want: []int64{0, 16, 0, -1, 32}},
		3:  {cmd: throttle("user123", 15, 30, 60), want: []int64{1, 16, 0, 2, 32}},
		4:  {cmd: throttleQ("b", 4, 5, 1, 5), want: []int64{0, 5, 0, -1, 1}},
		5:  {cmd: throttleQ("c", 4, 5, 1, 6), want: []int64{1, 5, 5, -1, 0}},
		6:  {cmd: throttleQ("d", 15, 30, 60, 0), want: []int64{0, 16, 16, -1, 0}},
		7:  {cmd: throttle("e", 5, 1, 10), want: []int64{0, 6, 5, -1, 10}},
		8:  {cmd: throttle("e", 5, 1, 10), want: []int64{0, 6, 4, -1, 20}},
		9:  {cmd: throttle("e", 5, 1, 10), want: []int64{0, 6, 3, -1, 30}},
		10: {cmd: throttleQ("e", 5, 1, 10, -1), want: []int64{0, 6, 4, -1, 20}},
		11: {cmd: throttle("f", -1, 1, 1), want: []int64{1, 0, 0, -1, 0}},
		12: {cmd: throttle("g", 15, -30, 60), want: []int64{1, 16, 0, -1, 0}},
		13: {cmd: throttle("z", 15, 0, 60), err: "Cell error: Store error: Zero rates are not supported"},
		14: {cmd: throttleQ("m2", 15, 1000, 1, -2), err: "Cell error: Store error: Error while setting key expire"},
	}
	for i, st := range steps {
		ts.Advance(tick)
		got, err := cl.Do(ctx, st.cmd).AsIntSlice()
		if st.err != "" {
			if err == nil || err.Error() != st.err {
				t.Errorf("step %d: error = %v, want %q", i, err, st.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, st.want) {
			t.Errorf("step %d: got %v, %v; want %v", i, got, err, st.want)
		}
	}
	// The typed builder's wire form is exactly CL.THROTTLE key 15 30 60 [q].
	wire := throttleQ("k", 15, 30, 60, 2)
	if got := wire.Commands(); !reflect.DeepEqual(got, []string{"CL.THROTTLE", "k", "15", "30", "60", "2"}) {
		t.Errorf("builder sent %q", got)
	}
}

func TestRueidisTranscript(t *testing.T) {
	ts := startServer(t, withFakeClock(t0))
	send := rueidisDo(newRueidis(t, ts))
	runSteps(t, ts, send, []step{
		{c("CL.THROTTLE a 0 1 2"), th(0, 1, 0, -1, 2)},
		{c("CL.THROTTLE a 0 1 2"), th(1, 1, 0, 2, 2)},
		advance(2 * time.Second),
		{c("CL.THROTTLE a 0 1 2"), th(0, 1, 0, -1, 2)},
		{c("PTTL a"), int64(2000)},
		{c("GET a"), tatAt(3*tick + 4*time.Second)},
		{c("TYPE a"), "string"},
		// Cell errors come through whole ...
		{c("CL.THROTTLE k 15 30"), usage},
		{c("CL.THROTTLE k 1.5 30 60"), parseErr("1.5")},
		// ... while rueidis removes "ERR " from Redis's own errors.
		{c("foo a"), errText("unknown command 'foo', with args beginning with: 'a' ")},
		{c("GET"), errText("wrong number of arguments for 'get' command")},
	})
}

// TestRueidisHello3Session checks the RESP3 session on one dedicated
// connection: HELLO 3's map, then CL.THROTTLE still an array of integers.
func TestRueidisHello3Session(t *testing.T) {
	ts := startServer(t, withFakeClock(t0))
	cl := newRueidis(t, ts)
	err := cl.Dedicated(func(dc rueidis.DedicatedClient) error {
		hello, err := dc.Do(ctx, dc.B().Hello().Protover(3).Build()).ToAny()
		if err != nil {
			t.Fatalf("HELLO 3: %v", err)
		}
		m, ok := hello.(map[string]any)
		if !ok {
			t.Fatalf("HELLO 3 reply is %T, want a map", hello)
		}
		id, err := dc.Do(ctx, dc.B().ClientId().Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]any{
			"server": "redis", "version": "7.2.4", "proto": int64(3), "id": id,
			"mode": "standalone", "role": "master",
			"modules": []any{map[string]any{
				"name": "redis-cell", "ver": int64(1),
				"path": "/usr/lib/redis/modules/libredis_cell.so", "args": []any{},
			}},
		}
		if !reflect.DeepEqual(m, want) {
			t.Errorf("HELLO 3 = %#v\nwant %#v", m, want)
		}
		msg := dc.Do(ctx, dc.B().ClThrottle().Key("k").MaxBurst(15).CountPerPeriod(30).Period(60).Build())
		if v, err := msg.ToMessage(); err != nil || !v.IsArray() {
			t.Fatalf("CL.THROTTLE in RESP3: %v %v, want an array", v, err)
		}
		if got, err := msg.AsIntSlice(); err != nil || !reflect.DeepEqual(got, []int64{0, 16, 15, -1, 2}) {
			t.Errorf("CL.THROTTLE = %v %v", got, err)
		}
		info, err := dc.Do(ctx, dc.B().ClientInfo().Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		// RESP3 sends CLIENT INFO as a verbatim string; rueidis keeps its
		// "txt:" format prefix.
		if !strings.HasPrefix(info, "txt:id=") {
			t.Errorf("CLIENT INFO %q: want a txt verbatim string", info)
		}
		for _, w := range []string{" resp=3 ", " lib-name=rueidis ", " lib-ver=" + rueidis.LibVer + "\n"} {
			if !strings.Contains(info, w) {
				t.Errorf("CLIENT INFO %q lacks %q", info, w)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRueidisDoMulti pipelines through rueidis's DoMulti.
func TestRueidisDoMulti(t *testing.T) {
	ts := startServer(t, withFakeClock(t0))
	cl := newRueidis(t, ts)
	cmds := make(rueidis.Commands, 0, 100)
	for i := 0; i < 100; i++ {
		cmds = append(cmds, cl.B().ClThrottle().Key("pipe").MaxBurst(49).CountPerPeriod(1).Period(1).Build())
	}
	for i, r := range cl.DoMulti(ctx, cmds...) {
		n := int64(i + 1)
		want := []int64{0, 50, 50 - n, -1, n}
		if n > 50 {
			want = []int64{1, 50, 0, 1, 50}
		}
		if got, err := r.AsIntSlice(); err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("call %d: %v %v, want %v", n, got, err, want)
		}
	}
}
