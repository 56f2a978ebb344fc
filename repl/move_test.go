package repl

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/celld/celld/cluster"
	"github.com/celld/celld/kinds"
	"github.com/celld/celld/store"
	"github.com/celld/celld/window"
)

// moveRange is the slot range the move tests hand over.
const moveFirst, moveLast = 0, 8191

func inMove(key string) bool {
	s := cluster.KeySlotString(key)
	return s >= moveFirst && s <= moveLast
}

// dumpSlots is dump restricted to keys of the moved slots (in) or the
// others (!in).
func dumpSlots(d *store.Databases, in bool) []string {
	var out []string
	for _, line := range dump(d) {
		var db int
		var key string
		fmt.Sscanf(line, "%d %q", &db, &key)
		if inMove(key) == in {
			out = append(out, line)
		}
	}
	return out
}

// fillKinds writes keys of every kind (TAT, text string, window, hash,
// list, sorted set), tag i, half in the moved slots and half outside.
func fillKinds(t *testing.T, d *store.Databases, tag string, n int) {
	t.Helper()
	nowMs := time.Now().UnixMilli()
	wl := window.Limit{Mode: window.Sliding, Limit: 5, WindowMs: 60_000}
	for i := range n {
		k := func(kind string) []byte { return []byte(fmt.Sprintf("%s:%s:%d", kind, tag, i)) }
		throttle(t, d.DB(0), string(k("tat")))
		d.DB(0).Put(k("str"), store.Value{Raw: "text" + tag, Invalid: true}, nowMs, 0, false)
		if _, err := d.DB(0).Window(k("win"), wl, 1, nowMs); err != nil {
			t.Fatal(err)
		}
		d.DB(1).WriteObject(k("hash"), store.KindHash, nowMs, func() store.Object { return kinds.NewHash() },
			func(o store.Object) bool { o.(*kinds.Hash).Set("f"+tag, "v"); return true })
		d.DB(0).WriteObject(k("list"), store.KindList, nowMs, func() store.Object { return kinds.NewList() },
			func(o store.Object) bool { o.(*kinds.List).PushBack(tag); return true })
		d.DB(0).WriteObject(k("zset"), store.KindZSet, nowMs, func() store.Object { return kinds.NewZSet() },
			func(o store.Object) bool { o.(*kinds.ZSet).Set("m"+tag, float64(i)); return true })
	}
}

func importState(n *Node, id int64) string {
	for _, s := range n.ImportStates() {
		if s.ID == id {
			return s.State
		}
	}
	return ""
}

// TestSlotMoveStreams: the target leader pulls the moved slots' keys of
// every kind from the source leader (snapshot, then the live stream, the
// other slots' keys never), drops keys it held in those slots from before,
// keeps its other keys, and once asked to seal is told "sealed" only after
// the source stopped serving the slots and with every effect made before
// applied: at that moment the two hold the same state for those slots.
func TestSlotMoveStreams(t *testing.T) {
	sd, td := newDBs(t), newDBs(t)
	src, dst := newNode(t, sd, Async), newNode(t, td, Async)
	var serving atomic.Bool
	serving.Store(true)
	src.SetServes(func(s int) bool { return serving.Load() && s >= moveFirst && s <= moveLast })
	src.Lead(0, 5)
	dst.Lead(1, 9)
	fillKinds(t, sd, "a", 40)
	nowMs := time.Now().UnixMilli()
	// The target's own keys: stale ones in the moved slots, its own outside.
	var staleKey, ownKey string
	for i := 0; staleKey == "" || ownKey == ""; i++ {
		k := fmt.Sprintf("mine%d", i)
		if inMove(k) {
			staleKey = k
		} else {
			ownKey = k
		}
	}
	for _, k := range []string{staleKey, ownKey} {
		td.DB(0).Put([]byte(k), store.Value{Raw: "x", Invalid: true}, nowMs, 0, false)
	}
	ownBefore := dumpSlots(td, false)

	dst.Import([]ImportTask{{ID: 1, First: moveFirst, Last: moveLast, Source: src.ReplAddr(), Epoch: 5}})
	eventually(t, "import synced", func() bool { return importState(dst, 1) == "synced" })
	if _, ok := td.DB(0).Get([]byte(staleKey), nowMs); ok {
		t.Fatal("a key the target held in the moved slots survived the import")
	}
	if got := dumpSlots(td, false); !slices.Equal(got, ownBefore) {
		t.Fatalf("the target's other keys changed:\n%v\nwant\n%v", got, ownBefore)
	}
	want := dumpSlots(sd, true)
	if len(want) < 100 {
		t.Fatalf("only %d keys in the moved slots", len(want))
	}
	eventually(t, "snapshot merged", func() bool { return slices.Equal(dumpSlots(td, true), want) })

	// The stream: more writes, deletes, of every kind.
	fillKinds(t, sd, "b", 40)
	for i := 0; i < 40; i += 3 {
		sd.DB(0).Delete([]byte(fmt.Sprintf("str:a:%d", i)), time.Now().UnixMilli())
	}
	eventually(t, "stream applied", func() bool { return slices.Equal(dumpSlots(td, true), dumpSlots(sd, true)) })

	// The seal: asked while the source still serves the slots, it waits.
	dst.Import([]ImportTask{{ID: 1, First: moveFirst, Last: moveLast, Source: src.ReplAddr(), Epoch: 5, Final: true}})
	for range 50 {
		fillKinds(t, sd, "c", 2)
		if s := importState(dst, 1); s == "sealed" {
			t.Fatal("import sealed while the source still serves the slots")
		}
		time.Sleep(2 * time.Millisecond)
	}
	// The last writes, then the source's server stops routing the slots:
	// the seal must carry them.
	fillKinds(t, sd, "d", 40)
	serving.Store(false)
	eventually(t, "sealed", func() bool { return importState(dst, 1) == "sealed" })
	if got, want := dumpSlots(td, true), dumpSlots(sd, true); !slices.Equal(got, want) {
		t.Fatalf("sealed without the final delta: target %d keys, source %d\n%s", len(got), len(want), diffLines(got, want))
	}
	if out := dumpSlots(td, false); slices.ContainsFunc(out, func(l string) bool { return strings.Contains(l, ":a:") }) {
		t.Fatal("a key outside the moved slots reached the target")
	}
	dst.Import(nil)
	if len(dst.ImportStates()) != 0 {
		t.Fatal("Import(nil) left an import running")
	}
}

// TestSlotMoveSourceFailover: the source leader dies mid-move; its
// follower (promoted at a newer epoch) is the new source, and the target's
// import of the same move reconnects to it and merges its snapshot into
// what it already has: a TAT the target holds further ahead is kept
// (largest TAT wins), a string takes the source's value; the move then
// seals from the new source.
func TestSlotMoveSourceFailover(t *testing.T) {
	ad, bd, td := newDBs(t), newDBs(t), newDBs(t)
	a, b, dst := newNode(t, ad, Async), newNode(t, bd, Async), newNode(t, td, Async)
	var serving atomic.Bool
	serving.Store(true)
	serves := func(s int) bool { return serving.Load() && s >= moveFirst && s <= moveLast }
	a.SetServes(serves)
	b.SetServes(serves)
	a.Lead(0, 5)
	fillKinds(t, ad, "a", 30)
	b.Follow(0, 5, a.ReplAddr())
	eventually(t, "b synced", func() bool { return b.Status().Synced })
	dst.Import([]ImportTask{{ID: 7, First: moveFirst, Last: moveLast, Source: a.ReplAddr(), Epoch: 5}})
	eventually(t, "import synced", func() bool { return importState(dst, 7) == "synced" })
	eventually(t, "b caught up", func() bool { return slices.Equal(dumpSlots(bd, true), dumpSlots(ad, true)) })

	a.Close() // the source leader dies
	// What the promoted follower lacks (async lag): the target's copy of a
	// TAT is further ahead than b's.
	var tatKey string
	for i := 0; ; i++ {
		if k := fmt.Sprintf("tat:a:%d", i); inMove(k) {
			tatKey = k
			break
		}
	}
	nowMs := time.Now().UnixMilli()
	tv, _ := td.DB(0).Get([]byte(tatKey), nowMs)
	bd.DB(0).ApplyChange(store.Change{Key: []byte(tatKey), TAT: tv.TAT - 1e9, IsTAT: true, ExpireAtMs: nowMs + 60_000}, nil, false, nowMs)
	b.Lead(0, 6)
	fillKinds(t, bd, "b", 10)
	dst.Import([]ImportTask{{ID: 7, First: moveFirst, Last: moveLast, Source: b.ReplAddr(), Epoch: 6, Final: true}})
	eventually(t, "import synced with the new source", func() bool {
		s := importState(dst, 7)
		return s == "synced" || s == "sealed"
	})
	if v, _ := td.DB(0).Get([]byte(tatKey), nowMs); v.TAT != tv.TAT {
		t.Fatalf("merge by max: target's TAT %d after the new source's snapshot, want its own %d", v.TAT, tv.TAT)
	}
	serving.Store(false)
	eventually(t, "sealed", func() bool { return importState(dst, 7) == "sealed" })
	got, want := dumpSlots(td, true), dumpSlots(bd, true)
	// Every key but the merged TAT is the new source's.
	drop := func(ls []string) []string {
		return slices.DeleteFunc(slices.Clone(ls), func(l string) bool { return strings.Contains(l, fmt.Sprintf("%q", tatKey)) })
	}
	if !slices.Equal(drop(got), drop(want)) {
		t.Fatalf("after the failover the target holds\n%s", diffLines(got, want))
	}
}

// TestSlotMoveWrongEpoch: a source that does not lead at the epoch the
// target names refuses the move (a deposed leader cannot hand slots over).
func TestSlotMoveWrongEpoch(t *testing.T) {
	sd, td := newDBs(t), newDBs(t)
	src, dst := newNode(t, sd, Async), newNode(t, td, Async)
	src.Lead(0, 5)
	fillKinds(t, sd, "a", 5)
	dst.Import([]ImportTask{{ID: 1, First: moveFirst, Last: moveLast, Source: src.ReplAddr(), Epoch: 4}})
	for range 20 {
		if s := importState(dst, 1); s != "connecting" {
			t.Fatalf("import %s from a source at another epoch", s)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if td.Keys() != 0 {
		t.Fatalf("the target took %d keys from a source at another epoch", td.Keys())
	}
}

func diffLines(got, want []string) string {
	var b strings.Builder
	for _, l := range got {
		if !slices.Contains(want, l) {
			fmt.Fprintf(&b, "+ %s\n", l)
		}
	}
	for _, l := range want {
		if !slices.Contains(got, l) {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	return b.String()
}
