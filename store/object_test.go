package store

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"unsafe"
)

// testObj is a minimal Object: a counter of elements with a byte size.
type testObj struct{ n, size int }

func (o *testObj) Len() int                    { return o.n }
func (o *testObj) Size() int64                 { return int64(o.size) }
func (o *testObj) AppendImage(b []byte) []byte { return append(b, byte(o.n)) }

func newTestObj() Object { return &testObj{} }

// TestObjectLifecycle: a key of an object kind is created by a write,
// charged what its object reports, re-charged as it changes, versioned per
// write, deleted (and credited back) when emptied, refused to other kinds'
// operations, and replaced by a string SET.
func TestObjectLifecycle(t *testing.T) {
	s := New(Options{TrackDirty: true})
	const now = 1_000_000
	key := []byte("obj")
	base := keysUsed(s)
	grow := func(n, size int) error {
		_, err := s.WriteObject(key, KindHash, now, newTestObj, func(o Object) bool {
			o.(*testObj).n += n
			o.(*testObj).size += size
			return n != 0 || size != 0
		})
		return err
	}
	if err := grow(2, 1000); err != nil {
		t.Fatal(err)
	}
	if got, want := keysUsed(s)-base, keyCost(3)+objCost+1000; got != want {
		t.Fatalf("charged %d, want %d", got, want)
	}
	v1, _ := s.Version(key, now)
	if err := grow(1, 500); err != nil {
		t.Fatal(err)
	}
	if got, want := keysUsed(s)-base, keyCost(3)+objCost+1500; got != want {
		t.Fatalf("after growth charged %d, want %d", got, want)
	}
	if v2, _ := s.Version(key, now); v2 == v1 {
		t.Fatal("a write did not change the version (WATCH)")
	}
	v2, _ := s.Version(key, now)
	grow(0, 0) // no change
	if v3, _ := s.Version(key, now); v3 != v2 {
		t.Fatal("an unchanged object changed the version")
	}
	if v, ok := s.Get(key, now); !ok || v.Kind != KindHash {
		t.Fatalf("Get: %+v %v", v, ok)
	}
	if _, err := s.WriteObject(key, KindList, now, newTestObj, func(Object) bool { return true }); !errors.Is(err, ErrWrongType) {
		t.Fatalf("list op on a hash: %v", err)
	}
	if _, err := s.ReadObject(key, KindZSet, now, func(Object) {}); !errors.Is(err, ErrWrongType) {
		t.Fatalf("zset read of a hash: %v", err)
	}
	if _, err := s.Throttle(key, mustLimit(t, 4, 1, 1), 1, now*1e6); !errors.Is(err, ErrWrongType) {
		t.Fatalf("CL.THROTTLE on a hash: %v", err)
	}
	// Drained as an object with its image.
	var changes []Change
	s.DrainFunc(now, nil, func(c Change) { changes = append(changes, c) })
	if len(changes) != 1 || changes[0].Kind != KindHash || string(changes[0].Image) != "\x03" {
		t.Fatalf("drained %+v", changes)
	}
	// Emptied: the key disappears and its charge goes.
	if err := grow(-3, -1500); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Get(key, now); ok {
		t.Fatal("an emptied object's key survived")
	}
	base += int64(cap(s.shardOf(key).delBlock)) // the deletion queue's block (memory.go)
	if got := keysUsed(s) - base; got != 0 {
		t.Fatalf("after deletion %d bytes still charged", got)
	}
	// A string SET replaces an object and releases it.
	grow(1, 100)
	s.Update(key, now, func(Value, bool) (Value, Action) { return Value{TAT: 5}, Put })
	if v, _ := s.Get(key, now); v.Kind != KindString || v.TAT != 5 {
		t.Fatalf("after SET: %+v", v)
	}
	if got := keysUsed(s) - base; got != keyCost(3) {
		t.Fatalf("after SET over an object %d charged, want %d", got, keyCost(3))
	}
	// A write with no create on a missing key does nothing.
	ran, err := s.WriteObject([]byte("none"), KindList, now, nil, func(Object) bool { t.Fatal("fn ran"); return true })
	if ran || err != nil {
		t.Fatalf("missing key: %v %v", ran, err)
	}
}

// TestObjectExpiryAndOOM: an object key expires like any key (its memory
// credited back), and creating one over the bound under noeviction is
// ErrOOM with nothing created.
func TestObjectExpiryAndOOM(t *testing.T) {
	s := New(Options{})
	const now = 1_000_000
	base := keysUsed(s)
	s.WriteObject([]byte("e"), KindZSet, now, newTestObj, func(o Object) bool { o.(*testObj).n, o.(*testObj).size = 1, 64; return true })
	s.Update([]byte("e"), now, func(v Value, _ bool) (Value, Action) { v.ExpireAtMs = now + 10; return v, Put })
	if v, _ := s.Get([]byte("e"), now); v.Kind != KindZSet || v.ExpireAtMs != now+10 {
		t.Fatalf("EXPIRE changed the kind or missed: %+v", v)
	}
	if found, _ := s.ReadObject([]byte("e"), KindZSet, now+11, func(Object) {}); found {
		t.Fatal("expired object read")
	}
	if got := keysUsed(s) - base; got != 0 {
		t.Fatalf("%d bytes charged after expiry", got)
	}
	s.SetMaxMemory(1) // far below what is used: every creation is refused
	_, err := s.WriteObject([]byte("new"), KindHash, now, newTestObj, func(o Object) bool { o.(*testObj).n = 1; return true })
	if !errors.Is(err, ErrOOM) {
		t.Fatalf("creation over the bound: %v", err)
	}
	if _, ok := s.Get([]byte("new"), now); ok {
		t.Fatal("created despite ErrOOM")
	}
}

// TestObjectSlotTracksHeap: what a key's object place is charged (objCost,
// with the object's own Size) against the heap it really adds beyond a TAT
// key: two stores of the same keys, one of TATs and one of objects whose
// Size is their 16-byte allocation, measured after collections. The slot
// is one 8-byte word (the generation and the type are in the entry's
// tat), and objCost is its size, its quarter of growth slack and its
// free-list word.
func TestObjectSlotTracksHeap(t *testing.T) {
	if got := unsafe.Sizeof(objSlot{}); got != 8 || objCost != 8+8/4+4 {
		t.Fatalf("objSlot is %d bytes, objCost %d; want 8 and %d", got, objCost, 8+8/4+4)
	}
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
				if _, err := s.WriteObject(key, KindHash, now, newTestObj, func(o Object) bool {
					o.(*testObj).n, o.(*testObj).size = 1, 16 // its allocation
					return true
				}); err != nil {
					t.Fatal(err)
				}
			} else {
				putValue(s, string(key), now, Value{TAT: 1})
			}
			if i%10_000 == 0 {
				s.Drain(now, nil)
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
	t.Logf("per key: TAT heap %.1f charged %.1f; object heap %.1f charged %.1f; the object's place: heap %.1f, charged %.1f (%.3f)",
		hT, cT, hO, cO, hO-hT, cO-cT, r)
	if r < 0.8 || r > 1.25 {
		t.Errorf("an object's place is charged %.1f B for %.1f B of heap (%.3f), want 0.8-1.25", cO-cT, hO-hT, r)
	}
}
