// Package kinds holds the pure operations of celld's value kinds (strings
// today; hashes, lists and sorted sets beside them), with Redis 7's rules:
// no wire protocol, no disk, no clock (time is passed in where it matters).
// The command handlers in package data call these and reply.
//
// Every function here is safe for concurrent use; none keeps its
// arguments.
package kinds

import (
	"errors"
	"math"
	"math/big"
	"strings"
)

// Errors of the string operations, with Redis 7's texts (the handlers add
// the "ERR " code).
var (
	ErrNotInt       = errors.New("value is not an integer or out of range")
	ErrOverflow     = errors.New("increment or decrement would overflow")
	ErrDecrOverflow = errors.New("decrement would overflow")
	ErrNotFloat     = errors.New("value is not a valid float")
	ErrNaNInf       = errors.New("increment would produce NaN or Infinity")
	ErrTooBig       = errors.New("string exceeds maximum allowed size (proto-max-bulk-len)")
	ErrOffset       = errors.New("offset is out of range")
)

// ParseInt reads b as Redis's string2ll: an optional '-' then ASCII
// digits, the first not '0' unless the whole text is "0"; no '+', no
// spaces, no "-0"; within int64. It does not allocate.
func ParseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	if len(b) == 1 && b[0] == '0' {
		return 0, true
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || b[0] < '1' || b[0] > '9' {
		return 0, false
	}
	var n uint64
	for _, ch := range b {
		if ch < '0' || ch > '9' || n > math.MaxUint64/10 {
			return 0, false
		}
		d := uint64(ch - '0')
		if n*10 > math.MaxUint64-d {
			return 0, false
		}
		n = n*10 + d
	}
	if neg {
		if n > 1<<63 {
			return 0, false
		}
		return -int64(n), true // n == 1<<63 wraps to MinInt64, as intended
	}
	if n > math.MaxInt64 {
		return 0, false
	}
	return int64(n), true
}

// AddInt is INCRBY's arithmetic: cur+delta, or ErrOverflow when the sum
// leaves int64 (Redis's "increment or decrement would overflow").
func AddInt(cur, delta int64) (int64, error) {
	if (delta < 0 && cur < 0 && delta < math.MinInt64-cur) ||
		(delta > 0 && cur > 0 && delta > math.MaxInt64-cur) {
		return 0, ErrOverflow
	}
	return cur + delta, nil
}

// NegateDecrement turns DECRBY's argument into INCRBY's: Redis refuses
// LLONG_MIN, whose negation does not exist, with "decrement would overflow".
func NegateDecrement(d int64) (int64, error) {
	if d == math.MinInt64 {
		return 0, ErrDecrOverflow
	}
	return -d, nil
}

// IsIntEncodable reports whether Redis would keep text as an integer
// (OBJECT ENCODING "int"): at most 20 bytes that string2ll reads back to
// the same text.
func IsIntEncodable(text []byte) bool {
	_, ok := ParseInt(text)
	return ok
}

// Encoding is OBJECT ENCODING's answer for a string of these bytes as
// Redis 7 chooses it when the string is written by SET: "int", "embstr"
// up to 44 bytes, "raw" beyond.
func Encoding(text []byte) string {
	switch {
	case IsIntEncodable(text):
		return "int"
	case len(text) <= 44:
		return "embstr"
	}
	return "raw"
}

// ---------------------------------------------------------------------------
// INCRBYFLOAT: Redis computes in C's long double, which on x86-64 is the
// x87 80-bit format (64-bit significand, 15-bit exponent), parses with
// strtold and replies with "%.17Lf" minus trailing zeros (ld2string's
// LD_STR_HUMAN mode). ldPrec and ldMaxExp emulate that format with
// math/big: exact parsing rounded once to 64 bits, a sum rounded once, and
// exact decimal printing, as glibc does.

const (
	ldPrec   = 64    // the x87 significand
	ldMaxExp = 16384 // big.Float's exponent of 2^16384, the first infinite value
	// ldMaxChars is Redis's MAX_LONG_DOUBLE_CHARS: longer texts are not floats.
	ldMaxChars = 5 * 1024
)

// ld is a long double value: a finite *big.Float at 64-bit precision, or
// an infinity (inf = ±1).
type ld struct {
	f   *big.Float
	inf int
}

// ldHalfMinSubnormal is half the smallest positive subnormal long double,
// 2^-16446: the largest magnitude strtold rounds to zero.
var ldHalfMinSubnormal = new(big.Rat).SetFrac(big.NewInt(1), new(big.Int).Lsh(big.NewInt(1), 16446))

// parseLongDouble reads text as Redis's string2ld: strtold's syntax
// (decimal or hexadecimal, "inf"/"infinity"), the whole text, no leading
// space, not NaN, not out of range (strtold's ERANGE overflow or
// underflow to zero).
func parseLongDouble(text []byte) (ld, bool) {
	if len(text) == 0 || len(text) >= ldMaxChars {
		return ld{}, false
	}
	s := string(text)
	neg := false
	body := s
	if body[0] == '+' || body[0] == '-' {
		neg = body[0] == '-'
		body = body[1:]
	}
	sign := 1
	if neg {
		sign = -1
	}
	switch lower := strings.ToLower(body); lower {
	case "inf", "infinity":
		return ld{inf: sign}, true
	}
	mant, exp2, exp10, ok := scanNumber(body)
	if !ok {
		return ld{}, false
	}
	// Range checks before any big arithmetic: a decimal exponent far
	// outside long double's range would otherwise build huge numbers.
	digits := len(mant.Text(10))
	if mant.Sign() == 0 {
		return ld{f: new(big.Float).SetPrec(ldPrec).SetInt64(0)}, true
	}
	mag := int64(digits) + exp10 // 10^(mag-1) <= |value| < 10^mag, before exp2
	mag2 := exp2 + int64(mant.BitLen())
	if exp2 != 0 {
		if mag2 > ldMaxExp+1 {
			return ld{}, false // ERANGE overflow
		}
		if mag2 < -16445-64 {
			return ld{}, false // underflows to zero
		}
	} else {
		if mag > 4933+1 {
			return ld{}, false
		}
		if mag < -4951-1 {
			return ld{}, false
		}
	}
	r := new(big.Rat).SetInt(mant)
	if exp10 != 0 {
		p := new(big.Int).Exp(big.NewInt(10), big.NewInt(abs64(exp10)), nil)
		if exp10 > 0 {
			r.Mul(r, new(big.Rat).SetInt(p))
		} else {
			r.Quo(r, new(big.Rat).SetInt(p))
		}
	}
	if exp2 != 0 {
		p := new(big.Int).Lsh(big.NewInt(1), uint(abs64(exp2)))
		if exp2 > 0 {
			r.Mul(r, new(big.Rat).SetInt(p))
		} else {
			r.Quo(r, new(big.Rat).SetInt(p))
		}
	}
	f := new(big.Float).SetPrec(ldPrec).SetMode(big.ToNearestEven).SetRat(r)
	if f.MantExp(nil) > ldMaxExp {
		return ld{}, false // rounded up to the overflow threshold
	}
	if f.Sign() == 0 || f.MantExp(nil) < -16445+1 && r.Cmp(ldHalfMinSubnormal) <= 0 {
		// strtold rounds it to zero (ERANGE, refused). Above half the
		// smallest subnormal (2^-16445) it rounds to a nonzero subnormal,
		// which string2ld takes although errno is ERANGE.
		return ld{}, false
	}
	if neg {
		f.Neg(f)
	}
	return ld{f: f}, true
}

func abs64(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// scanNumber reads strtold's unsigned number syntax: decimal digits with an
// optional '.' and e-exponent, or "0x" hex digits with an optional '.' and
// p-exponent. The value is mant * 10^exp10 (decimal) or mant * 2^exp2 (hex).
func scanNumber(s string) (mant *big.Int, exp2, exp10 int64, ok bool) {
	hex := len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')
	base, expCh := 10, byte('e')
	if hex {
		s = s[2:]
		base, expCh = 16, 'p'
	}
	var digits []byte
	point, seen := -1, false
	i := 0
	for ; i < len(s); i++ {
		ch := s[i]
		if ch == '.' {
			if point >= 0 {
				return nil, 0, 0, false
			}
			point = len(digits)
			continue
		}
		if digitVal(ch) >= base {
			break
		}
		digits = append(digits, ch)
		seen = true
	}
	if !seen {
		return nil, 0, 0, false
	}
	var e int64
	if i < len(s) {
		if s[i]|0x20 != expCh {
			return nil, 0, 0, false
		}
		i++
		eneg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			eneg = s[i] == '-'
			i++
		}
		if i == len(s) {
			return nil, 0, 0, false
		}
		for ; i < len(s); i++ {
			if s[i] < '0' || s[i] > '9' {
				return nil, 0, 0, false
			}
			if e < 1<<40 {
				e = e*10 + int64(s[i]-'0')
			}
		}
		if eneg {
			e = -e
		}
	}
	if point >= 0 {
		frac := int64(len(digits) - point)
		if hex {
			e -= 4 * frac
		} else {
			e -= frac
		}
	}
	mant, _ = new(big.Int).SetString(string(digits), base)
	if hex {
		return mant, e, 0, true
	}
	return mant, 0, e, true
}

func digitVal(ch byte) int {
	switch {
	case '0' <= ch && ch <= '9':
		return int(ch - '0')
	case 'a' <= ch && ch <= 'f':
		return int(ch-'a') + 10
	case 'A' <= ch && ch <= 'F':
		return int(ch-'A') + 10
	}
	return 99
}

// ValidFloat reports whether text is a float as INCRBYFLOAT's argument
// must be (Redis's string2ld).
func ValidFloat(text []byte) bool {
	_, ok := parseLongDouble(text)
	return ok
}

// CheckIncrByFloat is IncrByFloat's verdict on incr alone, as if added to
// a missing key: ErrNotFloat when it is not a float (out of long double's
// range included, as parseLongDouble refuses it), ErrNaNInf when it is an
// infinity; nil otherwise. For a command
// that must refuse a bad increment before it looks at the stored value
// (HINCRBYFLOAT): one parse, no sum and no formatting.
func CheckIncrByFloat(incr []byte) error {
	if _, ok := parseLDFast(incr); ok {
		return nil // a finite float
	}
	b, ok := parseLongDouble(incr)
	switch {
	case !ok:
		return ErrNotFloat
	case b.inf != 0:
		return ErrNaNInf
	}
	return nil
}

// IncrByFloat is INCRBYFLOAT's arithmetic on texts: cur (the stored string,
// nil for a missing key, read as 0) plus incr, in long double, formatted as
// Redis stores and replies it. Errors: ErrNotFloat (either text is not a
// float), ErrNaNInf (the sum is not finite). Common texts take the
// allocation-free fast path (ldfast.go, ~0.1-0.2 µs); the rest the math/big
// emulation (incrByFloatBig, ~3 µs), with the same results.
func IncrByFloat(cur, incr []byte) (string, error) {
	var buf [48]byte
	if out, ok := incrByFloatFast(buf[:0], cur, incr); ok {
		return string(out), nil
	}
	return incrByFloatBig(cur, incr)
}

// incrByFloatBig is IncrByFloat on math/big, for every text.
func incrByFloatBig(cur, incr []byte) (string, error) {
	a := ld{f: new(big.Float).SetPrec(ldPrec)}
	if cur != nil {
		var ok bool
		if a, ok = parseLongDouble(cur); !ok {
			return "", ErrNotFloat
		}
	}
	b, ok := parseLongDouble(incr)
	if !ok {
		return "", ErrNotFloat
	}
	if a.inf != 0 || b.inf != 0 {
		return "", ErrNaNInf // inf+x is inf, inf-inf is NaN: both refused
	}
	sum := new(big.Float).SetPrec(ldPrec).SetMode(big.ToNearestEven).Add(a.f, b.f)
	if sum.Sign() != 0 && sum.MantExp(nil) > ldMaxExp {
		return "", ErrNaNInf
	}
	return FormatLongDouble(sum), nil
}

// FormatLongDouble formats f as Redis's ld2string in LD_STR_HUMAN mode:
// "%.17Lf", then trailing zeros (and a bare '.') removed, "-0" as "0".
func FormatLongDouble(f *big.Float) string {
	s := f.Text('f', 17)
	if strings.IndexByte(s, '.') >= 0 {
		s = strings.TrimRight(s, "0")
		s = strings.TrimSuffix(s, ".")
	}
	if s == "-0" {
		s = "0"
	}
	return s
}

// ---------------------------------------------------------------------------
// Ranges: GETRANGE, SETRANGE, APPEND.

// GetRange is GETRANGE's arithmetic (Redis 7): the part of a string of
// length n between start and end, inclusive, negative counting from the
// end. It returns lo, hi with the answer text[lo:hi] (empty when lo == hi).
func GetRange(start, end int64, n int) (lo, hi int) {
	ln := int64(n)
	if start < 0 && end < 0 && start > end {
		return 0, 0
	}
	if start < 0 {
		start += ln
	}
	if end < 0 {
		end += ln
	}
	if start < 0 {
		start = 0
	}
	if end < 0 {
		end = 0
	}
	if end >= ln {
		end = ln - 1
	}
	if start > end || ln == 0 {
		return 0, 0
	}
	return int(start), int(end + 1)
}

// CheckLength is Redis's checkStringLength: a string of size bytes grown by
// add more must stay within max (proto-max-bulk-len), with no overflow.
func CheckLength(size, add, max int64) error {
	total := int64(uint64(size) + uint64(add))
	if total > max || total < size || total < add {
		return ErrTooBig
	}
	return nil
}

// SetRange returns old with val written at offset, zero-padded when the
// offset lies past its end (SETRANGE). The caller has checked the length
// with CheckLength. old is not modified.
func SetRange(old []byte, offset int, val []byte) []byte {
	n := max(len(old), offset+len(val))
	out := make([]byte, n)
	copy(out, old)
	copy(out[offset:], val)
	return out
}
