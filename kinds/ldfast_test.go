package kinds

import (
	"math/big"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
)

// ldText makes a random float text for the fast path's differential test:
// integers near 2^53, 2^63, 2^64 and 2^127, decimals with 1-38 significant
// digits (17-21 often), exponents, zeros with signs, exact binary fractions
// whose 17-decimal printing ties, values at the fast path's limits, and
// texts it must leave to math/big (hex, inf, nan, spaces, too many digits).
func ldText(r *rand.Rand) string {
	sign := func() string { return []string{"", "", "-", "+"}[r.IntN(4)] }
	digits := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteByte(byte('0' + r.IntN(10)))
		}
		return b.String()
	}
	switch r.IntN(14) {
	case 0: // integers near powers of two
		p := []uint{53, 63, 64, 100, 127, 128}[r.IntN(6)]
		n := new(big.Int).Lsh(big.NewInt(1), p)
		n.Add(n, big.NewInt(r.Int64N(2001)-1000))
		return sign() + n.String()
	case 1: // small integers
		return sign() + strconv.Itoa(r.IntN(100000))
	case 2: // decimals with 17-21 significant digits
		n := 17 + r.IntN(5)
		p := r.IntN(n + 1)
		d := digits(n)
		return sign() + d[:p] + "." + d[p:]
	case 3: // decimals with 1-40 significant digits and an exponent
		n := 1 + r.IntN(40)
		p := r.IntN(n + 1)
		d := digits(n)
		return sign() + d[:p] + "." + d[p:] + []string{"e", "E"}[r.IntN(2)] + sign() + strconv.Itoa(r.IntN(45))
	case 4: // zeros
		return []string{"0", "-0", "+0", "0.0", "-0.000", "0e10", "-0e-99", ".0", "0.", "-.0e5", "00000", "0e99999999"}[r.IntN(12)]
	case 5: // exact binary fractions: ties at the 17th decimal
		m := r.Int64N(1 << 20)
		e := 40 + r.IntN(30)
		f := new(big.Float).SetPrec(200).SetMantExp(new(big.Float).SetInt64(m), -e)
		return sign() + f.Text('f', -1)
	case 6: // short decimals, as a client would send
		return sign() + strconv.Itoa(r.IntN(1000)) + "." + digits(1+r.IntN(4))
	case 7: // leading and trailing zeros
		return sign() + strings.Repeat("0", r.IntN(30)) + digits(1+r.IntN(20)) + "." + digits(r.IntN(20)) + strings.Repeat("0", r.IntN(30))
	case 8: // at the fast path's magnitude limits
		return sign() + "1" + digits(r.IntN(38)) + "e" + strconv.Itoa(r.IntN(90)-45)
	case 9: // not plain decimals: math/big's
		return []string{"inf", "-inf", "nan", "Infinity", "0x1p3", "0x1.8p-2", " 1", "1 ", "", "-", ".", "1e", "1e+", "1..2", "1.2.3",
			"e5", "1e5.5", "--1", "+-1", "1f", "0x", "1e-400", "1e5000", "١"}[r.IntN(24)]
	case 10: // decimals whose digits 18-21 sit just off a half
		return sign() + strconv.Itoa(r.IntN(1000)) + "." + digits(16) + []string{"5", "49999", "50001", "4999999999999999999"}[r.IntN(4)]
	case 11: // values near 2^128, the format's limit
		n := new(big.Int).Lsh(big.NewInt(1), 128)
		n.Sub(n, big.NewInt(r.Int64N(1<<40)))
		return sign() + n.String() + "." + digits(r.IntN(5))
	case 12: // tiny values
		return sign() + "0." + strings.Repeat("0", r.IntN(40)) + digits(1+r.IntN(20))
	}
	f := (r.Float64() - 0.5) * []float64{1, 1e-10, 1e10, 1e20}[r.IntN(4)]
	return strconv.FormatFloat(f, []byte("efg")[r.IntN(3)], -1, 64)
}

// TestIncrByFloatFastAgreesWithBig: wherever the fast path answers, its
// answer is the math/big emulation's (itself checked against redis-server
// by TestRedisDiffIncrByFloatRandom and TestProcessAttack16HIncrByFloat);
// parses agree value for value; and the fast path takes most inputs (a
// path that refused everything would pass the first two checks). Also
// chains of sums, each result the next call's stored value. A rounding or
// carry slip in ldfast.go fails it; CELLD_LDFAST_N=3000000 runs millions.
func TestIncrByFloatFastAgreesWithBig(t *testing.T) {
	n := 200000
	if testing.Short() {
		n = 20000
	}
	if s := os.Getenv("CELLD_LDFAST_N"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	r := rand.New(rand.NewPCG(17, uint64(n)))
	taken, parsed := 0, 0
	var cur []byte
	for i := range n {
		a, b := ldText(r), ldText(r)
		if v, ok := parseLDFast([]byte(a)); ok {
			parsed++
			want, wok := parseLongDouble([]byte(a))
			if !wok || want.inf != 0 {
				t.Fatalf("parseLDFast(%q) took a text parseLongDouble refuses", a)
			}
			got := new(big.Float).SetPrec(ldPrec).SetMantExp(new(big.Float).SetUint64(v.m), v.e)
			if v.neg {
				got.Neg(got)
			}
			if got.Cmp(want.f) != 0 {
				t.Fatalf("parseLDFast(%q) = %s, math/big %s", a, got.Text('p', 0), want.f.Text('p', 0))
			}
		}
		var ab []byte
		if i%3 != 0 {
			ab = []byte(a)
		}
		if i%5 == 0 && cur != nil {
			ab = cur // chains: the last answer as the stored value
		}
		want, werr := incrByFloatBig(ab, []byte(b))
		got, ok := incrByFloatFast(nil, ab, []byte(b))
		if ok {
			taken++
			if werr != nil || string(got) != want {
				t.Fatalf("IncrByFloat(%q, %q): fast %q, math/big %q, %v", ab, b, got, want, werr)
			}
		}
		if pub, perr := IncrByFloat(ab, []byte(b)); pub != want || perr != werr {
			t.Fatalf("IncrByFloat(%q, %q) = %q, %v; math/big %q, %v", ab, b, pub, perr, want, werr)
		}
		if (CheckIncrByFloat([]byte(b)) == nil) != (func() bool { _, e := incrByFloatBig(nil, []byte(b)); return e == nil }()) {
			t.Fatalf("CheckIncrByFloat(%q) disagrees with math/big", b)
		}
		if werr == nil && len(want) < 60 {
			cur = []byte(want)
		}
	}
	t.Logf("%d pairs: fast path took %d sums (%.0f%%) and %d of %d parses", n, taken, 100*float64(taken)/float64(n), parsed, n)
	if taken < n/3 || parsed < n/2 {
		t.Fatalf("the fast path took %d sums and %d parses of %d: too few for the test to mean anything", taken, parsed, n)
	}
}

// TestIncrByFloatFastEdges: hand-picked sums at the fast path's edges,
// each against math/big.
func TestIncrByFloatFastEdges(t *testing.T) {
	for _, tc := range [][2]string{
		{"9223372036854775806", "3"}, {"1000", "-1e-5"}, {"9007199254740993", "1"}, {"18446744073709551615", "1"},
		{"18446744073709551616", "-0.5"}, {"340282366920938463463374607431768211455", "0"}, {"340282366920938463463374607431768211455", "1"},
		{"-340282366920938463463374607431768211456", "1"}, {"1e76", "1e-38"}, {"99999999999999999999999999999999999999", "1e38"},
		{"0.00000000000000000999", "0"}, {"0.000000000000000005", "0"}, {"0.000000000000000015", "0"}, {"-0.000000000000000005", "0"},
		{"1e-38", "-1e-38"}, {"-0", "-0"}, {"-0", "0"}, {"0.1", "0.2"}, {"10.5", "0.1"}, {"5.0e3", "2.0e2"}, {"1.5", "-1.5"},
		{"3.0000000000000000001", "0"}, {"0.3", "-0.1"}, {"1", "-0.99999999999999999999"}, {"9223372036854775808", "-1"},
		{"0.000003814697265625", "0"}, {"0.000003814697265635", "0"}, {"12345678901234567890.12345678901234567", "0.00000000000000001"},
	} {
		for _, p := range [][2]string{tc, {tc[1], tc[0]}} {
			want, werr := incrByFloatBig([]byte(p[0]), []byte(p[1]))
			got, ok := incrByFloatFast(nil, []byte(p[0]), []byte(p[1]))
			if !ok {
				continue
			}
			if werr != nil || string(got) != want {
				t.Errorf("IncrByFloat(%q, %q): fast %q, math/big %q, %v", p[0], p[1], got, want, werr)
			}
		}
	}
}

func BenchmarkIncrByFloat(b *testing.B) {
	for _, bc := range []struct{ name, cur, incr string }{
		{"small", "10.5", "0.1"},
		{"digits21", "1234.50000000000000004", "0.1"},
		{"int", "9223372036854775806", "3"},
	} {
		b.Run(bc.name+"/fast", func(b *testing.B) {
			for range b.N {
				_, _ = IncrByFloat([]byte(bc.cur), []byte(bc.incr))
			}
		})
		b.Run(bc.name+"/big", func(b *testing.B) {
			for range b.N {
				_, _ = incrByFloatBig([]byte(bc.cur), []byte(bc.incr))
			}
		})
	}
}
