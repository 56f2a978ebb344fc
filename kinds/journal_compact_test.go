package kinds

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The journals (journal.go) across the compact forms (compact.go,
// zcompact.go): every write of either form, and the writes that move a
// value from its compact form to its full one, are recorded, and the
// records replay on a compact copy as on a full one.

// growthItem is the element an op's argument names: short, or (one in
// sixteen) longer than CompactMaxValue, which moves a compact value to its
// full form.
func growthItem(prefix string, arg byte) string {
	if arg%16 == 15 {
		return prefix + strings.Repeat("x", CompactMaxValue+6) + strconv.Itoa(int(arg))
	}
	return prefix + strconv.Itoa(int(arg%64))
}

// growthWrite makes the write op/arg names to obj through its public
// methods, the way the data handlers do; n counts the grow ops, which add
// 40 new elements each (so a value passes CompactMaxEntries in a few).
func growthWrite(obj journaled, op, arg byte, n *int) {
	switch o := obj.(type) {
	case *Hash:
		switch op % 4 {
		case 0, 1:
			o.Set(growthItem("f", arg), growthItem("v", arg/2))
		case 2:
			o.Delete(growthItem("f", arg))
		default:
			*n++
			for k := range 40 {
				o.Set("g"+strconv.Itoa(*n)+"."+strconv.Itoa(k), strconv.Itoa(int(arg)))
			}
		}
	case *ZSet:
		switch op % 7 {
		case 0, 1:
			o.Set(growthItem("m", arg), float64(arg%32))
		case 2:
			o.Remove(growthItem("m", arg))
		case 3:
			o.RemoveRangeByRank(int(arg%8), int(arg%8)+int(arg/32), nil)
		case 4:
			o.RemoveRangeByScore(ScoreRange{Min: float64(arg % 32), Max: float64(arg%32 + 3)}, nil)
		case 5:
			from := growthItem("m", arg)
			o.RemoveRangeByLex(LexRange{Min: LexBound{S: from}, Max: LexBound{S: from + "~"}}, func(string) {})
		default:
			*n++
			for k := range 40 {
				o.Set("g"+strconv.Itoa(*n)+"."+strconv.Itoa(k), float64(k%7))
			}
		}
	case *List:
		s := growthItem("i", arg)
		n0 := o.Len()
		switch k := op % 10; {
		case k == 0 || n0 == 0:
			o.PushFront(s)
		case k == 1:
			o.PushBack(s)
		case k == 2:
			if arg%2 == 0 {
				o.PopFront()
			} else {
				o.PopBack()
			}
		case k == 3:
			o.SetAt(int(arg)%n0, s)
		case k == 4:
			o.InsertAt(int(arg)%(n0+1), s)
		case k == 5:
			m := 2 + int(arg%5)
			o.Filter(func(i int, _ string) bool { return i%m != 0 })
		case k == 6:
			start := int(arg) % n0
			o.Trim(start, start+int(arg/2)%(n0-start))
		case k == 7 && arg == 0:
			o.Clear()
		default:
			*n++
			for j := range 40 {
				o.PushBack("g" + strconv.Itoa(*n) + "." + strconv.Itoa(j) + strings.Repeat("y", int(arg%40)))
			}
		}
	}
}

// sameContent fails unless a and b hold the same elements: the same image
// when exact, else (hashes only) the same fields and values in any order.
// A hash's field order is its form's: a full hash's delete moves its last
// field into the hole, a compact one's keeps the order, so a compact copy
// of a full hash that fits the compact limits keeps its fields in another
// order after a delete (as Redis's does after a restart).
func sameContent(t *testing.T, what string, a, b journaled, exact bool) {
	t.Helper()
	ia, ib := a.AppendImage(nil), b.AppendImage(nil)
	if bytes.Equal(ia, ib) {
		return
	}
	ha, ok1 := a.(*Hash)
	hb, ok2 := b.(*Hash)
	if !exact && ok1 && ok2 {
		fields := func(h *Hash) []string {
			var out []string
			h.Each(func(f, v string) bool { out = append(out, fmt.Sprintf("%q=%q", f, v)); return true })
			slices.Sort(out)
			return out
		}
		if slices.Equal(fields(ha), fields(hb)) {
			return
		}
	}
	t.Fatalf("%s: %T differs\n got %q\nwant %q", what, a, ib, ia)
}

// runJournalGrowth drives a value of kind (0 hash, 1 list, 2 sorted set)
// from empty (compact) through the writes ops names, in windows (an op
// byte ≡ 7 mod 8 ends one), as the store does: the image once, the journal
// started, then the records taken window by window. After each window the
// records must replay exactly on two copies: one decoded from the image
// before the window (the previous image) and one decoded from the first
// image and replayed every window since (a restore of many deltas). It
// returns whether the value ended in its full form.
func runJournalGrowth(t *testing.T, kind byte, ops []byte) (full bool) {
	t.Helper()
	mk := []func() journaled{
		func() journaled { return NewHash() },
		func() journaled { return NewList() },
		func() journaled { return NewZSet() },
	}[kind%3]
	obj := mk()
	var grows int
	// Some writes before the first image, as before the first flush.
	for len(ops) >= 2 && ops[0]%8 != 7 {
		growthWrite(obj, ops[0], ops[1], &grows)
		ops = ops[2:]
	}
	cont := decodeAny(t, obj, obj.AppendImage(nil))
	// A value in its full form whose elements fit the compact limits (it
	// grew and shrank again) decodes compact: the copy then differs in
	// form, and a hash in field order (sameContent).
	synced := isCompact(cont) == isCompact(obj)
	obj.StartJournal()
	var recs []byte
	for w := 0; len(ops) > 0; w++ {
		prev := obj.AppendImage(nil)
		fresh := decodeAny(t, obj, prev)
		exact := isCompact(fresh) == isCompact(obj)
		if len(ops) > 0 && ops[0]%8 == 7 {
			ops = ops[1:]
		}
		for len(ops) >= 2 && ops[0]%8 != 7 {
			growthWrite(obj, ops[0], ops[1], &grows)
			ops = ops[2:]
		}
		if len(ops) == 1 {
			ops = nil
		}
		var ok bool
		recs, ok = obj.TakeJournal(recs[:0])
		if !ok { // outgrew its bound: the store writes the image again
			cont = decodeAny(t, obj, obj.AppendImage(nil))
			synced = isCompact(cont) == isCompact(obj)
			obj.StartJournal()
			continue
		}
		saved := bytes.Clone(recs)
		for _, c := range []journaled{fresh, cont} {
			if err := ApplyJournal(c, recs); err != nil {
				t.Fatalf("window %d: %T: %v (records %q)", w, obj, err, recs)
			}
			if c.Len() != obj.Len() {
				t.Fatalf("window %d: %T: %d elements, want %d", w, obj, c.Len(), obj.Len())
			}
		}
		if !bytes.Equal(saved, recs) {
			t.Fatalf("window %d: replaying changed the records", w)
		}
		sameContent(t, fmt.Sprintf("window %d, copy of the previous image", w), obj, fresh, exact)
		sameContent(t, fmt.Sprintf("window %d, copy replayed since the first image", w), obj, cont, synced)
		if !isCompact(obj) && !isCompact(cont) && liveSizeOf(cont) != liveSizeOf(obj) {
			t.Fatalf("window %d: %T: size %d, want %d", w, obj, liveSizeOf(cont), liveSizeOf(obj))
		}
		// Copies of the same form convert when the value does: the
		// conditions depend on the elements only.
		if synced && isCompact(cont) != isCompact(obj) {
			t.Fatalf("window %d: %T: the replayed copy is compact=%v, the value %v", w, obj, isCompact(cont), isCompact(obj))
		}
		// A copy never records what it replays.
		if b, ok := cont.TakeJournal(nil); ok || len(b) != 0 {
			t.Fatalf("window %d: a replayed copy recorded %d bytes", w, len(b))
		}
	}
	return !isCompact(obj)
}

// FuzzJournalCompactGrowth: random writes to a value that starts compact
// and grows (past the entry and byte limits, or by a long element) into
// its full form, checked window by window against replays of its journal.
func FuzzJournalCompactGrowth(f *testing.F) {
	f.Add(byte(0), []byte{0, 1, 0, 2, 7, 3, 9, 7, 0, 15, 2, 1, 7, 3, 4, 2, 3})
	f.Add(byte(1), []byte{0, 1, 1, 2, 7, 3, 9, 4, 5, 7, 5, 3, 6, 4, 7, 1, 15, 2, 9, 7, 8, 1})
	f.Add(byte(2), []byte{0, 1, 0, 2, 7, 6, 9, 6, 3, 7, 3, 2, 4, 8, 5, 3, 7, 0, 31, 2, 1})
	f.Fuzz(func(t *testing.T, kind byte, ops []byte) {
		if len(ops) > 4096 {
			return
		}
		runJournalGrowth(t, kind, ops)
	})
}

// TestJournalCompactGrowth is the fuzz target's check on random op
// sequences long enough that every kind leaves its compact form, both by
// its size and by a long element.
func TestJournalCompactGrowth(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	for kind := range byte(3) {
		fulls := 0
		for range 60 {
			ops := make([]byte, 2*(20+r.IntN(200)))
			for i := range ops {
				ops[i] = byte(r.IntN(256))
			}
			if runJournalGrowth(t, kind, ops) {
				fulls++
			}
		}
		if fulls == 0 {
			t.Fatalf("kind %d: no run left the compact form", kind)
		}
	}
}

// TestJournalSurvivesConversion: a journal started on a compact value goes
// on recording through the write that moves it to its full form, and the
// records rebuild the full value on a compact copy.
func TestJournalSurvivesConversion(t *testing.T) {
	long := strings.Repeat("z", CompactMaxValue+1)
	h, l, z := NewHash(), NewList(), NewZSet()
	h.Set("a", "1")
	l.PushBack("a")
	z.Set("a", 1)
	for _, o := range []journaled{h, l, z} {
		if !isCompact(o) {
			t.Fatalf("%T: not compact to begin with", o)
		}
		o.StartJournal()
	}
	base := []journaled{decodeAny(t, h, h.AppendImage(nil)), decodeAny(t, l, l.AppendImage(nil)), decodeAny(t, z, z.AppendImage(nil))}
	h.Set("b", long)
	l.PushFront(long)
	z.Set(long, 2)
	h.Set("c", "3")
	l.PushBack("c")
	z.Set("c", 3)
	for i, o := range []journaled{h, l, z} {
		if isCompact(o) {
			t.Fatalf("%T: still compact after a long element", o)
		}
		recs, ok := o.TakeJournal(nil)
		if !ok || len(recs) == 0 {
			t.Fatalf("%T: journal lost at the conversion (%v, %d bytes)", o, ok, len(recs))
		}
		if err := ApplyJournal(base[i], recs); err != nil {
			t.Fatal(err)
		}
		sameContent(t, "after the conversion", o, base[i], true)
		if isCompact(base[i]) {
			t.Fatalf("%T: the replayed copy stayed compact", o)
		}
	}
}

// TestJournalCopiesCompactBytes: records hold their own copies of the
// elements, not strings pointing into a compact buffer that later writes
// move: elements read from the value itself (pointing into its bytes) are
// written back, the value is rewritten, and the records taken before
// still replay to the value they recorded.
func TestJournalCopiesCompactBytes(t *testing.T) {
	h := NewHash()
	l := NewList()
	for i := range 10 {
		h.Set("f"+strconv.Itoa(i), "v"+strconv.Itoa(i))
		l.PushBack("i" + strconv.Itoa(i))
	}
	hc, lc := decodeAny(t, h, h.AppendImage(nil)), decodeAny(t, l, l.AppendImage(nil))
	h.StartJournal()
	l.StartJournal()
	v, _ := h.Get("f3") // points into h's buffer
	h.Set("copy", v)
	l.PushBack(l.At(2)) // points into l's buffer
	hr, _ := h.TakeJournal(nil)
	lr, _ := l.TakeJournal(nil)
	hWant, lWant := h.AppendImage(nil), l.AppendImage(nil)
	for i := range 10 { // rewrite every byte of both buffers
		h.Set("f"+strconv.Itoa(i), strings.Repeat("#", 20))
		l.SetAt(i, strings.Repeat("#", 20))
	}
	if err := ApplyJournal(hc, hr); err != nil {
		t.Fatal(err)
	}
	if err := ApplyJournal(lc, lr); err != nil {
		t.Fatal(err)
	}
	if got := hc.AppendImage(nil); !bytes.Equal(got, hWant) {
		t.Fatalf("hash: got %q want %q", got, hWant)
	}
	if got := lc.AppendImage(nil); !bytes.Equal(got, lWant) {
		t.Fatalf("list: got %q want %q", got, lWant)
	}
}

// TestCloneDoesNotShareJournal: a clone (COPY) of a journaled value, in
// either form, records nothing until its own journal is started, and its
// writes never reach the original's journal.
func TestCloneDoesNotShareJournal(t *testing.T) {
	for _, full := range []bool{false, true} {
		h, l, z := NewHash(), NewList(), NewZSet()
		h.Set("a", "1")
		l.PushBack("a")
		z.Set("a", 1)
		if full {
			long := strings.Repeat("z", CompactMaxValue+1)
			h.Set("long", long)
			l.PushBack(long)
			z.Set(long, 2)
		}
		for _, o := range []journaled{h, l, z} {
			o.StartJournal()
			growthWrite(o, 0, 8, new(int))
			c := o.(interface{ Duplicate() any }).Duplicate().(journaled) // cloned while recording
			if b, ok := o.TakeJournal(nil); !ok || len(b) == 0 {
				t.Fatalf("%T full=%v: the original's journal: %q %v", o, full, b, ok)
			}
			if isCompact(c) == full {
				t.Fatalf("%T full=%v: clone compact=%v", o, full, isCompact(c))
			}
			growthWrite(c, 0, 9, new(int))
			growthWrite(c, 1, 10, new(int))
			if b, ok := c.TakeJournal(nil); ok || len(b) != 0 {
				t.Fatalf("%T full=%v: the clone recorded %d bytes", o, full, len(b))
			}
			if b, ok := o.TakeJournal(nil); !ok || len(b) != 0 {
				t.Fatalf("%T full=%v: the clone's writes reached the original's journal: %q %v", o, full, b, ok)
			}
		}
	}
}

// hashContent is h's fields and values, sorted (a copy decoded from a
// full hash's image is compact, and the forms keep different orders).
func hashContent(h *Hash) string {
	var kv []string
	h.Each(func(f, v string) bool {
		kv = append(kv, f+"="+v)
		return true
	})
	slices.Sort(kv)
	return strings.Join(kv, " ")
}

// TestHashJournalForms drives hashes through the store's drain cycle
// (store/journal.go): windows of writes, then a take replayed on a copy
// (or, when there is no whole journal, an image decoded afresh), then
// StartJournal or StopJournal by Size as the store decides. After every
// window the copy holds exactly the hash's content; Start, Stop and Take
// never change Size (the store charges Size only around writes); no
// compact hash keeps a journal struct of its own past a drain; collections run between windows, so a
// tagged pointer the garbage collector did not follow would show.
func TestHashJournalForms(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	const n = 64
	hs := make([]*Hash, n)
	cs := make([]*Hash, n)
	imaged := make([]bool, n)
	for i := range hs {
		hs[i], cs[i] = NewHash(), NewHash()
	}
	var recs []byte
	var before, seen [4]int // hashes in each form before and after a drain
	for w := range 400 {
		for i, h := range hs {
			for range r.IntN(6) {
				f := "f" + strconv.Itoa(r.IntN(4+i/4))
				switch k := r.IntN(10); {
				case k < 6:
					v := strings.Repeat("v", r.IntN(20))
					if i%16 == 0 && r.IntN(30) == 0 {
						v = strings.Repeat("x", CompactMaxValue+1) // to the full form
					}
					h.Set(f, v)
				case k < 9:
					h.Delete(f)
				default:
					for h.Len() > 0 { // emptied: the store deletes the key
						h.Delete(h.At(0).Field)
					}
				}
			}
			if h.Len() == 0 {
				hs[i], cs[i], imaged[i] = NewHash(), NewHash(), false
				continue
			}
			before[h.form()]++
			size := h.Size()
			var ok bool
			if imaged[i] {
				recs, ok = h.TakeJournal(recs[:0])
			}
			if ok {
				if err := ApplyJournal(cs[i], recs); err != nil {
					t.Fatalf("window %d hash %d: %v", w, i, err)
				}
			} else {
				c, err := DecodeHash(h.AppendImage(nil))
				if err != nil {
					t.Fatal(err)
				}
				cs[i], imaged[i] = c, true
				if h.Size() <= 160 {
					h.StopJournal()
				} else {
					h.StartJournal()
				}
			}
			if h.Size() != size {
				t.Fatalf("window %d hash %d: Size %d after the drain, %d before", w, i, h.Size(), size)
			}
			if got, want := hashContent(cs[i]), hashContent(h); got != want {
				t.Fatalf("window %d hash %d (form %d): copy differs\n got %s\nwant %s", w, i, h.form(), got, want)
			}
			if h.form() == hxOwn {
				t.Fatalf("window %d hash %d: a journal struct of its own kept past the drain", w, i)
			}
			if h.compact() && !h.recording() && h.form() != hxPlain {
				t.Fatalf("window %d hash %d: not recording in form %d", w, i, h.form())
			}
			seen[h.form()]++
		}
		if w%50 == 0 {
			runtime.GC()
		}
	}
	for f := range 3 {
		if seen[f] == 0 {
			t.Errorf("no drain left form %d (plain, full, idle): %v", f, seen)
		}
	}
	if before[hxOwn] == 0 {
		t.Errorf("no drain found a journal of its own: %v", before)
	}
	t.Logf("forms (plain, full, idle, own) before a drain %v, after %v", before, seen)
}
