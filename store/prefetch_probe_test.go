package store

import (
	"testing"
	"unsafe"
)

// TestProbeLine: Prefetch finds a key's index word along its probe run
// within the home word's cache line (past other keys and tombstones), and
// not past an empty word or into the next line; a tombstone never passes
// for a key whose fingerprint is all ones. Fails if probeLine looks at the
// home word only (the displaced keys' cases).
func TestProbeLine(t *testing.T) {
	table := make([]uint64, 64)
	base := 0 // the first word of a cache line at or after table[0]
	for uintptr(unsafe.Pointer(&table[base]))&63 != 0 {
		base++
	}
	if base+16 > len(table) {
		t.Fatal("no room for two lines")
	}
	// A hash whose home word is home (bits 8.. of the hash, as findLocked)
	// and whose fingerprint (its low 32 bits) is otherwise set by tag.
	hash := func(home int, tag uint64) uint64 { return tag<<32 | tag<<16&0xFFFF0000 | uint64(home)<<8 | tag&0xFF }
	word := func(h uint64, slot int) uint64 { return fingerprint(h) | uint64(slot+1) }
	ones := uint64(0xFFFFFFFFFFFFFFFF) &^ (63 << 8) // all ones but the home bits
	table[base+0] = word(hash(base, 0x1111), 900)
	table[base+1] = tombWord
	table[base+2] = word(hash(base, 0x2222), 7) // displaced by two words
	table[base+3] = emptyWord
	for i := 4; i < 8; i++ {
		table[base+i] = word(hash(base+4, 0x4444), 800+i)
	}
	table[base+8] = word(hash(base+4, 0x3333), 9) // the next line
	table[base+9] = word(ones|uint64(base+9)<<8, 11)
	cases := []struct {
		name string
		h    uint64
		want int
	}{
		{"at home", hash(base, 0x1111), 900},
		{"displaced past a key and a tombstone", hash(base, 0x2222), 7},
		{"the run ends at an empty word", hash(base, 0x3333), -1},
		{"not past the line", hash(base+4, 0x3333), -1},
		{"the first of a run of equal fingerprints", hash(base+4, 0x4444), 804},
		{"an all-ones key", ones | uint64(base+9)<<8, 11},
		{"empty home", hash(base+3, 0x2222), -1},
	}
	for _, c := range cases {
		if got := probeLine(table, c.h); got != c.want {
			t.Errorf("%s: slot %d, want %d", c.name, got, c.want)
		}
	}
	// A tombstone's high half is a fingerprint of all ones: a hash whose
	// low 32 bits are all ones (home word 63 of 64) must not take it for
	// its key. The run wraps to word 0, another line.
	clear(table)
	table[63] = tombWord
	table[0] = word(0xFFFFFFFF, 5)
	if got := probeLine(table, 0xFFFFFFFF); got != -1 {
		t.Errorf("a tombstone taken for an all-ones key: slot %d", got)
	}
}
