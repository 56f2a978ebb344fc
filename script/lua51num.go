package script

import (
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// Lua 5.1's number <-> string conversions, as Redis's embedded Lua does
// them on Linux (glibc): strings become numbers with strtod (luaO_str2d),
// numbers become strings with "%.14g" (LUA_NUMBER_FMT), and numbers become
// C integers the way x86-64's cvttsd2si does (truncation; NaN and values
// out of range give the "integer indefinite" 0x8000000000000000). These
// replace gopher-lua's own rules (strconv.ParseInt with base 0, so "010"
// is octal; fmt's shortest float formatting, so 1e15 prints as
// 1000000000000000) wherever the script package can reach them: the base,
// string, math and table functions and the .. operator (see lua51lib.go
// and lua51concat.go).
//
// All functions here are pure and safe for concurrent use.

// isCSpace is C's isspace in the "C" locale.
func isCSpace(c byte) bool {
	return c == ' ' || ('\t' <= c && c <= '\r')
}

// str2number is Lua 5.1's luaO_str2d with glibc's strtod: optional
// surrounding whitespace, a sign, then a decimal or hexadecimal
// (0x, optional binary exponent) number, "inf", "infinity" or "nan"
// (optionally "nan(chars)"), any case. The string ends at its first NUL,
// as a C string does.
func str2number(s string) (float64, bool) {
	// Fast path: a short decimal integer, what ARGV usually holds.
	if n := len(s); n > 0 && n <= 15 {
		i, neg := 0, s[0] == '-'
		if neg {
			i = 1
		}
		v := int64(0)
		for ; i < n && isDigit(s[i]); i++ {
			v = v*10 + int64(s[i]-'0')
		}
		if i == n && (n > 1 || !neg) {
			if neg {
				return -float64(v), true
			}
			return float64(v), true
		}
	}
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	f, n := strtod(s)
	if n == 0 {
		return 0, false
	}
	for n < len(s) && isCSpace(s[n]) {
		n++
	}
	return f, n == len(s)
}

// strtod parses the longest prefix of s that glibc's strtod accepts and
// returns the value and how many bytes it used (0: no conversion).
func strtod(s string) (float64, int) {
	i := 0
	for i < len(s) && isCSpace(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	sign := func(f float64) float64 {
		if neg {
			return -f
		}
		return f
	}
	rest := s[i:]
	switch {
	case hasPrefixFold(rest, "infinity"):
		return sign(math.Inf(1)), i + 8
	case hasPrefixFold(rest, "inf"):
		return sign(math.Inf(1)), i + 3
	case hasPrefixFold(rest, "nan"):
		n := i + 3
		if n < len(s) && s[n] == '(' {
			j := n + 1
			for j < len(s) && (isAlnum(s[j]) || s[j] == '_') {
				j++
			}
			if j < len(s) && s[j] == ')' {
				n = j + 1
			}
		}
		return sign(math.NaN()), n
	}
	if len(rest) >= 2 && rest[0] == '0' && (rest[1] == 'x' || rest[1] == 'X') {
		if f, n := hexFloat(rest[2:]); n > 0 {
			return sign(f), i + 2 + n
		}
		// "0x" with no hex digit: strtod reads the "0".
		return sign(0), i + 1
	}
	j := i
	digits := 0
	for j < len(s) && isDigit(s[j]) {
		j++
		digits++
	}
	if j < len(s) && s[j] == '.' {
		j++
		for j < len(s) && isDigit(s[j]) {
			j++
			digits++
		}
	}
	if digits == 0 {
		return 0, 0
	}
	if j < len(s) && (s[j] == 'e' || s[j] == 'E') {
		k := j + 1
		if k < len(s) && (s[k] == '+' || s[k] == '-') {
			k++
		}
		if k < len(s) && isDigit(s[k]) {
			for k < len(s) && isDigit(s[k]) {
				k++
			}
			j = k
		}
	}
	f, err := strconv.ParseFloat(s[i:j], 64)
	if err != nil && !isRangeErr(err) {
		return 0, 0
	}
	return sign(f), j
}

// hexFloat parses hex digits, an optional fraction and an optional binary
// exponent (after "0x"); n is 0 when there is no hex digit.
func hexFloat(s string) (float64, int) {
	j, digits := 0, 0
	for j < len(s) && isHexDigit(s[j]) {
		j++
		digits++
	}
	if j < len(s) && s[j] == '.' {
		j++
		for j < len(s) && isHexDigit(s[j]) {
			j++
			digits++
		}
	}
	if digits == 0 {
		return 0, 0
	}
	mant := s[:j]
	exp := "p0"
	if j < len(s) && (s[j] == 'p' || s[j] == 'P') {
		k := j + 1
		if k < len(s) && (s[k] == '+' || s[k] == '-') {
			k++
		}
		if k < len(s) && isDigit(s[k]) {
			for k < len(s) && isDigit(s[k]) {
				k++
			}
			exp = s[j:k]
			j = k
		}
	}
	if mant[0] == '.' {
		mant = "0" + mant
	}
	f, err := strconv.ParseFloat("0x"+mant+exp, 64)
	if err != nil && !isRangeErr(err) {
		return 0, 0
	}
	return f, j
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

func isDigit(c byte) bool    { return '0' <= c && c <= '9' }
func isAlnum(c byte) bool    { return isDigit(c) || ('a' <= c|0x20 && c|0x20 <= 'z') }
func isHexDigit(c byte) bool { return isDigit(c) || ('a' <= c|0x20 && c|0x20 <= 'f') }

// strtoul is C's strtoul(s, &end, base) for 2 <= base <= 36 as Lua 5.1's
// tonumber(s, base) uses it: leading whitespace, a sign (a minus negates
// the unsigned result), "0x" allowed for base 16, saturating at
// ULONG_MAX; ok is false when no digit was read or something other than
// whitespace follows the digits.
func strtoul(s string, base int) (uint64, bool) {
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	i := 0
	for i < len(s) && isCSpace(s[i]) {
		i++
	}
	neg := false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	if base == 16 && i+2 < len(s) && s[i] == '0' && s[i+1]|0x20 == 'x' && digitVal(s[i+2]) < 16 {
		i += 2
	}
	var n uint64
	overflow := false
	start := i
	for i < len(s) {
		d := digitVal(s[i])
		if d >= base {
			break
		}
		if !overflow {
			hi, lo := mulAdd(n, uint64(base), uint64(d))
			if hi != 0 {
				overflow = true
			}
			n = lo
		}
		i++
	}
	if i == start {
		return 0, false
	}
	for i < len(s) && isCSpace(s[i]) {
		i++
	}
	if i != len(s) {
		return 0, false
	}
	if overflow {
		return math.MaxUint64, true
	}
	if neg {
		n = -n
	}
	return n, true
}

func mulAdd(n, base, d uint64) (hi, lo uint64) {
	hi, lo = bits.Mul64(n, base)
	var carry uint64
	lo, carry = bits.Add64(lo, d, 0)
	return hi + carry, lo
}

func digitVal(c byte) int {
	switch {
	case isDigit(c):
		return int(c - '0')
	case 'a' <= c|0x20 && c|0x20 <= 'z':
		return int(c|0x20-'a') + 10
	}
	return 99
}

// cInt64 converts like x86-64's cvttsd2si: truncation toward zero, and
// math.MinInt64 for NaN and values out of range (what (long)d gives in
// Redis's Lua on amd64, e.g. for lua_tointeger and string.format's %d).
func cInt64(f float64) int64 {
	if f != f || f >= 9223372036854775808.0 || f < -9223372036854775808.0 {
		return math.MinInt64
	}
	return int64(f)
}

// cUint64 is gcc's double -> unsigned long on x86-64 (string.format's %x,
// %o, %u): values below 2^63 (and NaN) go through cvttsd2si; larger ones
// are offset by 2^63 first.
func cUint64(f float64) uint64 {
	if !(f >= 9223372036854775808.0) {
		return uint64(cInt64(f))
	}
	return uint64(cInt64(f-9223372036854775808.0)) ^ (1 << 63)
}

// cInt is Lua 5.1's (int) of a lua_Integer (luaL_checkint): the low 32
// bits, sign-extended.
func cInt(n int64) int {
	return int(int32(n))
}

// cInt32 is (int)d on x86-64 (string.format's %c): 32-bit cvttsd2si.
func cInt32(f float64) int32 {
	if f != f || f >= 2147483648.0 || f <= -2147483649.0 {
		return math.MinInt32
	}
	return int32(f)
}

// appendLuaNumber appends f as Lua 5.1's tostring does ("%.14g" with
// glibc's spelling of infinities and NaNs: "inf", "-inf", "nan", "-nan").
func appendLuaNumber(b []byte, f float64) []byte {
	if f == math.Trunc(f) && math.Abs(f) < 1e14 {
		if f == 0 && math.Signbit(f) {
			return append(b, "-0"...)
		}
		return strconv.AppendInt(b, int64(f), 10)
	}
	switch {
	case math.IsInf(f, 1):
		return append(b, "inf"...)
	case math.IsInf(f, -1):
		return append(b, "-inf"...)
	case f != f:
		if math.Signbit(f) {
			return append(b, "-nan"...)
		}
		return append(b, "nan"...)
	}
	return strconv.AppendFloat(b, f, 'g', 14, 64)
}
