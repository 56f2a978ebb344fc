package script

import (
	"math"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// strFormat is Lua 5.1.5's string.format (lstrlib.c str_format) with C's
// printf semantics as glibc gives them: flags "-+ #0" (at most five),
// a width and a precision of at most two digits each, and the conversions
// %d %i %u %c %x %X %o %e %E %f %g %G %q %s and %%. Numbers are taken with
// luaL_checknumber (so '3' is 3) and converted to C integers as x86-64 does;
// strings with luaL_checklstring (so 3 is '3'); an item stops at its first
// NUL byte, as sprintf+strlen make it, except a %s without precision of 100
// bytes or more, which is added unchanged.
func strFormat(L *lua.LState) int {
	top := L.GetTop()
	f := checkLString(L, 1)
	arg := 1
	var b []byte
	for i := 0; i < len(f); {
		c := f[i]
		i++
		if c != '%' {
			b = append(b, c)
			continue
		}
		if i < len(f) && f[i] == '%' {
			b = append(b, '%')
			i++
			continue
		}
		arg++
		if arg > top {
			argError(L, arg, "no value")
		}
		var spec fmtSpec
		i = spec.scan(L, f, i)
		conv := byte(0)
		if i < len(f) {
			conv = f[i]
			i++
		}
		var item []byte
		switch conv {
		case 'c':
			item = spec.pad(nil, []byte{byte(cInt32(checkNumber(L, arg)))}, false)
		case 'd', 'i':
			n := cInt64(checkNumber(L, arg))
			u := uint64(n)
			if n < 0 {
				u = -u
			}
			item = spec.integer(u, n < 0, true, 10, false)
		case 'o', 'u', 'x', 'X':
			base := map[byte]int{'o': 8, 'u': 10, 'x': 16, 'X': 16}[conv]
			item = spec.integer(cUint64(checkNumber(L, arg)), false, false, base, conv == 'X')
		case 'e', 'E', 'f', 'g', 'G':
			item = spec.float(checkNumber(L, arg), conv)
		case 'q':
			b = appendQuoted(b, checkLString(L, arg))
			continue
		case 's':
			s := checkLString(L, arg)
			if spec.prec < 0 && len(s) >= 100 {
				b = append(b, s...)
				continue
			}
			s = cString(s)
			if spec.prec >= 0 && len(s) > spec.prec {
				s = s[:spec.prec]
			}
			item = spec.pad(nil, []byte(s), false)
		default:
			L.RaiseError("invalid option '%%%s' to 'format'", cString(string([]byte{conv})))
		}
		if k := strings.IndexByte(string(item), 0); k >= 0 {
			item = item[:k] // strlen(buff)
		}
		b = append(b, item...)
	}
	L.Push(lua.LString(b))
	return 1
}

// fmtSpec is one conversion's flags, width and precision (-1: none).
type fmtSpec struct {
	minus, plus, space, alt, zero bool
	width, prec                   int
}

// scan is lstrlib's scanformat; it returns the index of the conversion
// character.
func (s *fmtSpec) scan(L *lua.LState, f string, i int) int {
	start := i
	for i < len(f) && strings.IndexByte("-+ #0", f[i]) >= 0 {
		switch f[i] {
		case '-':
			s.minus = true
		case '+':
			s.plus = true
		case ' ':
			s.space = true
		case '#':
			s.alt = true
		case '0':
			s.zero = true
		}
		i++
	}
	if i-start >= 6 {
		L.RaiseError("invalid format (repeated flags)")
	}
	digits := func() int {
		n, k := 0, 0
		for k < 2 && i < len(f) && isDigit(f[i]) {
			n = n*10 + int(f[i]-'0')
			i++
			k++
		}
		return n
	}
	s.width = digits()
	s.prec = -1
	if i < len(f) && f[i] == '.' {
		i++
		s.prec = digits()
	}
	if i < len(f) && isDigit(f[i]) {
		L.RaiseError("invalid format (width or precision too long)")
	}
	return i
}

// pad right- or left-justifies body (after prefix, the sign or 0x) to the
// width; zeros go between prefix and body when zeroOK and the 0 flag is set
// without the - flag.
func (s *fmtSpec) pad(prefix, body []byte, zeroOK bool) []byte {
	n := s.width - len(prefix) - len(body)
	out := make([]byte, 0, len(prefix)+len(body)+max(n, 0))
	switch {
	case n <= 0:
		out = append(append(out, prefix...), body...)
	case s.minus:
		out = append(append(out, prefix...), body...)
		out = append(out, strings.Repeat(" ", n)...)
	case s.zero && zeroOK:
		out = append(out, prefix...)
		out = append(out, strings.Repeat("0", n)...)
		out = append(out, body...)
	default:
		out = append(out, strings.Repeat(" ", n)...)
		out = append(append(out, prefix...), body...)
	}
	return out
}

func (s *fmtSpec) sign(neg bool) []byte {
	switch {
	case neg:
		return []byte{'-'}
	case s.plus:
		return []byte{'+'}
	case s.space:
		return []byte{' '}
	}
	return nil
}

// integer formats u (the magnitude; neg for a negative %d) in base.
func (s *fmtSpec) integer(u uint64, neg, signed bool, base int, upper bool) []byte {
	digits := []byte(strconv.FormatUint(u, base))
	if upper {
		digits = []byte(strings.ToUpper(string(digits)))
	}
	if s.prec == 0 && u == 0 {
		digits = digits[:0]
	}
	if s.prec > len(digits) {
		digits = append([]byte(strings.Repeat("0", s.prec-len(digits))), digits...)
	}
	var prefix []byte
	if signed {
		prefix = s.sign(neg)
	}
	if s.alt {
		switch {
		case base == 8 && (len(digits) == 0 || digits[0] != '0'):
			digits = append([]byte{'0'}, digits...)
		case base == 16 && u != 0:
			if upper {
				prefix = []byte("0X")
			} else {
				prefix = []byte("0x")
			}
		}
	}
	return s.pad(prefix, digits, s.prec < 0)
}

// float formats x for %e %E %f %g %G.
func (s *fmtSpec) float(x float64, conv byte) []byte {
	upper := conv == 'E' || conv == 'G'
	prefix := s.sign(math.Signbit(x))
	if math.IsInf(x, 0) || x != x {
		body := "inf"
		if x != x {
			body = "nan"
		}
		if upper {
			body = strings.ToUpper(body)
		}
		return s.pad(prefix, []byte(body), false)
	}
	x = math.Abs(x)
	prec := s.prec
	if prec < 0 {
		prec = 6
	}
	var body []byte
	switch conv {
	case 'f':
		body = strconv.AppendFloat(nil, x, 'f', prec, 64)
		if s.alt && prec == 0 {
			body = append(body, '.')
		}
	case 'e', 'E':
		body = s.expForm(x, prec)
	case 'g', 'G':
		p := prec
		if p == 0 {
			p = 1
		}
		e := strconv.AppendFloat(nil, x, 'e', p-1, 64)
		exp, _ := strconv.Atoi(string(e[strings.IndexByte(string(e), 'e')+1:]))
		if p > exp && exp >= -4 {
			body = strconv.AppendFloat(nil, x, 'f', p-1-exp, 64)
			if s.alt {
				if strings.IndexByte(string(body), '.') < 0 {
					body = append(body, '.')
				}
			} else {
				body = trimFraction(body)
			}
		} else {
			body = s.expForm(x, p-1)
			if !s.alt {
				k := strings.IndexByte(string(body), 'e')
				body = append(trimFraction(body[:k:k]), body[k:]...)
			}
		}
	}
	if upper {
		body = []byte(strings.ToUpper(string(body)))
	}
	return s.pad(prefix, body, true)
}

// expForm is C's %.<prec>e of x >= 0 (with the # flag's point).
func (s *fmtSpec) expForm(x float64, prec int) []byte {
	body := strconv.AppendFloat(nil, x, 'e', prec, 64)
	if s.alt && prec == 0 {
		k := strings.IndexByte(string(body), 'e')
		body = append(body[:k:k], append([]byte{'.'}, body[k:]...)...)
	}
	return body
}

// trimFraction drops trailing zeros after a decimal point, and the point.
func trimFraction(b []byte) []byte {
	if strings.IndexByte(string(b), '.') < 0 {
		return b
	}
	for len(b) > 0 && b[len(b)-1] == '0' {
		b = b[:len(b)-1]
	}
	if len(b) > 0 && b[len(b)-1] == '.' {
		b = b[:len(b)-1]
	}
	return b
}

// appendQuoted is lstrlib's addquoted (%q).
func appendQuoted(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\', '\n':
			b = append(b, '\\', c)
		case '\r':
			b = append(b, `\r`...)
		case 0:
			b = append(b, `\000`...)
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
