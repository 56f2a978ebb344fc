package repl

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/celld/celld/store"
)

// TestResyncTakesLeadersState: once a follower has synced from its leader
// in a term, everything it holds came from that leader, so a resync
// (SWAPDB closes the links; a dropped link does the same) must take the
// leader's current state of every key, not merge TATs by the larger one:
// after SWAPDB 0 1 the leader's db0 key holds db1's smaller TAT, and a
// numeric string written meanwhile (SET k 1862 is stored as the plain
// value 1862, the same as a TAT of 1862) is smaller than the TAT it
// replaced. Merged by max, the follower kept both older values for good.
func TestResyncTakesLeadersState(t *testing.T) {
	ld, fd := newDBs(t), newDBs(t)
	leader, follower := newNode(t, ld, Async), newNode(t, fd, Async)
	leader.Lead(0, 7)
	follower.Follow(0, 7, leader.ReplAddr())
	eventually(t, "follower synced", func() bool { return follower.Status().Synced })

	nowMs := time.Now().UnixMilli()
	far := uint64(time.Now().Add(time.Minute).UnixNano())
	put := func(db int, key string, tat uint64) {
		ld.DB(db).Update([]byte(key), nowMs, func(store.Value, bool) (store.Value, store.Action) {
			return store.Value{TAT: tat, ExpireAtMs: nowMs + 120_000}, store.Put
		})
	}
	put(0, "k", far)
	put(1, "k", far-1e9)
	put(2, "n", far)
	same := func() bool { return fmt.Sprint(dump(fd)) == fmt.Sprint(dump(ld)) }
	eventually(t, "follower mirrors leader", same)

	put(2, "n", 1862) // SET n 1862, in the round of the swap or just before
	ld.Swap(0, 1)     // the leader closes its followers' links: they resync
	deadline := time.Now().Add(5 * time.Second)
	for !same() {
		if time.Now().After(deadline) {
			t.Fatalf("follower diverged after a resync:\nleader   %q\nfollower %q", dump(ld), dump(fd))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestAckAfterLeaderRestart: a leader restarted at the same epoch counts
// its rounds from 1 again. A follower that kept acknowledging pings with
// the last seq of the previous leader process confirmed rounds the new
// one had not even started (its barriers and lag bound trusted acks for
// effects never received): a follower must never acknowledge more than
// the rounds of the leader it is connected to.
func TestAckAfterLeaderRestart(t *testing.T) {
	ld, fd := newDBs(t), newDBs(t)
	old, follower := newNode(t, ld, Async), newNode(t, fd, Async)
	old.Lead(0, 7)
	addr := old.ReplAddr()
	follower.Follow(0, 7, addr)
	eventually(t, "follower synced", func() bool { return follower.Status().Synced })
	// Batches up to a seq the restarted leader will not reach soon.
	i := 0
	eventually(t, "the follower acknowledges seq 300", func() bool {
		throttle(t, ld.DB(0), fmt.Sprint("k", i)) // a new key: a write (a denied call on one key writes nothing)
		i++
		return follower.Status().Acked >= 300
	})
	old.Close()

	// The same data, the same address and epoch, rounds from 1, and a
	// slow tick so that they stay far below the old seq.
	n := New(ld, Options{Addr: addr, Ack: Async, MaxLag: time.Minute, Tick: 100 * time.Millisecond,
		BarrierTimeout: time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(n.Close)
	n.Lead(0, 7)
	if n.ReplAddr() != addr {
		t.Skipf("could not listen again on %s", addr)
	}
	eventually(t, "follower synced with the restarted leader", func() bool { return n.Status().Followers == 1 })
	// Pings (every 100 ms) are acknowledged: wait for a few.
	for i := 0; i < 5; i++ {
		st := n.Status()
		if st.Acked > st.Seq {
			t.Fatalf("follower acknowledged seq %d; the leader has run %d rounds", st.Acked, st.Seq)
		}
		time.Sleep(100 * time.Millisecond)
	}
	throttle(t, ld.DB(0), "k")
	eventually(t, "the restarted leader's stream applies", func() bool { return fmt.Sprint(dump(fd)) == fmt.Sprint(dump(ld)) })
}
