package sidecar

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/celld/celld/internal/testutil"
	"github.com/redis/go-redis/v9"
)

// TestSidecarRedisCellUpstream: Redis with the real redis-cell module as
// the upstream (the migration path from the module). The module's clock is
// frozen (testutil.StartRedisCell), so a key throttled through the sidecar
// and its twin throttled on the module directly see the same instant, and
// every reply, errors included, must be byte-identical: single calls,
// a pipeline, a transaction, database 3. Then the upstream is stopped and
// each fallback mode answers as documented. Skips unless
// CELLD_REDIS_CELL_MODULE points at a built module.
func TestSidecarRedisCellUpstream(t *testing.T) {
	const frozen = int64(1_750_000_000_123_456_789)
	up := testutil.StartRedisCell(t, frozen)
	direct := testutil.Dial(t, up.Addr)
	sides := map[Mode]*node{}
	for _, m := range []Mode{Local, Open, Closed} {
		sides[m] = sidecarNode(t, Config{Seeds: []string{up.Addr}, Fallback: m, Timeout: 2 * time.Second})
	}
	via := testutil.Dial(t, sides[Local].addr)

	// The same sequences on key "s:<n>" through the sidecar and "d:<n>"
	// directly: identical bytes. Errors are the module's own.
	seqs := [][]string{
		{"15", "30", "60"}, {"0", "1", "2"}, {"4", "5", "1", "5"}, {"4", "5", "1", "6"},
		{"-1", "1", "1"}, {"15", "-30", "60"}, {"10", "666667", "1"}, {"5", "1", "10", "-1"},
		{"15", "0", "60"}, {"15", "30", "60", "x"}, {"1.5", "1", "1"}, {"1", "2"},
		{"9223372036854775807", "1", "1"}, {"100", "1000", "60", "0"},
	}
	for i, args := range seqs {
		for range 3 {
			want := direct.Do(append([]string{"CL.THROTTLE", "d:" + strconv.Itoa(i)}, args...)...)
			got := via.Do(append([]string{"CL.THROTTLE", "s:" + strconv.Itoa(i)}, args...)...)
			if got != want {
				t.Fatalf("CL.THROTTLE %v: through the sidecar %q, from the module %q", args, got, want)
			}
		}
	}
	if v := direct.Do("GET", "s:0"); !strings.HasPrefix(v, "$19\r\n") {
		t.Fatalf("the module's Redis does not hold s:0: %q", v)
	}
	if side := sides[Local]; side.st.Len() != 0 {
		t.Fatalf("the sidecar's own keyspace holds %d keys, want 0", side.st.Len())
	}
	if got, want := via.Do("CL.THROTTLE"), direct.Do("CL.THROTTLE"); got != want {
		t.Fatalf("CL.THROTTLE without arguments: sidecar %q, module %q", got, want)
	}

	// go-redis: a pipeline, and a transaction, in database 3.
	rdb := redis.NewClient(&redis.Options{Addr: sides[Local].addr, DB: 3, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	pipe := rdb.Pipeline()
	var cmds []*redis.Cmd
	for range 3 {
		cmds = append(cmds, pipe.Do(ctx, "CL.THROTTLE", "p", 1, 10, 60))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	for i, want := range [][]int64{{0, 2, 1, -1, 6}, {0, 2, 0, -1, 12}, {1, 2, 0, 6, 12}} {
		if r := cmdInts(t, cmds[i]); !equalInts(r, want) {
			t.Fatalf("pipeline call %d in db 3: %v, want %v", i, r, want)
		}
	}
	tx, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Do(ctx, "CL.THROTTLE", "p", 1, 10, 60)
		p.Do(ctx, "CL.THROTTLE", "q", 1, 10, 60)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if r := cmdInts(t, tx[0].(*redis.Cmd)); !equalInts(r, []int64{1, 2, 0, 6, 12}) {
		t.Fatalf("MULTI call on p: %v", r)
	}
	if r := cmdInts(t, tx[1].(*redis.Cmd)); !equalInts(r, []int64{0, 2, 1, -1, 6}) {
		t.Fatalf("MULTI call on q: %v", r)
	}
	d3 := testutil.Dial(t, up.Addr)
	d3.Do("SELECT", "3")
	if v := d3.Do("EXISTS", "p", "q"); v != ":2\r\n" {
		t.Fatalf("the module's Redis db 3 holds %q of p, q", v)
	}
	if v := direct.Do("EXISTS", "p", "q"); v != ":0\r\n" {
		t.Fatalf("the module's Redis db 0 holds %q of p, q", v)
	}

	// The upstream stopped: each mode answers as documented.
	up.Stop()
	for _, m := range []Mode{Local, Open, Closed} {
		c := testutil.Dial(t, sides[m].addr)
		got := c.Do("CL.THROTTLE", "fb", "15", "30", "60")
		var ok bool
		switch m {
		case Local: // the sidecar's own, fresh bucket
			ok = got == "*5\r\n:0\r\n:16\r\n:15\r\n:-1\r\n:2\r\n"
		case Open:
			ok = got == "*5\r\n:0\r\n:16\r\n:15\r\n:-1\r\n:0\r\n"
		case Closed:
			ok = strings.HasPrefix(got, "-UPSTREAMDOWN owner "+up.Addr+" ")
		}
		if !ok {
			t.Errorf("fallback %s with the module's Redis stopped: %q", m, got)
		}
		if n := sides[m].sc.StatsRef().FallbackByMode[m].Load(); n != 1 {
			t.Errorf("fallback %s counted %d decisions, want 1", m, n)
		}
	}
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
