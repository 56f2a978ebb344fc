package store

import (
	"errors"
	"testing"

	"github.com/celld/celld/window"
)

// RENAME hands an object over (charge moves with it, nothing leaks) and
// COPY of one is refused; a window key is renamed and copied with a state
// of its own in the destination's shard.
func TestRenameCopyOtherKinds(t *testing.T) {
	s := New(Options{}) // no delete tracking: its blocks are charged too
	const now = 1_000_000
	base := keysUsed(s)
	if _, err := s.WriteObject([]byte("h"), KindHash, now, newTestObj, func(o Object) bool {
		o.(*testObj).n, o.(*testObj).size = 3, 700
		return true
	}); err != nil {
		t.Fatal(err)
	}
	charged := keysUsed(s) - base
	if ok, err := s.Copy([]byte("h"), []byte("h2"), now, false); ok || !errors.Is(err, ErrNotCopyable) {
		t.Fatalf("COPY of a hash: %v %v, want ErrNotCopyable", ok, err)
	}
	for i, dst := range []string{"renamed-far-away-key", "h"} { // another shard, then likely back
		src := "h"
		if i == 1 {
			src = "renamed-far-away-key"
		}
		if ok, err := s.Rename([]byte(src), []byte(dst), now, false); !ok || err != nil {
			t.Fatalf("RENAME %s %s: %v %v", src, dst, ok, err)
		}
		if _, ok := s.Get([]byte(src), now); ok {
			t.Fatalf("%s still there after RENAME", src)
		}
		n := 0
		if found, err := s.ReadObject([]byte(dst), KindHash, now, func(o Object) { n = o.Len() }); !found || err != nil || n != 3 {
			t.Fatalf("after RENAME %s: found %v err %v len %d", dst, found, err, n)
		}
		if got := keysUsed(s) - base; got != charged-keyCost(1)+keyCost(uint32(len(dst))) {
			t.Fatalf("after RENAME to %s charged %d, want %d", dst, got, charged-keyCost(1)+keyCost(uint32(len(dst))))
		}
	}
	s.Delete([]byte("h"), now)
	if got := keysUsed(s) - base; got != 0 {
		t.Fatalf("after DEL %d bytes still charged", got)
	}

	lim := window.Limit{Mode: window.Log, Limit: 3, WindowMs: 60_000}
	if _, err := s.Window([]byte("w"), lim, 2, now); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Copy([]byte("w"), []byte("w-copy-elsewhere"), now, false); !ok || err != nil {
		t.Fatalf("COPY of a window: %v %v", ok, err)
	}
	if ok, err := s.Rename([]byte("w"), []byte("w-renamed"), now, false); !ok || err != nil {
		t.Fatalf("RENAME of a window: %v %v", ok, err)
	}
	for _, k := range []string{"w-copy-elsewhere", "w-renamed"} {
		r, err := s.Window([]byte(k), lim, 1, now+1)
		if err != nil || r.Limited || r.Remaining != 0 {
			t.Fatalf("%s: %+v %v, want the third unit allowed with 0 left", k, r, err)
		}
		if r, _ := s.Window([]byte(k), lim, 1, now+2); !r.Limited {
			t.Fatalf("%s: a fourth unit was allowed: the copy lost its state", k)
		}
	}
}

// dupObj is a testObj that offers a deep copy.
type dupObj struct{ testObj }

func (o *dupObj) Duplicate() any { c := *o; return &c }

// COPY of an object that can be duplicated gives the destination an object
// of its own, charged like the source's, in the same store and in another
// (COPY ... DB n); REPLACE replaces a key of another kind; deleting either
// key credits back exactly its own charge.
func TestCopyDuplicatesObjects(t *testing.T) {
	s, other := New(Options{}), New(Options{})
	const now = 1_000_000
	base, otherBase := keysUsed(s), keysUsed(other)
	if _, err := s.WriteObject([]byte("z"), KindZSet, now, func() Object { return &dupObj{} }, func(o Object) bool {
		o.(*dupObj).n, o.(*dupObj).size = 5, 900
		return true
	}); err != nil {
		t.Fatal(err)
	}
	one := keysUsed(s) - base
	if _, err := s.Put([]byte("str"), Value{Kind: KindString, Raw: "x"}, now, 0, false); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.Copy([]byte("z"), []byte("str"), now, false); ok || err != nil {
		t.Fatalf("COPY onto an existing key without REPLACE: %v %v", ok, err)
	}
	if ok, err := s.Copy([]byte("z"), []byte("str"), now, true); !ok || err != nil {
		t.Fatalf("COPY ... REPLACE: %v %v", ok, err)
	}
	if ok, err := CopyTo(s, other, []byte("z"), []byte("z"), now, false); !ok || err != nil {
		t.Fatalf("COPY ... DB: %v %v", ok, err)
	}
	// The copies are separate objects: growing the source leaves them be.
	if _, err := s.WriteObject([]byte("z"), KindZSet, now, nil, func(o Object) bool { o.(*dupObj).n = 9; return true }); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		st  *Store
		key string
	}{{s, "str"}, {other, "z"}} {
		n := 0
		if found, err := c.st.ReadObject([]byte(c.key), KindZSet, now, func(o Object) { n = o.Len() }); !found || err != nil || n != 5 {
			t.Fatalf("copy %s: found %v err %v len %d, want 5", c.key, found, err, n)
		}
	}
	if got, want := keysUsed(s)-base, 2*one-keyCost(1)+keyCost(3); got != want {
		t.Fatalf("charged %d after COPY REPLACE, want %d (two zsets)", got, want)
	}
	if got := keysUsed(other) - otherBase; got != one {
		t.Fatalf("other store charged %d, want %d", got, one)
	}
	s.Delete([]byte("str"), now)
	s.Delete([]byte("z"), now)
	other.Delete([]byte("z"), now)
	if got := keysUsed(s) - base; got != 0 {
		t.Fatalf("%d bytes still charged", got)
	}
	if got := keysUsed(other) - otherBase; got != 0 {
		t.Fatalf("%d bytes still charged in the other store", got)
	}
}
