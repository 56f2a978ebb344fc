package repl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/celld/celld/gcra"
	"github.com/celld/celld/kinds"
	"github.com/celld/celld/store"
)

func newDBs(t *testing.T) *store.Databases {
	t.Helper()
	d, err := store.Group(store.New(store.Options{}), 4)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func newNode(t *testing.T, d *store.Databases, ack Ack) *Node {
	t.Helper()
	return newNodeMin(t, d, ack, 0)
}

// newNodeMin is newNode with Options.MinReplicas = min.
func newNodeMin(t *testing.T, d *store.Databases, ack Ack, min int) *Node {
	t.Helper()
	n := New(d, Options{Addr: "127.0.0.1:0", Ack: ack, MaxLag: 20 * time.Millisecond, MinReplicas: min,
		BarrierTimeout: time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(n.Close)
	return n
}

// dump is every live key of every database as sorted text lines.
func dump(d *store.Databases) []string {
	var out []string
	nowMs := time.Now().UnixMilli()
	d.Each(func(db int, st *store.Store) {
		for i := 0; i < store.NumShards; i++ {
			st.SnapshotShard(i, nowMs, func(c store.Change) {
				out = append(out, fmt.Sprintf("%d %q %s %d %q %x %d", db, c.Key, c.Kind, c.TAT, c.Text, c.Image, c.ExpireAtMs))
			})
		}
	})
	sort.Strings(out)
	return out
}

// eventually polls cond until it holds or 5 s pass (a liveness bound for
// a loaded machine, not a speed assertion).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func throttle(t *testing.T, st *store.Store, key string) gcra.Result {
	t.Helper()
	lim, _ := gcra.NewLimit(4, 10, 60)
	r, err := st.Throttle([]byte(key), lim, 1, time.Now().UnixNano())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestSnapshotThenStream: a follower that joins late gets the leader's
// keys of every kind and database (snapshot), then every later change
// (stream), including deletes; its own writes are refused READONLY; keys
// it held that the leader lacks are dropped, and a TAT it held further
// ahead than the leader's is kept (merge by max).
func TestSnapshotThenStream(t *testing.T) {
	ld, fd := newDBs(t), newDBs(t)
	leader, follower := newNode(t, ld, Async), newNode(t, fd, Async)
	leader.Lead(0, 7)
	nowMs := time.Now().UnixMilli()
	throttle(t, ld.DB(0), "tat")
	ld.DB(2).Update([]byte("str"), nowMs, func(store.Value, bool) (store.Value, store.Action) {
		return store.Value{Raw: "hello", Invalid: true}, store.Put
	})
	ld.DB(1).WriteObject([]byte("h"), store.KindHash, nowMs, func() store.Object { return kinds.NewHash() },
		func(o store.Object) bool { o.(*kinds.Hash).Set("f", "v"); return true })
	// The follower's own past: a stray key, and a TAT further ahead.
	fd.DB(0).ApplyChange(store.Change{Key: []byte("stray"), TAT: 1, IsTAT: true}, nil, false, nowMs)
	far := uint64(time.Now().Add(time.Minute).UnixNano())
	fd.DB(3).ApplyChange(store.Change{Key: []byte("ahead"), TAT: far, IsTAT: true, ExpireAtMs: nowMs + 120_000}, nil, false, nowMs)
	ld.DB(3).ApplyChange(store.Change{Key: []byte("ahead"), TAT: far - 1e9, IsTAT: true, ExpireAtMs: nowMs + 120_000}, nil, false, nowMs)

	// Let a whole round drain these first, so that the follower meets
	// them in the snapshot (merged), not in the stream (applied in order).
	s0 := leader.Status().Seq
	eventually(t, "a round drains", func() bool { return leader.Status().Seq > s0+1 })
	follower.Follow(0, 7, leader.ReplAddr())
	eventually(t, "follower synced", func() bool { return follower.Status().Synced })
	if err := follower.Gate(); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("follower's gate: %v", err)
	}
	if v, ok := fd.DB(3).Get([]byte("ahead"), nowMs); !ok || v.TAT != far {
		t.Fatalf("merge by max: follower's TAT %d, want its own larger %d", v.TAT, far)
	}
	if _, ok := fd.DB(0).Get([]byte("stray"), nowMs); ok {
		t.Fatal("a key the leader does not hold survived the sync")
	}
	ld.DB(3).Delete([]byte("ahead"), nowMs) // now the stream: the delete wins
	for i := 0; i < 50; i++ {
		throttle(t, ld.DB(i%4), fmt.Sprintf("k%d", i%7))
	}
	ld.DB(0).Delete([]byte("k0"), nowMs)
	eventually(t, "follower mirrors leader", func() bool { return fmt.Sprint(dump(fd)) == fmt.Sprint(dump(ld)) })
	// The lag percentiles count acknowledged batches: the last one's ack
	// may still be on its way.
	var st Status
	ok := func() bool {
		st = leader.Status()
		return st.Role == "leader" && st.Followers == 1 && st.Acked != 0 && st.BytesSent != 0 && st.LagP99 != 0
	}
	for deadline := time.Now().Add(5 * time.Second); !ok() && time.Now().Before(deadline); {
		time.Sleep(2 * time.Millisecond)
	}
	if !ok() {
		t.Fatalf("leader status %+v", st)
	}
}

// TestEpochFencing: a follower of an older epoch is refused and never
// syncs; one of a newer epoch makes the leader fence itself.
func TestEpochFencing(t *testing.T) {
	ld, fd := newDBs(t), newDBs(t)
	leader, follower := newNode(t, ld, Async), newNode(t, fd, Async)
	leader.Lead(0, 5)
	throttle(t, ld.DB(0), "k")
	follower.Follow(0, 4, leader.ReplAddr())
	time.Sleep(100 * time.Millisecond)
	if follower.Status().Synced || fd.Keys() != 0 {
		t.Fatal("a follower of an older epoch synced")
	}
	follower.Follow(0, 6, leader.ReplAddr())
	eventually(t, "leader fenced", func() bool { return errors.Is(leader.Gate(), ErrFenced) })
	if fd.Keys() != 0 {
		t.Fatal("a follower took state from a stale leader")
	}
}

// TestAsyncGate: with MinReplicas 1 a leader refuses writes (-NOREPLICAS)
// until a follower has synced, then accepts them; with a follower
// connected that does not acknowledge, a leader refuses writes (-TRYAGAIN)
// once its oldest effect is older than MaxLag.
func TestAsyncGate(t *testing.T) {
	ld, fd := newDBs(t), newDBs(t)
	leader, follower := newNodeMin(t, ld, Async, 1), newNode(t, fd, Async)
	leader.Lead(0, 1)
	if err := leader.Gate(); !errors.Is(err, ErrNoReplicas) {
		t.Fatalf("fresh leader's gate with MinReplicas 1 and no follower: %v", err)
	}
	mute := muteFollower(t, leader.ReplAddr(), 1)
	throttle(t, ld.DB(0), "k")
	throttle(t, ld.DB(0), "k2")
	eventually(t, "the silent follower lags", func() bool { return leader.Status().Lag > 40*time.Millisecond })
	if err := leader.Gate(); !errors.Is(err, ErrNoReplicas) {
		t.Fatalf("gate with only an unsynced follower: %v", err)
	}
	follower.Follow(0, 1, leader.ReplAddr())
	eventually(t, "gate opens once a follower synced and acked", func() bool { return leader.Gate() == nil })
	mute.Close()
	if st := leader.Status(); st.RefusedNoReplicas == 0 {
		t.Fatalf("refusals not counted: %+v", st)
	}
	// A follower connected but silent: the lag bound refuses writes.
	ld2 := newDBs(t)
	lagged := newNode(t, ld2, Async)
	lagged.Lead(0, 1)
	muteFollower(t, lagged.ReplAddr(), 1)
	i := 0
	eventually(t, "gate closes for lag", func() bool {
		i++
		throttle(t, ld2.DB(0), fmt.Sprint("k", i)) // a new key: a write
		return errors.Is(lagged.Gate(), ErrLagging)
	})
	if lagged.Status().Refused == 0 {
		t.Fatal("lag refusals not counted")
	}
}

// muteFollower connects to a leader's replication address as a follower
// at epoch and never acknowledges anything (a stuck replica).
func muteFollower(t *testing.T, addr string, epoch uint64) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(frame(nil, frameHello, binary.AppendUvarint([]byte(magic), epoch))); err != nil {
		t.Fatal(err)
	}
	go io.Copy(io.Discard, c)
	t.Cleanup(func() { c.Close() })
	return c
}

// TestMinReplicasZeroStaysAvailable: with MinReplicas 0 (the default) a
// leader with no follower keeps accepting writes however old its effects
// get, and a sync barrier returns at once; a follower that connects and
// never acknowledges closes the gate for lag while connected; once it is
// gone the gate opens again and a barrier held meanwhile returns.
func TestMinReplicasZeroStaysAvailable(t *testing.T) {
	for _, ack := range []Ack{Async, Sync} {
		ld := newDBs(t)
		leader := newNode(t, ld, ack)
		leader.Lead(0, 1)
		deadline := time.Now().Add(10 * leader.Options().MaxLag)
		for i := 0; time.Now().Before(deadline); i++ {
			throttle(t, ld.DB(0), fmt.Sprint("n", i))
			if err := leader.Gate(); err != nil {
				t.Fatalf("ack %d: a leader with no follower refused a write: %v", ack, err)
			}
			time.Sleep(time.Millisecond)
		}
		if ack == Sync {
			if err := leader.Barrier(); err != nil {
				t.Fatalf("barrier with no follower and MinReplicas 0: %v", err)
			}
		}
		mute := muteFollower(t, leader.ReplAddr(), 1)
		i := 0
		eventually(t, "a connected, silent follower closes the gate for lag", func() bool {
			i++
			throttle(t, ld.DB(0), fmt.Sprint("k", i)) // a new key: a write
			return errors.Is(leader.Gate(), ErrLagging)
		})
		held := make(chan error, 1)
		if ack == Sync {
			go func() { held <- leader.Barrier() }()
		}
		mute.Close()
		eventually(t, "the gate opens once the follower is gone", func() bool { return leader.Gate() == nil })
		if ack == Sync {
			if err := <-held; err != nil {
				t.Fatalf("a barrier held while the follower was connected: %v", err)
			}
		}
	}
}

// TestSyncBarrier: in sync mode, once Barrier returns, the follower holds
// the write made before it; with no follower and MinReplicas 1 Barrier
// fails.
func TestSyncBarrier(t *testing.T) {
	ld, fd := newDBs(t), newDBs(t)
	leader, follower := newNodeMin(t, ld, Sync, 1), newNode(t, fd, Sync)
	leader.Lead(0, 1)
	throttle(t, ld.DB(0), "lonely")
	if err := leader.Barrier(); !errors.Is(err, ErrNoAck) {
		t.Fatalf("barrier with no follower: %v", err)
	}
	follower.Follow(0, 1, leader.ReplAddr())
	eventually(t, "follower synced", func() bool { return follower.Status().Synced })
	for i := 0; i < 200; i++ {
		key := fmt.Sprintf("k%d", i%13)
		r := throttle(t, ld.DB(i%2), key)
		if err := leader.Barrier(); err != nil {
			t.Fatalf("call %d: barrier: %v", i, err)
		}
		v, ok := fd.DB(i%2).Get([]byte(key), time.Now().UnixMilli())
		lv, _ := ld.DB(i%2).Get([]byte(key), time.Now().UnixMilli())
		if !r.Limited && (!ok || v.TAT < lv.TAT) {
			t.Fatalf("call %d: after the barrier the follower has %v %v, leader %v", i, v, ok, lv)
		}
	}
}

// TestPromotion: a follower promoted (Lead at a newer epoch) serves writes
// from the state it replicated, and the old leader, now following it,
// catches up.
func TestPromotion(t *testing.T) {
	ad, bd := newDBs(t), newDBs(t)
	a, b := newNode(t, ad, Async), newNode(t, bd, Async)
	a.Lead(0, 1)
	b.Follow(0, 1, a.ReplAddr())
	for i := 0; i < 5; i++ {
		throttle(t, ad.DB(0), "k")
	}
	eventually(t, "b mirrors a", func() bool { return fmt.Sprint(dump(bd)) == fmt.Sprint(dump(ad)) })
	b.Lead(0, 2)
	if r := throttle(t, bd.DB(0), "k"); !r.Limited || r.Remaining != 0 {
		t.Fatalf("promoted follower forgot the spent burst: %+v", r)
	}
	a.Follow(0, 2, b.ReplAddr())
	throttle(t, bd.DB(0), "other")
	eventually(t, "a mirrors b", func() bool { return fmt.Sprint(dump(ad)) == fmt.Sprint(dump(bd)) })
}

// TestInfo: INFO's replication lines. A leader with a synced follower is
// role:master with one slave0 line (state=online); the follower is
// role:slave with its link up and, once it applied everything, the
// leader's master_repl_offset as its slave_repl_offset; acknowledged
// batches land in the lag histogram (cumulative, its total last).
func TestInfo(t *testing.T) {
	ld, fd := newDBs(t), newDBs(t)
	leader, follower := newNode(t, ld, Async), newNode(t, fd, Async)
	leader.Lead(0, 3)
	follower.Follow(0, 3, leader.ReplAddr())
	eventually(t, "follower synced", func() bool { return follower.Status().Synced })
	for i := range 20 {
		throttle(t, ld.DB(0), fmt.Sprint("k", i))
	}
	field := func(lines []string, name string) string {
		for _, l := range lines {
			if k, v, ok := strings.Cut(l, ":"); ok && k == name {
				return v
			}
		}
		return "<absent>"
	}
	eventually(t, "the follower applied every batch", func() bool {
		li, fi := leader.Info(), follower.Info()
		return field(li, "master_repl_offset") != "0" && field(li, "repl_acked_offset") == field(li, "master_repl_offset") &&
			field(fi, "slave_repl_offset") == field(li, "master_repl_offset")
	})
	li, fi := leader.Info(), follower.Info()
	for name, want := range map[string]string{"role": "master", "connected_slaves": "1", "repl_role": "leader",
		"repl_epoch": "3", "repl_synced_followers": "1", "repl_ack": "async"} {
		if got := field(li, name); got != want {
			t.Errorf("leader %s:%s, want %s\n%s", name, got, want, strings.Join(li, "\n"))
		}
	}
	if s := field(li, "slave0"); !strings.Contains(s, "state=online") || !strings.Contains(s, "offset=") {
		t.Errorf("leader slave0:%s", s)
	}
	for name, want := range map[string]string{"role": "slave", "master_link_status": "up", "master_sync_in_progress": "0",
		"repl_role": "follower", "connected_slaves": "0"} {
		if got := field(fi, name); got != want {
			t.Errorf("follower %s:%s, want %s\n%s", name, got, want, strings.Join(fi, "\n"))
		}
	}
	st := leader.Status()
	if len(st.LagCounts) != len(LagBounds)+1 || st.LagCounts[len(st.LagCounts)-1] == 0 || st.LagSum <= 0 {
		t.Fatalf("lag histogram %v sum %v", st.LagCounts, st.LagSum)
	}
	for i := 1; i < len(st.LagCounts); i++ {
		if st.LagCounts[i] < st.LagCounts[i-1] {
			t.Fatalf("lag histogram not cumulative: %v", st.LagCounts)
		}
	}
}

// TestLeaderEvictionsReachFollower: a follower applies without a
// --maxmemory bound of its own (Redis's replica-ignore-maxmemory) because
// the leader's evictions reach it as deletes: after the leader evicts
// under a lowered bound, the follower holds exactly the leader's keys.
func TestLeaderEvictionsReachFollower(t *testing.T) {
	ld, fd := newDBs(t), newDBs(t)
	leader, follower := newNode(t, ld, Async), newNode(t, fd, Async)
	leader.Lead(0, 1)
	follower.Follow(0, 1, leader.ReplAddr())
	eventually(t, "follower synced", func() bool { return follower.Status().Synced })
	st := ld.DB(0)
	for i := range 2000 {
		throttle(t, st, fmt.Sprint("key", i))
	}
	eventually(t, "follower mirrors the leader", func() bool { return fmt.Sprint(dump(fd)) == fmt.Sprint(dump(ld)) })
	st.SetPolicy(store.AllKeysRandom)
	// Room for about half the keys: the store's fixed costs (its shards,
	// made as keys went to them) stay whatever is evicted.
	one, ok := st.KeyMemory([]byte("key0"), time.Now().UnixMilli())
	if !ok {
		t.Fatal("key0 missing")
	}
	st.SetMaxMemory(st.UsedMemory() - 1000*one)
	n, err := st.EvictToLimit(time.Now().UnixMilli())
	if err != nil || n == 0 {
		t.Fatalf("evicted %d: %v", n, err)
	}
	eventually(t, "follower drops what the leader evicted", func() bool { return fmt.Sprint(dump(fd)) == fmt.Sprint(dump(ld)) })
	if got := len(dump(fd)); got > 2000-int(n) {
		t.Fatalf("follower holds %d keys, leader evicted %d of 2000", got, n)
	}
}
