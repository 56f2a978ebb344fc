package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"
)

// ipData is what an inPlaceObj's word points at.
type ipData struct {
	n, id int
	freed *atomic.Bool // set by its finalizer
}

// inPlaceObj is an InPlace Object (as kinds.Hash): one word, which the
// store keeps in the object's slot. Its Size is its data's allocation.
type inPlaceObj struct{ p unsafe.Pointer }

func (o *inPlaceObj) data() *ipData { return (*ipData)(o.p) }
func (o *inPlaceObj) Len() int {
	if o.p == nil {
		return 0
	}
	return o.data().n
}
func (o *inPlaceObj) Size() int64 { return int64(unsafe.Sizeof(ipData{})) }
func (o *inPlaceObj) AppendImage(b []byte) []byte {
	return binary.AppendUvarint(binary.AppendUvarint(b, uint64(o.data().n)), uint64(o.data().id))
}
func (o *inPlaceObj) InPlace() {}
func (o *inPlaceObj) Duplicate() any {
	return &inPlaceObj{p: unsafe.Pointer(newIPData(o.data().n, o.data().id))}
}

func newIPData(n, id int) *ipData {
	d := &ipData{n: n, id: id, freed: new(atomic.Bool)}
	runtime.SetFinalizer(d, func(d *ipData) { d.freed.Store(true) })
	return d
}

// TestInPlaceObjects: an InPlace object lives in its slot (no struct of
// its own) through the table's growth, writes that replace its word,
// collections, RENAME (handed over), COPY (duplicated), deletions and
// reuse of freed places, and is charged objCost and its Size. A slot that
// handed out a copy of the word would lose the writes; one the collector
// did not scan would see its data finalized while the key lives.
func TestInPlaceObjects(t *testing.T) {
	s := New(Options{TrackDirty: true})
	const now = 1_000_000
	const n = 3000 // objs grows many times in each of the 256 shards' tables
	key := func(i int) []byte { return fmt.Appendf(nil, "ip%05d", i) }
	mk := func() Object { return &inPlaceObj{} }
	set := func(i, elems, id int) {
		t.Helper()
		if _, err := s.WriteObject(key(i), KindList, now, mk, func(o Object) bool {
			o.(*inPlaceObj).p = unsafe.Pointer(newIPData(elems, id))
			return true
		}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(i, id int) {
		t.Helper()
		found, err := s.ReadObject(key(i), KindList, now, func(o Object) {
			d := o.(*inPlaceObj).data()
			if d.id != id || d.n != 1 || d.freed.Load() {
				t.Fatalf("key %d: id %d n %d freed %v, want id %d", i, d.id, d.n, d.freed.Load(), id)
			}
		})
		if !found || err != nil {
			t.Fatalf("key %d: found %v, %v", i, found, err)
		}
	}
	for i := range n {
		set(i, 1, i)
	}
	for i := range n {
		set(i, 1, 10*i) // replaces the word in the slot
	}
	for range 3 {
		runtime.GC()
		time.Sleep(5 * time.Millisecond) // finalizers run
	}
	for i := range n {
		check(i, 10*i)
	}
	if got, want := func() int64 { m, _ := s.KeyMemory(key(7), now); return m }(), keyCost(7)+objCost+int64(unsafe.Sizeof(ipData{})); got != want {
		t.Fatalf("MEMORY USAGE %d, want %d", got, want)
	}
	// Handed over by RENAME, duplicated by COPY.
	if ok, err := s.Rename(key(1), key(n+1), now, false); !ok || err != nil {
		t.Fatalf("rename: %v %v", ok, err)
	}
	check(n+1, 10)
	if ok, err := s.Copy(key(2), key(n+2), now, false); !ok || err != nil {
		t.Fatalf("copy: %v %v", ok, err)
	}
	set(n+2, 1, -2)
	check(2, 20)
	check(n+2, -2)
	// Deletions free places; new keys reuse them.
	for i := 3; i < n; i += 2 {
		s.Delete(key(i), now)
	}
	for i := n + 3; i < n+1000; i++ {
		set(i, 1, i)
	}
	runtime.GC()
	for i := 4; i < n; i += 2 {
		check(i, 10*i)
	}
	for i := n + 3; i < n+1000; i++ {
		check(i, i)
	}
	// The drain's images are the slots' objects.
	found := 0
	for _, c := range s.Drain(now, nil) {
		if bytes.Equal(c.Key, key(8)) {
			found++
			if want := (&inPlaceObj{p: unsafe.Pointer(&ipData{n: 1, id: 80})}).AppendImage(nil); !bytes.Equal(c.Image, want) {
				t.Fatalf("image %x, want %x", c.Image, want)
			}
		}
	}
	if found != 1 {
		t.Fatalf("key 8 drained %d times", found)
	}
	runtime.KeepAlive(s)
}

// TestInPlaceSlotTracksHeap: an InPlace object's key costs the heap of
// its data and its 8-byte slot, no struct of its own, and is charged
// about that (objCost and Size).
func TestInPlaceSlotTracksHeap(t *testing.T) {
	n := 100_000
	if testing.Short() || raceEnabled {
		n = 40_000
	}
	const now = 1_000_000
	perKey := func(obj bool) (heap, charged float64) {
		h0 := liveHeap()
		s := New(Options{TrackDirty: true})
		u0 := s.UsedMemory()
		key := make([]byte, 0, 16)
		for i := range n {
			key = fmt.Appendf(key[:0], "k%07d", i)
			if obj {
				if _, err := s.WriteObject(key, KindHash, now, func() Object { return &inPlaceObj{} }, func(o Object) bool {
					o.(*inPlaceObj).p = unsafe.Pointer(&ipData{n: 1}) // 24 bytes: the 24-byte class
					return true
				}); err != nil {
					t.Fatal(err)
				}
			} else {
				putValue(s, string(key), now, Value{TAT: 1})
			}
		}
		s.Drain(now, nil)
		heap = float64(liveHeap()-h0) / float64(n)
		charged = float64(s.UsedMemory()-u0) / float64(n)
		runtime.KeepAlive(s)
		return heap, charged
	}
	hT, cT := perKey(false)
	hO, cO := perKey(true)
	r := (cO - cT) / (hO - hT)
	t.Logf("per key: TAT heap %.1f charged %.1f; in-place object heap %.1f charged %.1f; the object: heap %.1f, charged %.1f (%.3f)",
		hT, cT, hO, cO, hO-hT, cO-cT, r)
	if r < 0.8 || r > 1.25 {
		t.Errorf("an in-place object is charged %.1f B for %.1f B of heap (%.3f), want 0.8-1.25", cO-cT, hO-hT, r)
	}
	// A struct of its own (8 bytes) would show as 8 more bytes of heap:
	// the data (24), the slot (8) and its slack are under 37.
	if hO-hT >= 24+8+5 {
		t.Errorf("an in-place object adds %.1f B of heap, want < 37 (data + slot + slack)", hO-hT)
	}
}

// jObj is a Journaled InPlace Object for the generation tests: its data
// is a list of records; a journal keeps the records since the last take.
type jObj struct{ p unsafe.Pointer }

type jData struct {
	recs      []string
	journal   []string
	recording bool
}

func (o *jObj) d() *jData { return (*jData)(o.p) }
func (o *jObj) Len() int  { return len(o.d().recs) }

// Size is over smallImage, so the drain journals it.
func (o *jObj) Size() int64 { return 1000 }
func (o *jObj) AppendImage(b []byte) []byte {
	for _, r := range o.d().recs {
		b = append(append(b, r...), ';')
	}
	return b
}
func (o *jObj) InPlace()      {}
func (o *jObj) StartJournal() { o.d().journal, o.d().recording = nil, true }
func (o *jObj) StopJournal()  { o.d().journal, o.d().recording = nil, false }
func (o *jObj) TakeJournal(b []byte) ([]byte, bool) {
	if !o.d().recording {
		return b, false
	}
	for _, r := range o.d().journal {
		b = append(b, r...)
	}
	o.d().journal = nil
	return b, true
}
func (o *jObj) add(r string) {
	o.d().recs = append(o.d().recs, r)
	if o.d().recording {
		o.d().journal = append(o.d().journal, r)
	}
}

// TestGenerationsWrap: the generation lives in the entry's tat modulo
// 2^28; drains go on across the wrap (segments genMask, 0, 1) and replay
// applies each delta after the image and the delta before it, skips a
// delta the image already holds, across the wrap too.
func TestGenerationsWrap(t *testing.T) {
	for _, c := range []struct{ a, b uint64 }{{1, 0}, {0, genMask}, {5, genMask - 3}, {1 << (genBits - 2), 0}} {
		if !genAfter(c.a, c.b) || genAfter(c.b, c.a) || genAfter(c.a, c.a) {
			t.Fatalf("genAfter(%d, %d)", c.a, c.b)
		}
	}
	for _, g := range []uint64{0, 1, genMask, genMask | genImaged, 12345 | genImaged} {
		if tatGen(genTat(g)|0x1234|3<<typeShift) != g {
			t.Fatalf("generation %x does not round-trip through a tat", g)
		}
	}
	const now = 1_000_000
	key := []byte("jkey")
	s := New(Options{TrackDirty: true})
	write := func(r string) {
		t.Helper()
		if _, err := s.WriteObject(key, KindList, now, func() Object { return &jObj{p: unsafe.Pointer(&jData{})} }, func(o Object) bool {
			o.(*jObj).add(r)
			return true
		}); err != nil {
			t.Fatal(err)
		}
	}
	drain := func() Change {
		t.Helper()
		cs := s.Drain(now, nil)
		if len(cs) != 1 {
			t.Fatalf("%d changes", len(cs))
		}
		c := cs[0]
		c.Image = bytes.Clone(c.Image)
		return c
	}
	write("a")
	img := drain()
	if img.Delta || img.Gen != 1 || string(img.Image) != "a;" {
		t.Fatalf("first drain: %+v", img)
	}
	// A long-lived key: its generation is about to wrap.
	sh := s.shardFor(s.hashKey(key))
	sh.mu.Lock()
	slot, _, _ := sh.findLocked(key, s.hashKey(key))
	sh.setGenLocked(slot, genMask-1|genImaged)
	ty := sh.slab[slot].tat >> typeShift & 7
	sh.mu.Unlock()
	var deltas []Change
	for i, want := range []uint64{genMask, 0, 1} {
		write(fmt.Sprint(i))
		c := drain()
		if !c.Delta || c.Gen != want {
			t.Fatalf("delta %d: Delta %v Gen %d, want %d", i, c.Delta, c.Gen, want)
		}
		deltas = append(deltas, c)
	}
	sh.mu.Lock()
	if got := sh.slab[slot].tat >> typeShift & 7; got != ty || sh.objLocked(slot) == nil {
		t.Fatalf("the generations overwrote the tat's type (%d, was %d) or index", got, ty)
	}
	sh.mu.Unlock()
	// Replay: the image at genMask-1, then the deltas, one of them twice.
	r := New(Options{})
	replay := func(payloads ...[]byte) string {
		var got []byte
		for _, p := range payloads {
			if _, _, err := r.LoadDelta(key, KindList, p, 0, func(obj Object, recs []byte) error {
				got = append(got, recs...)
				obj.(*jObj).add(string(recs))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		return string(got)
	}
	r.LoadObjectGen(key, KindList, &jObj{p: unsafe.Pointer(&jData{recs: []string{"a"}})}, genMask-1, 0)
	if got := replay(deltas[0].Image, deltas[0].Image, deltas[1].Image, deltas[2].Image); got != "012" {
		t.Fatalf("replayed %q, want 012", got)
	}
	// A snapshot's image of generation 0 (past the wrap): the delta of
	// genMask, drained before it, is in it already; 1 is not.
	r.LoadObjectGen(key, KindList, &jObj{p: unsafe.Pointer(&jData{recs: []string{"a", "0", "1"}})}, 0, 0)
	if got := replay(deltas[0].Image, deltas[2].Image); got != "2" {
		t.Fatalf("replayed %q after an image of generation 0, want 2", got)
	}
	var content []byte
	r.ReadObject(key, KindList, now, func(o Object) { content = o.AppendImage(nil) })
	if string(content) != "a;0;1;2;" {
		t.Fatalf("replayed content %q", content)
	}
}
