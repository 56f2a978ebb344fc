package store

import (
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// TestShardSizeClass: a shard stays in the 768-byte allocation class that
// shardCost charges (the grown map took the place of 8 bytes of padding).
func TestShardSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(shard{}); n > 768 {
		t.Errorf("shard is %d bytes, want at most 768 (the size class; shardCost %d)", n, shardCost)
	}
}

// editRef is the reference for EditString: the string after writing val
// at off (off < 0: at the end), zero-padded, as Redis's APPEND/SETRANGE.
func editRef(cur []byte, off int, val []byte) []byte {
	if off < 0 {
		off = len(cur)
	}
	out := append([]byte(nil), cur...)
	if n := off + len(val); n > len(out) {
		out = append(out, make([]byte, n-len(out))...)
	}
	copy(out[off:], val)
	return out
}

// TestEditStringMatchesReference: random APPENDs and SETRANGEs (inside and
// past the end) on a long text give the bytes the copying path gives, a
// text handed out by Get (a view) never changes afterwards, however the
// key is then written in place, and the memory charged is exactly what a
// fresh store holding the same bytes is charged plus the slack, back to
// the empty store's figure once the key goes.
func TestEditStringMatchesReference(t *testing.T) {
	s := New(Options{TrackDirty: true})
	empty := s.UsedMemory()
	key := []byte("k")
	ref := []byte(strings.Repeat("ab", 50)) // 100 bytes, not a number
	if _, err := s.Put(key, StringValue(ref), 1, PutAlways, false); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	type view struct{ got, want string }
	var views []view
	handled := 0
	for i := 0; i < 3000; i++ {
		val := []byte(strings.Repeat(string(rune('a'+rng.IntN(26))), 1+rng.IntN(40)))
		off := -1
		switch rng.IntN(3) {
		case 1:
			off = rng.IntN(len(ref)) // inside
		case 2:
			off = len(ref) + rng.IntN(50) // past the end: a zero gap
		}
		n, ok := s.EditString(key, 1, int64(off), len(val), 1<<20, func(r []byte) { copy(r, val) })
		if !ok {
			t.Fatalf("write %d: not handled on a %d-byte text", i, len(ref))
		}
		handled++
		ref = editRef(ref, off, val)
		if n != int64(len(ref)) {
			t.Fatalf("write %d: length %d, want %d", i, n, len(ref))
		}
		switch rng.IntN(8) {
		case 0:
			v, _ := s.Get(key, 1)
			views = append(views, view{v.Raw, string(ref)})
		case 1:
			s.Drain(1, nil) // persistence views the text too
		}
	}
	v, ok := s.Get(key, 1)
	if !ok || !v.Invalid || v.Raw != string(ref) {
		t.Fatalf("after %d writes: got %d bytes (invalid %v), want %d", handled, len(v.Raw), v.Invalid, len(ref))
	}
	for j, w := range views {
		if w.got != w.want {
			t.Fatalf("view %d (%d bytes) changed after it was handed out", j, len(w.want))
		}
	}
	// Charge: the text's bytes rounded up to its buffer, no more than
	// twice the length (the slack bound below 1 MiB).
	km, _ := s.KeyMemory(key, 1)
	fresh := New(Options{})
	fresh.Put(key, StringValue(ref), 1, PutAlways, false)
	exact, _ := fresh.KeyMemory(key, 1)
	if km < exact || km > exact+int64(len(ref))+8 {
		t.Errorf("grown text charged %d, exact %d (length %d): the slack must be counted and at most the length", km, exact, len(ref))
	}
	if s.UsedMemory() <= empty {
		t.Error("the grown text is not charged")
	}
	// Deleted, the key leaves what a key that was never grown leaves
	// (the shard's fixed cost, the deletion queued for persistence).
	s.Delete(key, 1)
	control := New(Options{TrackDirty: true})
	control.Put(key, StringValue(ref), 1, PutAlways, false)
	control.Delete(key, 1)
	if got, want := s.UsedMemory(), control.UsedMemory(); got != want {
		t.Errorf("used memory %d after the delete, %d for a key never grown (%d empty): the grown buffer's charge leaked", got, want, empty)
	}
}

// TestEditStringCostIsTheChange: 200 writes of 10 bytes to a 4 MiB text
// allocate (bytes, not time) far less than one copy of it: APPEND into the
// buffer's slack, SETRANGE and SETBIT inside it in place. Before, every
// call copied the whole value (4 MiB a call, 8 for SETRANGE).
func TestEditStringCostIsTheChange(t *testing.T) {
	const size = 4 << 20
	s := New(Options{})
	key := []byte("big")
	s.Put(key, StringValue([]byte(strings.Repeat("x", size))), 1, PutAlways, false)
	val := []byte("0123456789")
	for _, op := range []struct {
		name string
		off  func(i int) int64
	}{
		{"append", func(int) int64 { return -1 }},
		{"setrange", func(i int) int64 { return int64(i * 997 % size) }},
	} {
		s.EditString(key, 1, op.off(0), len(val), 1<<30, func(r []byte) { copy(r, val) }) // the one growth / copy
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for i := 1; i <= 200; i++ {
			if _, ok := s.EditString(key, 1, op.off(i), len(val), 1<<30, func(r []byte) { copy(r, val) }); !ok {
				t.Fatalf("%s %d: not handled", op.name, i)
			}
		}
		runtime.ReadMemStats(&after)
		if per := (after.TotalAlloc - before.TotalAlloc) / 200; per > size/64 {
			t.Errorf("%s of 10 bytes on a %d-byte text allocated %d bytes per call (a copy is %d)", op.name, size, per, size)
		}
	}
	// A hand-out makes the next in-place write copy, once.
	s.Get(key, 1)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 0; i < 10; i++ {
		s.EditString(key, 1, int64(i), 1, 1<<30, func(r []byte) { r[0] = 'y' })
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got < size || got > 3*size {
		t.Errorf("10 writes after a GET allocated %d bytes, want one copy of the %d-byte text", got, size)
	}
}

// TestEditStringKeepsNumbersAndShortValuesOut: a value that reads as a
// number, a short one, another kind and a missing key are left to the
// general path; a long text that a write turns into a number is flagged
// as one (CL.THROTTLE and INCR read it).
func TestEditStringKeepsNumbersAndShortValuesOut(t *testing.T) {
	s := New(Options{})
	w := func(k string, off int64, val string) bool {
		_, ok := s.EditString([]byte(k), 1, off, len(val), 1<<20, func(r []byte) { copy(r, val) })
		return ok
	}
	s.Put([]byte("short"), StringValue([]byte("abc")), 1, PutAlways, false)
	s.Put([]byte("num"), StringValue([]byte(strings.Repeat("0", 80)+"7")), 1, PutAlways, false)
	if w("short", -1, "d") || w("num", -1, "1") || w("missing", -1, "x") {
		t.Error("handled a short, numeric or missing value")
	}
	s.Put([]byte("t"), StringValue([]byte("x"+strings.Repeat("0", 80))), 1, PutAlways, false)
	if !w("t", -1, "5") || !w("t", 0, "0") {
		t.Fatal("not handled")
	}
	v, _ := s.Get([]byte("t"), 1)
	if v.Invalid || v.TAT != 5 {
		t.Errorf("text of zeros then 5: invalid %v, number %d; want the number 5", v.Invalid, v.TAT)
	}
}

// TestEditStringConcurrentReaders: readers on other goroutines keep the
// texts Get hands them and read them after the lock is gone, while a
// writer appends and rewrites in place; a view never changes (under
// -race, a write into bytes a reader holds is also reported as a race).
func TestEditStringConcurrentReaders(t *testing.T) {
	s := New(Options{TrackDirty: true})
	key := []byte("k")
	s.Put(key, StringValue([]byte(strings.Repeat("-", 200))), 1, PutAlways, false)
	done := make(chan struct{})
	errs := make(chan string, 4)
	var wg sync.WaitGroup
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				v, _ := s.Get(key, 1)
				snap := strings.Clone(v.Raw)
				runtime.Gosched()
				if v.Raw != snap {
					errs <- "a view changed after Get"
					return
				}
				s.Drain(1, nil)
			}
		}()
	}
	rng := rand.New(rand.NewPCG(3, 4))
	n := 200
	for i := 0; i < 5000; i++ {
		off := int64(-1)
		if rng.IntN(2) == 0 {
			off = int64(rng.IntN(n))
		}
		if got, ok := s.EditString(key, 1, off, 3, 1<<20, func(r []byte) { copy(r, "abc") }); ok {
			n = int(got)
		} else {
			t.Fatal("not handled")
		}
	}
	close(done)
	wg.Wait()
	select {
	case e := <-errs:
		t.Fatal(e)
	default:
	}
}

// TestRenameKeepsTheGrownBuffer: RENAME of a grown text moves its buffer
// and its charge: used memory is the same before and after (the slack is
// still counted), and appends under the new name go on into the slack
// without copying the text.
func TestRenameKeepsTheGrownBuffer(t *testing.T) {
	s := New(Options{})
	s.Put([]byte("a"), StringValue([]byte(strings.Repeat("x", 1<<20))), 1, PutAlways, false)
	s.EditString([]byte("a"), 1, -1, 1, 1<<30, func(r []byte) { r[0] = 'y' }) // grows: 1 MiB + an eighth
	for _, k := range []string{"b", "a-much-longer-name-in-another-shard", "c"} {
		s.Put([]byte(k), StringValue([]byte("v")), 1, PutAlways, false) // makes its shard (a fixed cost)
		s.Delete([]byte(k), 1)
	}
	before := s.UsedMemory()
	for _, dst := range []string{"b", "a-much-longer-name-in-another-shard", "c"} {
		src := map[string]string{"b": "a", "a-much-longer-name-in-another-shard": "b", "c": "a-much-longer-name-in-another-shard"}[dst]
		if _, err := s.Rename([]byte(src), []byte(dst), 1, false); err != nil {
			t.Fatal(err)
		}
		before += keyCost(uint32(len(dst))) - keyCost(uint32(len(src))) // the names differ
		if got := s.UsedMemory(); got != before {
			t.Fatalf("RENAME %s %s: used memory %d, want %d", src, dst, got, before)
		}
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for i := 0; i < 100; i++ {
		if _, ok := s.EditString([]byte("c"), 1, -1, 10, 1<<30, func(r []byte) { copy(r, "0123456789") }); !ok {
			t.Fatal("not handled")
		}
	}
	runtime.ReadMemStats(&m1)
	if got := m1.TotalAlloc - m0.TotalAlloc; got > 1<<18 {
		t.Errorf("100 appends after RENAME allocated %d bytes: the text was copied", got)
	}
	if v, _ := s.Get([]byte("c"), 1); len(v.Raw) != 1<<20+1+1000 || v.Raw[1<<20] != 'y' || v.Raw[len(v.Raw)-1] != '9' {
		t.Errorf("after RENAME and appends: %d bytes", len(v.Raw))
	}
}

// TestShardHotLines: the window heap's and scratch buffer's slice headers,
// which every CL.WINDOW LOG call reads (winBlock and ApplyInPlaceTo's
// buffer), sit on one cache line of the shard, and the shard stays a
// whole number of lines (so it starts on one: TestShardSizeClass). Before
// the headers were reordered and the padding moved, they were 224 bytes
// apart, on two lines.
func TestShardHotLines(t *testing.T) {
	var sh shard
	if n := unsafe.Sizeof(sh); n%64 != 0 {
		t.Errorf("shard is %d bytes, not a whole number of cache lines", n)
	}
	heap := unsafe.Offsetof(sh.win) + unsafe.Offsetof(sh.win.heap)
	scratch := unsafe.Offsetof(sh.win) + unsafe.Offsetof(sh.win.scratch)
	end := scratch + unsafe.Sizeof(sh.win.scratch) - 1
	if heap/64 != end/64 || scratch < heap {
		t.Errorf("win.heap at %d and win.scratch at %d-%d: want both headers on one cache line", heap, scratch, end)
	}
}
