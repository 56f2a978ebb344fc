package store

import (
	"bytes"
	"fmt"
	"testing"
)

// Keys of every length around the inline limit survive inserts, deletes,
// arena compaction and index rebuilds, and walks see exactly the live ones.
func TestKeyLengthsAcrossInlineLimit(t *testing.T) {
	s := New(Options{TrackDirty: true})
	const t0 = 1_796_007_429_047
	key := func(i int) []byte {
		return bytes.Repeat([]byte{byte('a' + i%26)}, i%41) // 0..40 bytes
	}
	name := func(i int) []byte { return append(key(i), fmt.Sprintf("#%d", i)...) }
	const n = 5000
	for i := range n {
		v, _ := NewValue(fmt.Appendf(nil, "%d", i))
		v.ExpireAtMs = t0 + 1000
		if i%2 == 1 {
			v.ExpireAtMs = t0 + 10 // odd keys expire first
		}
		s.Update(name(i), t0, func(Value, bool) (Value, Action) { return v, Put })
	}
	// Expire the odd half and sweep until it is gone (compacts the arena and
	// rebuilds indexes along the way).
	for s.Len() > n/2 {
		s.SweepStep(t0+100, 1<<30)
	}
	for i := range n {
		v, ok := s.Get(name(i), t0+100)
		if ok != (i%2 == 0) {
			t.Fatalf("key %d (len %d): present %v", i, len(name(i)), ok)
		}
		if ok && v.TAT != uint64(i) {
			t.Fatalf("key %d: TAT %d", i, v.TAT)
		}
	}
	seen := map[string]bool{}
	for c := s.Scan(0, 100, t0+100, func(k []byte) { seen[string(k)] = true }); c != 0; {
		c = s.Scan(c, 100, t0+100, func(k []byte) { seen[string(k)] = true })
	}
	if len(seen) != n/2 {
		t.Fatalf("SCAN saw %d keys, want %d", len(seen), n/2)
	}
	changes := s.Drain(t0+100, nil)
	puts := 0
	for _, c := range changes {
		if !c.Deleted {
			puts++
			if !seen[string(c.Key)] {
				t.Fatalf("Drain wrote %q, which is not live", c.Key)
			}
		}
	}
	if puts != n/2 {
		t.Fatalf("Drain wrote %d keys, want %d", puts, n/2)
	}
}
