package kinds

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// journaled is what the journal tests need of each kind.
type journaled interface {
	Len() int
	Size() int64
	AppendImage([]byte) []byte
	StartJournal()
	TakeJournal([]byte) ([]byte, bool)
}

// randomWrite makes one random write to obj through its public methods,
// the way the data handlers do.
// transient calls fn with s in a buffer it overwrites afterwards, as a
// request's argument is reused: a *Transient setter that kept a reference
// to it would show the overwrite in its value.
func transient(s string, fn func(string)) {
	b := []byte(s + "!")[:len(s)]
	fn(unsafe.String(unsafe.SliceData(b), len(b)))
	for i := range b {
		b[i] = '#'
	}
}

func randomWrite(r *rand.Rand, obj journaled) {
	item := "e" + strconv.Itoa(r.IntN(200))
	switch o := obj.(type) {
	case *Hash:
		switch v := "v" + strconv.Itoa(r.IntN(1000)); r.IntN(3) {
		case 0:
			o.Delete(item)
		case 1:
			o.Set(item, v)
		default:
			transient(item, func(f string) { transient(v, func(v string) { o.SetTransient(f, v) }) })
		}
	case *ZSet:
		switch r.IntN(6) {
		case 0:
			o.Remove(item)
		case 1:
			o.RemoveRangeByRank(r.IntN(5), r.IntN(8), nil)
		case 2:
			o.RemoveRangeByScore(ScoreRange{Min: float64(r.IntN(50)), Max: float64(r.IntN(60))}, nil)
		case 3:
			transient(item, func(m string) { o.SetTransient(m, float64(r.IntN(100))) })
		default:
			o.Set(item, float64(r.IntN(100)))
		}
	case *List:
		n := o.Len()
		switch k := r.IntN(10); {
		case k < 2 || n == 0:
			o.PushFront(item)
		case k < 3:
			transient(item, func(s string) { o.PushTransient(s, r.IntN(2) == 0) })
		case k < 5:
			o.PushBack(item)
		case k == 5:
			o.PopFront()
		case k == 6:
			o.PopBack()
		case k == 7:
			o.SetAt(r.IntN(n), item)
		case k == 8:
			if r.IntN(2) == 0 {
				o.InsertAt(r.IntN(n+1), item)
			} else {
				o.Filter(func(i int, s string) bool { return i%3 != 0 })
			}
		default:
			start := r.IntN(n)
			if r.IntN(50) == 0 {
				o.Clear()
			} else {
				o.Trim(start, start+r.IntN(n-start))
			}
		}
	}
}

func decodeAny(t *testing.T, obj journaled, img []byte) journaled {
	t.Helper()
	var (
		c   journaled
		err error
	)
	switch obj.(type) {
	case *Hash:
		c, err = DecodeHash(img)
	case *List:
		c, err = DecodeList(img)
	case *ZSet:
		c, err = DecodeZSet(img)
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestJournalReplaysExactly: an image, then the records taken window by
// window and replayed in order, give back exactly the value's image after
// every window, for every kind and every write.
func TestJournalReplaysExactly(t *testing.T) {
	for _, mk := range []func() journaled{
		func() journaled { return NewHash() },
		func() journaled { return NewList() },
		func() journaled { return NewZSet() },
	} {
		r := rand.New(rand.NewPCG(7, 9))
		obj := mk()
		for range 100 {
			randomWrite(r, obj)
		}
		if _, ok := obj.TakeJournal(nil); ok {
			t.Fatalf("%T: a journal never started gave records", obj)
		}
		copyObj := decodeAny(t, obj, obj.AppendImage(nil))
		obj.StartJournal()
		var recs []byte
		for w := 0; w < 300; w++ {
			for range r.IntN(20) {
				randomWrite(r, obj)
			}
			var ok bool
			recs, ok = obj.TakeJournal(recs[:0])
			if !ok {
				t.Fatalf("%T window %d: journal abandoned", obj, w)
			}
			if err := ApplyJournal(copyObj, recs); err != nil {
				t.Fatalf("%T window %d: %v", obj, w, err)
			}
			if got, want := copyObj.AppendImage(nil), obj.AppendImage(nil); !bytes.Equal(got, want) {
				t.Fatalf("%T window %d: replayed image differs\n got %q\nwant %q", obj, w, got, want)
			}
			// A full form's live size follows from its content (its Size also
			// counts the map places its peak left); a compact one's
			// counts its buffer's capacity, which depends on its history.
			if !isCompact(obj) && !isCompact(copyObj) && liveSizeOf(copyObj) != liveSizeOf(obj) {
				t.Fatalf("%T window %d: size %d, want %d", obj, w, liveSizeOf(copyObj), liveSizeOf(obj))
			}
		}
		// Replaying records never records.
		copyObj.StartJournal()
		if err := ApplyJournal(copyObj, recs); err != nil {
			t.Fatal(err)
		}
		if b, _ := copyObj.TakeJournal(nil); len(b) != 0 {
			t.Fatalf("%T: replay recorded %d bytes", obj, len(b))
		}
	}
}

// TestJournalBounded: a window that writes more than the bound (and more
// than an eighth of the value) abandons the journal; the next take asks
// for the image, and a new start records again.
func TestJournalBounded(t *testing.T) {
	h := NewHash()
	h.StartJournal()
	big := string(make([]byte, 1024))
	for i := range 200 {
		h.Set("f"+strconv.Itoa(i), big)
	}
	if _, ok := h.TakeJournal(nil); ok {
		t.Fatal("a 200 KiB window was kept")
	}
	h.StartJournal()
	h.Set("x", "y")
	b, ok := h.TakeJournal(nil)
	if !ok || len(b) == 0 {
		t.Fatalf("after a restart: %q %v", b, ok)
	}
}

// TestApplyJournalRefusesWhatDoesNotFit: records for another value (an
// index past the end, a pop of an empty list) or damaged bytes stop with
// ErrBadJournal instead of panicking.
func TestApplyJournalRefusesWhatDoesNotFit(t *testing.T) {
	l := NewList()
	l.StartJournal()
	l.PushBack("a")
	l.PushBack("b")
	l.SetAt(1, "c")
	recs, _ := l.TakeJournal(nil)
	for i := range len(recs) {
		_ = ApplyJournal(NewList(), recs[:i]) // truncated: never a panic
	}
	empty := NewList()
	if err := ApplyJournal(empty, []byte{'r'}); err != ErrBadJournal {
		t.Fatalf("pop of an empty list: %v", err)
	}
	if err := ApplyJournal(empty, append([]byte{'T', 5}, appendStr(nil, "x")...)); err != ErrBadJournal {
		t.Fatalf("LSET past the end: %v", err)
	}
	if err := ApplyJournal(NewHash(), []byte{'?'}); err != ErrBadJournal {
		t.Fatalf("unknown tag: %v", err)
	}
}

func FuzzApplyJournal(f *testing.F) {
	f.Add([]byte("R\x01aL\x01bT\x00\x01c"), uint8(1))
	f.Add([]byte("S\x01f\x01v"), uint8(0))
	f.Add([]byte("S\x01f\x01vD\x01f"), uint8(3))
	f.Add([]byte("R\x01aR\x01bF\x01\x00M\x00\x00"), uint8(4))
	f.Fuzz(func(t *testing.T, recs []byte, kind uint8) {
		// kind%6 < 3: an empty value (compact); else one already in its
		// full form (a long element).
		long := strings.Repeat("L", CompactMaxValue+1)
		var obj any
		switch kind % 6 {
		case 0:
			obj = NewHash()
		case 1:
			obj = NewList()
		case 2:
			obj = NewZSet()
		case 3:
			h := NewHash()
			h.Set(long, "1")
			obj = h
		case 4:
			l := NewList()
			l.PushBack(long)
			obj = l
		default:
			z := NewZSet()
			z.Set(long, 1)
			obj = z
		}
		_ = ApplyJournal(obj, recs)
		// Whatever applied leaves a value whose image decodes to it.
		img := obj.(journaled).AppendImage(nil)
		if c := decodeAny(t, obj.(journaled), img); !bytes.Equal(c.AppendImage(nil), img) {
			t.Fatalf("%T: the applied value's image does not round-trip", obj)
		}
	})
}

// isCompact reports whether obj is in its compact form.
func isCompact(obj any) bool {
	switch o := obj.(type) {
	case *Hash:
		return o.compact()
	case *List:
		return o.compact()
	case *ZSet:
		return o.compact()
	}
	return false
}

// TestTransientSettersKeepNoReference: SetTransient and PushTransient copy
// what they keep, through the compact form, the change of form and the
// full form (new elements and updates), recording or not.
func TestTransientSettersKeepNoReference(t *testing.T) {
	for _, recording := range []bool{false, true} {
		h, z, l := NewHash(), NewZSet(), NewList()
		if recording {
			h.StartJournal()
			z.StartJournal()
			l.StartJournal()
		}
		hm, zm := map[string]string{}, map[string]float64{}
		var lm []string
		for i := 0; i < 3*CompactMaxHashEntries; i++ {
			k := "k" + strconv.Itoa(i%(CompactMaxHashEntries+100))
			v := strings.Repeat("v", i%50) + strconv.Itoa(i)
			transient(k, func(k string) { transient(v, func(v string) { h.SetTransient(k, v) }) })
			hm[k] = v
			transient(k, func(m string) { z.SetTransient(m, float64(i%7)) })
			zm[k] = float64(i % 7)
			transient(v, func(s string) { l.PushTransient(s, i%2 == 0) })
			if i%2 == 0 {
				lm = append([]string{v}, lm...)
			} else {
				lm = append(lm, v)
			}
			if i == CompactMaxEntries/2 && (!h.compact() || !z.compact() || !l.compact()) {
				t.Fatal("not compact at the start")
			}
		}
		if h.compact() || z.compact() || l.compact() {
			t.Fatal("never left the compact form")
		}
		checkHash(t, h, hm)
		for m, s := range zm {
			if got, ok := z.Score(m); !ok || got != s {
				t.Fatalf("zset %q: %v %v, want %v", m, got, ok, s)
			}
		}
		if z.Len() != len(zm) || l.Len() != len(lm) {
			t.Fatalf("lengths %d %d, want %d %d", z.Len(), l.Len(), len(zm), len(lm))
		}
		for i, s := range lm {
			if l.At(i) != s {
				t.Fatalf("list At(%d) = %q, want %q", i, l.At(i), s)
			}
		}
	}
}

// TestPrefetchAddrs: what the store's prefetch is told a write will touch
// after each kind's struct. The elements: the compact bytes' address and
// length while compact, nothing in the full form. The journal: nothing
// while not recording or recording with nothing recorded yet (the shared
// idle state, which must never be written), the record buffer once a
// write recorded (and still after a take, which keeps a small buffer for
// the next window), nothing after StopJournal.
func TestPrefetchAddrs(t *testing.T) {
	h, l, z := NewHash(), NewList(), NewZSet()
	type pa interface {
		PrefetchAddrs() (unsafe.Pointer, int, unsafe.Pointer)
		StartJournal()
		StopJournal()
		TakeJournal([]byte) ([]byte, bool)
	}
	write := func(i int) {
		h.Set("f"+strconv.Itoa(i), "v")
		l.PushBack("item")
		z.Set("m"+strconv.Itoa(i), float64(i))
	}
	data := map[string]func() (unsafe.Pointer, int){
		"hash": func() (unsafe.Pointer, int) { // the block, as much as is offered
			// Not behind the journal's struct (hxOwn) or the full form.
			if f := h.form(); f == hxOwn || f == hxFull || h.blk() == nil {
				return nil, 0
			}
			return h.blk(), hashPrefetchBytes
		},
		"list": func() (unsafe.Pointer, int) { return unsafe.Pointer(unsafe.SliceData(l.lp)), len(l.lp) },
		"zset": func() (unsafe.Pointer, int) { return unsafe.Pointer(unsafe.SliceData(z.lp)), len(z.lp) },
	}
	objs := map[string]pa{"hash": h, "list": l, "zset": z}
	check := func(when string, wantJournal bool) {
		t.Helper()
		for name, o := range objs {
			d, n, j := o.PrefetchAddrs()
			wd, wn := data[name]()
			if d != wd || n != wn {
				t.Fatalf("%s %s: data %p/%d, want %p/%d", when, name, d, n, wd, wn)
			}
			want := wantJournal
			switch {
			case name == "hash" && !h.compact():
				want = true // the hashFull, which holds the journal
			case name == "hash" && when == "taken":
				want = false // a compact hash keeps no buffer across a take
			}
			if (j != nil) != want || j == unsafe.Pointer(journalIdle) {
				t.Fatalf("%s %s: journal %p, want one: %v", when, name, j, want)
			}
		}
	}
	check("empty", false)
	write(0)
	check("not recording", false)
	for _, o := range objs {
		o.StartJournal()
	}
	check("started", false)
	write(1)
	check("recorded", true)
	for _, o := range objs {
		if _, ok := o.TakeJournal(nil); !ok {
			t.Fatal("take")
		}
	}
	check("taken", true)
	for i := 2; i < 600; i++ { // through the change of form
		write(i)
	}
	l.PushBack(strings.Repeat("x", CompactMaxValue+1))
	if h.compact() || l.listRing == nil || z.zFull == nil {
		t.Fatal("still compact")
	}
	check("full", true)
	for _, o := range objs {
		o.StopJournal()
	}
	check("stopped", false)
}
