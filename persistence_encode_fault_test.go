package main

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/celld/celld/persist"
	"github.com/celld/celld/store"
	"github.com/celld/celld/window"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// failSwitch fails every mutating filesystem operation while on: the disk
// refuses writes (full, or gone read-only).
type failSwitch struct{ on atomic.Bool }

func (s *failSwitch) String() string { return "failSwitch" }

func (s *failSwitch) MaybeError(op errorfs.Op) error {
	if s.on.Load() && op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
		return errorfs.ErrInjected
	}
	return nil
}

// dumpAll is every live key of every database of p, with its kind, value
// (a TAT as its number, a text or a window state as its bytes, an
// object's content through dumpKinds) and expiry, for comparing a live
// server with a restored one.
func dumpAll(t *testing.T, p *persistence, nowMs int64) map[string]string {
	t.Helper()
	out := map[string]string{}
	p.databases().Each(func(i int, st *store.Store) {
		var objects []string
		for sh := range store.NumShards {
			st.DumpShard(sh, nowMs, func(c store.Change) {
				k := fmt.Sprintf("db%d/%s", i, c.Key)
				switch {
				case c.Kind != store.KindString && c.Kind != store.KindWindow:
					objects = append(objects, string(c.Key))
				case c.IsTAT:
					out[k] = fmt.Sprintf("tat %d exp=%d", c.TAT, c.ExpireAtMs)
				case c.WinMode != 0: // inline counters: the bytes they stand for
					out[k] = fmt.Sprintf("%s %q exp=%d", c.Kind, window.AppendCounters(nil, c.WinMode, c.Win), c.ExpireAtMs)
				default:
					out[k] = fmt.Sprintf("%s %q exp=%d", c.Kind, c.Text, c.ExpireAtMs)
				}
			})
		}
		for k, v := range dumpKinds(t, st, nowMs, objects) {
			out[fmt.Sprintf("db%d/%s", i, k)] = v
		}
	})
	return out
}

// TestFailedWriteKeepsEveryDrainedChange: the server's windows encode each
// change straight into the log's buffer (persistence.encodePiece); when
// the write of that buffer fails, every change it held must stay pending
// (decoded back into the flusher's pending set) and reach the disk once
// writes succeed again, in order with the changes drained after it. The
// changes cover every kind and path of the drain: TATs, verbatim strings,
// invalid texts, windows, hashes, lists and sorted sets (images and
// deltas), deletions, keys that expired before the drain, keys of another
// database, a SWAPDB, with windows drained while the disk fails (on top of
// a pending backlog). After recovery a restart must restore exactly the
// live state; a change dropped on the failure path (written neither then
// nor later) shows up as a difference.
func TestFailedWriteKeepsEveryDrainedChange(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			testFailedWriteKeepsEveryDrainedChange(t, seed)
		})
	}
}

func testFailedWriteKeepsEveryDrainedChange(t *testing.T, seed uint64) {
	dir := t.TempDir()
	nowMs := int64(1_800_000_000_000)
	clock := func() time.Time { return time.UnixMilli(nowMs) }
	sw := &failSwitch{}
	db, err := persist.Open(dir, persist.Options{Logger: quietLog(), FS: errorfs.Wrap(vfs.Default, sw), Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	st := store.New(store.Options{TrackDirty: true})
	p := &persistence{db: db, st: st, log: quietLog()}
	p.fl = persist.NewFlusher(db, persist.FlusherConfig{Interval: time.Hour, Encode: p.encodePiece, Now: clock, Logger: quietLog()})
	r := rand.New(rand.NewPCG(seed, 7))
	lim := mustGCRA(t)
	wl := window.Limit{Mode: window.Sliding, Limit: 50, WindowMs: 10_000}
	objKinds := []store.Kind{store.KindHash, store.KindList, store.KindZSet}

	// changes makes n random changes across the kinds and databases.
	changes := func(n int) {
		for range n {
			st := p.databases().DB([]int{0, 0, 0, 3}[r.IntN(4)])
			i := r.IntN(40)
			switch r.IntN(9) {
			case 0:
				if _, err := st.Throttle([]byte("tat"+strconv.Itoa(i)), lim, 1, nowMs*1e6); err != nil && err != store.ErrWrongType {
					t.Fatal(err)
				}
			case 1:
				v := store.StringValueOf(fmt.Sprintf("value %d %s", r.IntN(1000), string(make([]byte, r.IntN(120)))))
				if r.IntN(3) == 0 {
					v.ExpireAtMs = nowMs + 1 + int64(r.IntN(3)) // some expire before the drain
				}
				st.Put([]byte("str"+strconv.Itoa(i)), v, nowMs, store.PutAlways, false)
			case 2:
				st.Put([]byte("num"+strconv.Itoa(i)), store.StringValueOf([]string{"+5", "007", "12", "-3"}[r.IntN(4)]), nowMs, store.PutAlways, false)
			case 3:
				if _, err := st.Window([]byte("win"+strconv.Itoa(i)), wl, 1, nowMs); err != nil && err != store.ErrWrongType {
					t.Fatal(err)
				}
			case 4, 5, 6:
				k := objKinds[i%3]
				key := []byte("obj" + strconv.Itoa(i))
				mk := kindMakers[k]
				big := r.IntN(4) == 0 // past smallImage: journaled, drained as deltas
				if _, err := st.WriteObject(key, k, nowMs, mk, func(o store.Object) bool {
					for range 1 + r.IntN(3) + 100*btoi(big) {
						randomKindWrite(r, k, o)
					}
					return true
				}); err != nil && err != store.ErrWrongType {
					t.Fatal(err)
				}
			case 7:
				st.Delete([]byte([]string{"tat", "str", "win", "obj", "num"}[r.IntN(5)]+strconv.Itoa(i)), nowMs)
			case 8:
				if r.IntN(10) == 0 {
					p.databases().Swap(0, 3)
				}
			}
		}
	}
	flush := func(wantErr bool) {
		t.Helper()
		err := p.fl.FlushNow()
		if wantErr != (err != nil) {
			t.Fatalf("FlushNow: %v (want an error: %v)", err, wantErr)
		}
	}

	changes(300)
	flush(false)
	for round := range 4 {
		changes(200)
		nowMs += 5 // the short expiries pass: those keys drain as deletions
		sw.on.Store(true)
		flush(true)
		if s := p.fl.Status(); s.PendingKeys == 0 {
			t.Fatalf("round %d: a failed write left nothing pending: %+v", round, s)
		}
		changes(100) // drained behind the pending backlog, written by nothing yet
		flush(true)
		sw.on.Store(false)
		changes(50)
		flush(false)
		if s := p.fl.Status(); s.PendingKeys != 0 || !s.LastFlushOK {
			t.Fatalf("round %d: after recovery: %+v", round, s)
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	want := dumpAll(t, p, nowMs)
	if len(want) < 100 {
		t.Fatalf("only %d live keys: too few to tell", len(want))
	}

	db2, err := persist.Open(dir, persist.Options{Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	p2 := &persistence{db: db2, st: store.New(store.Options{TrackDirty: true}), log: quietLog()}
	if err := p2.load(time.UnixMilli(nowMs)); err != nil {
		t.Fatal(err)
	}
	got := dumpAll(t, p2, nowMs)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: restored %q, live %q", k, got[k], v)
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: restored %q, gone from the live state", k, v)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
