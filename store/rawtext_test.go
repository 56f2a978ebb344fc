package store

import (
	"bytes"
	"fmt"
	"math/rand"
	"testing"
)

// TestRawTextsAgainstModel drives SET-like writes of every shape of text
// (canonical numbers, verbatim numbers like "007", arbitrary bytes, empty),
// deletes, renames, copies, moves to another database and CL.THROTTLE over
// a few keys, checking each key's text and number against a model, that
// CL.THROTTLE reads a verbatim number as the number (and refuses the rest),
// and at the end that every text's rawv place is accounted for: one live
// place per flagRaw slot, each charged once (checkMem).
func TestRawTextsAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	s, other := New(Options{TrackDirty: true}), New(Options{})
	lim := mustLimit(t, 4, 1, 1)
	keys := []string{"a", "b", "c", "a-key-longer-than-sixteen", "another-long-key-0123456789"}
	texts := []string{"", "7", "007", "+5", "18446744073709551615", "18446744073709551616",
		"-3", "abc", string(bytes.Repeat([]byte{'v'}, 100)), "\x00\xff",
		// TATs ahead of now, so CL.THROTTLE's answer depends on the number
		fmt.Sprint("+", t0+2e9), fmt.Sprint("0", t0+4e9), fmt.Sprint(t0 + 3e9)}
	model := map[string]string{}
	check := func(step int) {
		t.Helper()
		for _, k := range keys {
			v, ok := s.Get([]byte(k), t0ms)
			want, has := model[k]
			if ok != has {
				t.Fatalf("step %d: %q exists %v, model %v", step, k, ok, has)
			}
			if !ok {
				continue
			}
			if got := string(v.AppendText(nil)); got != want {
				t.Fatalf("step %d: %q reads %q, model %q", step, k, got, want)
			}
			n, num := ParseValue([]byte(want))
			if v.Invalid == num || (num && v.TAT != n) {
				t.Fatalf("step %d: %q = %+v for text %q", step, k, v, want)
			}
		}
	}
	for step := 0; step < 20000; step++ {
		k := keys[rng.Intn(len(keys))]
		switch op := rng.Intn(10); {
		case op < 4:
			text := texts[rng.Intn(len(texts))]
			if _, err := s.Put([]byte(k), StringValue([]byte(text)), t0ms, PutAlways, false); err != nil {
				t.Fatal(err)
			}
			model[k] = text
		case op == 4:
			text := fmt.Sprint(rng.Intn(100))
			putValue(s, k, t0ms, StringValueOf(text))
			model[k] = text
		case op == 5:
			s.Delete([]byte(k), t0ms)
			delete(model, k)
		case op == 6:
			dst := keys[rng.Intn(len(keys))]
			if ok, _ := s.Rename([]byte(k), []byte(dst), t0ms, false); ok {
				model[dst] = model[k]
				if dst != k {
					delete(model, k)
				}
			}
		case op == 7:
			dst := keys[rng.Intn(len(keys))]
			if ok, _ := s.Copy([]byte(k), []byte(dst), t0ms, true); ok {
				model[dst] = model[k]
			}
		case op == 8: // to the other database and back
			if ok, _ := Move(s, other, []byte(k), t0ms); ok {
				if ok, err := Move(other, s, []byte(k), t0ms); !ok || err != nil {
					t.Fatalf("step %d: move back: %v %v", step, ok, err)
				}
			}
		default:
			text, has := model[k]
			n, num := ParseValue([]byte(text))
			twin := New(Options{})
			if has {
				putValue(twin, "k", t0ms, Value{TAT: n})
			}
			r, err := s.Throttle([]byte(k), lim, 1, t0)
			switch {
			case has && !num:
				if err != ErrInvalidValue {
					t.Fatalf("step %d: THROTTLE over %q: %v", step, text, err)
				}
				continue
			case err != nil:
				t.Fatalf("step %d: THROTTLE over %q: %v", step, text, err)
			}
			if want, _ := twin.Throttle([]byte("k"), lim, 1, t0); r != want {
				t.Fatalf("step %d: THROTTLE over %q = %+v, over its number %+v", step, text, r, want)
			}
			if v, ok := s.Get([]byte(k), t0ms); ok {
				model[k] = string(v.AppendText(nil))
			} else {
				delete(model, k)
			}
		}
		check(step)
	}
	checkMem(t, s)
	for i := range s.shards {
		sh := s.shardAt(i)
		n := 0
		for j := range sh.slab {
			if e := &sh.slab[j]; e.flags&flagUsed != 0 && e.flags&flagRaw != 0 {
				n++
			}
		}
		if live := len(sh.rawv) - len(sh.rawFree); live != n {
			t.Fatalf("shard %d: %d live texts in rawv for %d flagRaw slots", i, live, n)
		}
	}
	// Every text gone: the shards hold no rawv at all.
	for _, k := range keys {
		s.Delete([]byte(k), t0ms)
	}
	for i := range s.shards {
		if sh := s.shardAt(i); sh.rawv != nil || sh.rawFree != nil {
			t.Fatalf("shard %d keeps rawv (%d) after every text went", i, len(sh.rawv))
		}
	}
}
