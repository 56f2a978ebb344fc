package repl

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/celld/celld/store"
)

// newGatherNode is a node whose sender gathers effects for gather.
func newGatherNode(t *testing.T, ack Ack, gather, maxLag time.Duration) (*Node, func(key string)) {
	t.Helper()
	d := newDBs(t)
	n := New(d, Options{Addr: "127.0.0.1:0", Ack: ack, MaxLag: maxLag, Gather: gather,
		BarrierTimeout: time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(n.Close)
	return n, func(key string) { throttle(t, d.DB(0), key) }
}

// TestGatherRounds: a leader gathers effects for Gather before a round
// sends them (fewer, larger batches), and the follower still receives
// every write. (TestGatherBarrierKicks: a Barrier does not wait for it.)
func TestGatherRounds(t *testing.T) {
	const gather = 150 * time.Millisecond
	leader, write := newGatherNode(t, Sync, gather, 2*time.Second)
	leader.Lead(0, 1)
	fd := newDBs(t)
	follower := newNode(t, fd, Sync)
	follower.Follow(0, 1, leader.ReplAddr())
	eventually(t, "follower synced", func() bool { return follower.Status().Synced })

	// Writes every 5 ms for 600 ms: with a round per 1 ms tick that
	// would be ~120 batches (one per write); gathering for 150 ms sends a
	// handful, one per gather of the time the writes took, which on a
	// loaded machine is longer than 600 ms: the bound follows it (at
	// most half the writes, so that one batch per write still fails).
	b0 := leader.Status().LastBatch
	start := time.Now()
	const writes = 120
	for i := 0; i < writes; i++ {
		write(fmt.Sprint("g", i))
		time.Sleep(5 * time.Millisecond)
	}
	took := time.Since(start)
	bound := min(max(12, int(took/gather)+3), writes/2)
	if got := leader.Status().LastBatch - b0; got > uint64(bound) {
		t.Fatalf("%d batches for %d writes in %v with a %v gather (bound %d): not gathered", got, writes, took, gather, bound)
	}
	eventually(t, "the follower has every gathered write", func() bool { return fmt.Sprint(dump(fd)) == fmt.Sprint(dump(leader.dbs)) })
}

// TestGatherBarrierKicks: a Barrier does not wait for the gather: it
// starts a round at once. A write and a Barrier right after a round
// started, with a 1 s gather: without the kick the barrier waits for the
// next round, most of a second. A barrier's own round trip under -race on
// a loaded machine can take a few hundred ms, so the test fails only when
// three attempts in a row take over half the gather. (Before, a 150 ms
// gather and a 300 ms bound: the bound failed on a slow machine, and a
// barrier that waited for the gather, at most 150 ms, passed it.)
func TestGatherBarrierKicks(t *testing.T) {
	const gather = time.Second
	d := newDBs(t)
	leader := New(d, Options{Addr: "127.0.0.1:0", Ack: Sync, MaxLag: 10 * time.Second, Gather: gather,
		BarrierTimeout: 10 * time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(leader.Close)
	leader.Lead(0, 1)
	fd := newDBs(t)
	follower := newNode(t, fd, Sync)
	follower.Follow(0, 1, leader.ReplAddr())
	eventually(t, "follower synced", func() bool { return follower.Status().Synced })
	l := leader.lead.Load()
	round := func() uint64 {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.lastRound
	}
	var slow []time.Duration
	for attempt := range 3 {
		r0 := round()
		eventually(t, "a round", func() bool { return round() > r0 })
		key := fmt.Sprint("sync", attempt)
		throttle(t, d.DB(0), key)
		start := time.Now()
		if err := leader.Barrier(); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		if _, ok := fd.DB(0).Get([]byte(key), time.Now().UnixMilli()); !ok {
			t.Fatal("after the barrier the follower lacks the write")
		}
		if took <= gather/2 {
			return
		}
		slow = append(slow, took)
	}
	t.Fatalf("barriers right after a round took %v in three attempts: they waited for the %v gather instead of starting a round", slow, gather)
}

// TestBatchOriginIsTheEffectsStamp: a batch's lag is counted from when
// its oldest effect can have been made (the store's stamp at the shard's
// first effect), not from the start of the round before, which with a
// long gather would overstate the lag by up to the gather and refuse
// writes early.
func TestBatchOriginIsTheEffectsStamp(t *testing.T) {
	leader, write := newGatherNode(t, Async, 200*time.Millisecond, 5*time.Second)
	leader.Lead(0, 1)
	muteFollower(t, leader.ReplAddr(), 1) // never acknowledges: the batch stays pending
	l := leader.lead.Load()
	eventually(t, "the follower registered", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.followers) == 1
	})
	round := func() uint64 {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.lastRound
	}
	// The stamp lags the clock by at most a tick plus the sender's
	// scheduling delay, which on a loaded machine (CI: -race, packages in
	// parallel, 2 cores) has reached 155 ms. Counted from the round
	// before, the origin is >= 100 ms early in every attempt; so the
	// test fails only when three attempts in a row are all early.
	var early []time.Duration
	for attempt := range 3 {
		r0 := round()
		eventually(t, "a round", func() bool { return round() > r0 })
		time.Sleep(100 * time.Millisecond) // half a gather after that round's start
		l.mu.Lock()
		had := len(l.pending)
		l.mu.Unlock()
		before := time.Now()
		write(fmt.Sprint("late", attempt))
		after := time.Now()
		var p pend
		eventually(t, "the write's batch is pending", func() bool {
			l.mu.Lock()
			defer l.mu.Unlock()
			if len(l.pending) > had {
				p = l.pending[had]
			}
			return len(l.pending) > had
		})
		if p.origin.After(after) {
			t.Fatalf("batch origin %v after the write returned: lag understated", p.origin.Sub(after))
		}
		e := before.Sub(p.origin)
		if e <= 40*time.Millisecond {
			return
		}
		early = append(early, e)
	}
	t.Fatalf("batch origin %v before the write in three attempts: counted from the round before, not the effect", early)
}

// TestGatherShrinksWithRoundTrip: the gather is cut so that an effect's
// wait plus the last batch's round trip stays within half of MaxLag, and
// is never under a tick.
func TestGatherShrinksWithRoundTrip(t *testing.T) {
	n := New(newDBs(t), Options{MaxLag: 10 * time.Millisecond})
	if g := n.opts.Gather; g != 2*time.Millisecond {
		t.Fatalf("default gather for a 10ms lag bound: %v", g)
	}
	l := newLeader(n, 1)
	for _, c := range []struct{ rtt, want time.Duration }{
		{0, 2 * time.Millisecond},
		{time.Millisecond, 2 * time.Millisecond},
		{2500 * time.Microsecond, 1500 * time.Microsecond},
		{4 * time.Millisecond, time.Millisecond},
		{time.Second, time.Millisecond},
	} {
		l.rtt.Store(int64(c.rtt))
		if g := l.gather(); g != c.want {
			t.Errorf("round trip %v: gather %v, want %v", c.rtt, g, c.want)
		}
	}
	if g := New(newDBs(t), Options{MaxLag: time.Second}).opts.Gather; g != 4*time.Millisecond {
		t.Fatalf("gather is capped at 4ms: %v", g)
	}
	if g := New(newDBs(t), Options{MaxLag: 2 * time.Millisecond}).opts.Gather; g != time.Millisecond {
		t.Fatalf("gather is never under the tick: %v", g)
	}
}

// TestAppendTATIsAppendEntry: the drain's plain-TAT encoder writes what
// appendEntry writes for the same change.
func TestAppendTATIsAppendEntry(t *testing.T) {
	for _, c := range []struct {
		db  int
		key string
		tat uint64
		exp int64
	}{{0, "k", 1, 0}, {3, "a key longer than sixteen bytes", 1 << 62, 1_700_000_000_000}, {15, "", 0, -1}} {
		want := appendEntry(nil, c.db, store.Change{Key: []byte(c.key), TAT: c.tat, IsTAT: true, ExpireAtMs: c.exp})
		if got := appendTAT(nil, c.db, []byte(c.key), c.tat, c.exp); string(got) != string(want) {
			t.Fatalf("%+v: appendTAT %x, appendEntry %x", c, got, want)
		}
	}
}
