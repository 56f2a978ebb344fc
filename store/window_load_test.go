package store

import (
	"bytes"
	"errors"
	"testing"

	"github.com/celld/celld/window"
)

// dumpWin is the state the store holds for key (DumpShard), or nil.
func dumpWin(s *Store, key string, nowMs int64) []byte {
	var st []byte
	for i := range NumShards {
		s.DumpShard(i, nowMs, func(c Change) {
			if string(c.Key) == key && c.Kind == KindWindow {
				st = append([]byte(nil), c.Text...)
			}
		})
	}
	return st
}

// A LOG state in the plain format (what a celld before the header format
// wrote to disk and to its followers) enters the store through LoadWindow
// and ApplyChange in the header format, and the key then answers every
// call as the plain state itself would (window.Apply's full pass over its
// entries), the same replies and the same state written.
func TestLoadWindowConvertsPlainLog(t *testing.T) {
	l := winLimit(window.Log, 10, 1000)
	// 1 | varint(t0) uvarint(2) | uvarint(3) uvarint(1) | uvarint(200) uvarint(4): 7 units
	plain := []byte{byte(window.Log)}
	plain = appendVarintTest(plain, t0ms)
	plain = append(plain, 2, 3, 1, 0xc8, 0x01, 4)
	want, err := window.Load(plain, nil)
	if err != nil || want[0] == byte(window.Log) {
		t.Fatalf("window.Load(%x) = %x, %v", plain, want, err)
	}
	for _, via := range []string{"LoadWindow", "ApplyChange"} {
		s := New(Options{})
		var err error
		if via == "LoadWindow" {
			err = s.LoadWindow([]byte("k"), plain, t0ms+5000)
		} else {
			err = s.ApplyChange(Change{Key: []byte("k"), Kind: KindWindow, Text: plain, ExpireAtMs: t0ms + 5000}, nil, false, t0ms)
		}
		if err != nil {
			t.Fatalf("%s: %v", via, err)
		}
		if got := dumpWin(s, "k", t0ms); !bytes.Equal(got, want) {
			t.Fatalf("%s stored %x, want the header form %x", via, got, want)
		}
		st := append([]byte(nil), plain...)
		for i, c := range []struct{ at, q int64 }{{t0ms + 300, 0}, {t0ms + 300, 4}, {t0ms + 300, 3}, {t0ms + 950, 2}, {t0ms + 1100, 5}, {t0ms + 1100, 9}} {
			wr, next, w, err := l.Apply(st, c.at, c.q, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.Window([]byte("k"), l, c.q, c.at)
			if err != nil || got != wr {
				t.Fatalf("%s call %d: %+v, %v; the plain state answers %+v", via, i, got, err, wr)
			}
			if w {
				st = next
			}
			if stored := dumpWin(s, "k", c.at); !bytes.Equal(stored, st) && w {
				t.Fatalf("%s call %d stored %x, want %x", via, i, stored, st)
			}
		}
	}
}

func appendVarintTest(b []byte, v int64) []byte {
	u := uint64(v<<1) ^ uint64(v>>63)
	for u >= 0x80 {
		b = append(b, byte(u)|0x80)
		u >>= 7
	}
	return append(b, byte(u))
}

// A damaged window state is refused where it enters the store, with
// ErrWindowState (an ErrInvalidValue): the key is not created and a key
// already under that name keeps its state. Before the header format these
// loaded and answered "damaged" on every call; now a call trusts the LOG
// header, so nothing unchecked may get in.
func TestLoadWindowRefusesDamage(t *testing.T) {
	l := winLimit(window.Log, 10, 1000)
	good := []byte{byte(window.Log)}
	good = appendVarintTest(good, t0ms)
	good = append(good, 2)
	hdr, err := window.Load(good, nil)
	if err != nil {
		t.Fatal(err)
	}
	inconsistent := append([]byte(nil), hdr...)
	inconsistent[2] = 9 // total 9 units, the entry holds 2
	for _, bad := range [][]byte{
		{9},                      // unknown mode
		{byte(window.Log), 0x80}, // truncated
		{byte(window.Log), 2, 0}, // count 0
		hdr[:len(hdr)-1],         // header form without its count
		inconsistent,             // a header that does not match its entries
		append(append([]byte(nil), hdr...), 0x80), // a byte after the entries
	} {
		for _, via := range []string{"LoadWindow", "ApplyChange"} {
			s := New(Options{})
			if _, err := s.Window([]byte("old"), l, 3, t0ms); err != nil {
				t.Fatal(err)
			}
			before := dumpWin(s, "old", t0ms)
			for _, key := range []string{"new", "old"} {
				var err error
				if via == "LoadWindow" {
					err = s.LoadWindow([]byte(key), bad, t0ms+5000)
				} else {
					err = s.ApplyChange(Change{Key: []byte(key), Kind: KindWindow, Text: bad, ExpireAtMs: t0ms + 5000}, nil, false, t0ms)
				}
				if !errors.Is(err, ErrWindowState) || !errors.Is(err, ErrInvalidValue) {
					t.Fatalf("%s(%s, %x) = %v, want ErrWindowState", via, key, bad, err)
				}
			}
			if s.Len() != 1 || !bytes.Equal(dumpWin(s, "old", t0ms), before) {
				t.Fatalf("%s(%x) changed the store: %d keys, old = %x (was %x)", via, bad, s.Len(), dumpWin(s, "old", t0ms), before)
			}
		}
	}
}
