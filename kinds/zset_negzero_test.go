package kinds

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

// TestZSetNegativeZero: the compact form stores a -0 score as 0 (Redis's
// listpack does: ZSCORE answers 0), the full form keeps -0 (Redis's
// skiplist does), and both survive an image round trip and a journal
// replay in the form they were in: a full set's image decodes to a full
// set whatever order its members come in, as Redis's RDB load builds a
// skiplist for a set past the listpack limits. Underflow: ParseScore
// refuses a score that strtod turns into ±0 with ERANGE (Redis's
// getDoubleFromObject), ParseScoreBound takes it (zslParseRange).
func TestZSetNegativeZero(t *testing.T) {
	negZero := math.Copysign(0, -1)
	bits := func(z *ZSet, m string) uint64 {
		s, ok := z.Score(m)
		if !ok {
			t.Fatalf("%s missing", m)
		}
		return math.Float64bits(s)
	}
	c := NewZSet()
	c.Set("a", negZero)
	c.SetTransient("b", negZero)
	c.Presize(nil, nil)
	if !c.compact() || bits(c, "a") != 0 || bits(c, "b") != 0 {
		t.Fatalf("compact: %x %x, want +0 (compact %v)", bits(c, "a"), bits(c, "b"), c.compact())
	}
	if e := c.At(0); math.Signbit(e.Score) {
		t.Fatalf("compact At: %v", e)
	}
	long := strings.Repeat("L", CompactMaxValue+1)
	for _, build := range []func(z *ZSet){
		func(z *ZSet) { z.Set(long, negZero); z.Set("m", negZero) },
		func(z *ZSet) {
			for i := range CompactMaxEntries + 2 {
				z.Set("b"+strconv.Itoa(i), float64(i+1))
			}
			z.SetTransient("m", negZero)
		},
	} {
		f := NewZSet()
		build(f)
		if f.compact() || bits(f, "m") != math.Float64bits(negZero) {
			t.Fatalf("full: %x, want -0 (compact %v)", bits(f, "m"), f.compact())
		}
		g, err := DecodeZSet(f.AppendImage(nil))
		if err != nil {
			t.Fatal(err)
		}
		if g.compact() || bits(g, "m") != math.Float64bits(negZero) {
			t.Fatalf("full image decoded: %x, want -0 (compact %v)", bits(g, "m"), g.compact())
		}
		g.StartJournal()
		g.Set("m", 1)
		g.Set("m", negZero)
		recs, ok := g.TakeJournal(nil)
		if !ok {
			t.Fatal("journal overflowed")
		}
		h, _ := DecodeZSet(f.AppendImage(nil))
		if err := ApplyJournal(h, recs); err != nil {
			t.Fatal(err)
		}
		if bits(h, "m") != math.Float64bits(negZero) {
			t.Fatalf("full after journal: %x, want -0", bits(h, "m"))
		}
	}
	for _, s := range []string{"1e-400", "-1e-400", "0.000001e-400", "-1E-400", "0x1p-2000"} {
		if f, ok := ParseScore([]byte(s)); ok {
			t.Errorf("ParseScore(%s) = %v, want refused (underflow)", s, f)
		}
		if _, _, ok := ParseScoreBound([]byte(s)); !ok {
			t.Errorf("ParseScoreBound(%s) refused", s)
		}
	}
	for _, s := range []string{"0", "-0", "0e-400", "0.000e5", "1e-320", "-0.0"} {
		if _, ok := ParseScore([]byte(s)); !ok {
			t.Errorf("ParseScore(%s) refused", s)
		}
	}
}
