package script

import (
	"math"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// Conversions between Redis replies and Lua values, following Redis 7's
// "Conversion between Lua and Redis data types":
//
//	Redis → Lua (a command's reply, inside the script)
//	  integer        → number
//	  bulk string    → string
//	  null bulk/array→ false
//	  array          → table (array part)
//	  status         → table {ok = text}
//	  error          → table {err = "CODE message"}
//	  RESP3 (after redis.setresp(3)): null → nil, boolean → boolean,
//	  double → {double = n}, big number → {big_number = s},
//	  verbatim → {verbatim_string = {string = s, format = f}},
//	  map → {map = {k = v}}, set → {set = {member = true}}
//
//	Lua → Redis (the script's result)
//	  number         → integer (truncated toward zero)
//	  string         → bulk string
//	  true           → integer 1 (RESP3 boolean after setresp(3))
//	  false, nil     → null (RESP3 boolean false after setresp(3))
//	  table with err → error; with ok → status; with double, big_number,
//	  verbatim_string, map, set → the RESP3 type (its RESP2 form for a
//	  RESP2 caller); otherwise an array of t[1], t[2], ... up to the first
//	  nil.

// maxReplyDepth bounds the nesting of a script's result. A table that
// contains itself would otherwise recurse forever; Redis stops at its Lua
// stack limit with the same error text.
const maxReplyDepth = 1000

// Boxed Lua numbers for small integers: most integer replies (flags,
// counts, CL.THROTTLE's fields) then cost no allocation.
const (
	smallIntMin = -128
	smallIntMax = 1023
)

var smallInts = func() (t [smallIntMax - smallIntMin + 1]lua.LValue) {
	for i := range t {
		t[i] = lua.LNumber(i + smallIntMin)
	}
	return t
}()

// number returns n boxed, reusing a recent box of the same value: replies
// repeat their numbers (a limiter's limit, periods).
func (v *vm) number(n int64) lua.LValue {
	if smallIntMin <= n && n <= smallIntMax {
		return smallInts[n-smallIntMin]
	}
	e := &v.nums[uint64(n)%uint64(len(v.nums))]
	if e.v == nil || e.n != n {
		e.n, e.v = n, lua.LNumber(n)
	}
	return e.v
}

// errorTable is Redis's luaPushErrorBuff: text either "-CODE message" (a
// reply as a command sent it) or a bare message, which gets the ERR code.
func errorTable(L *lua.LState, text string) *lua.LTable {
	t := L.CreateTable(0, 1)
	t.RawSetString("err", lua.LString(errorText(text)))
	return t
}

func errorText(text string) string {
	code, msg := "ERR", text
	if strings.HasPrefix(text, "-") {
		body := text[1:]
		if i := strings.IndexByte(body, ' '); i >= 0 {
			code, msg = body[:i], body[i+1:]
		} else {
			msg = body
		}
	}
	return code + " " + strings.Trim(msg, "\r\n")
}

// ---------------------------------------------------------------------------
// RESP → Lua

// parseReply converts the one RESP reply at the start of b. isErr reports a
// top-level error reply (redis.call raises it). A malformed reply (which a
// correct host never produces) becomes an error table.
func (v *vm) parseReply(b []byte) (val lua.LValue, isErr bool) {
	val, _, ok := v.parseValue(b)
	if !ok {
		return errorTable(v.L, "ERR celld: malformed reply from command"), true
	}
	if t, ok := val.(*lua.LTable); ok && len(b) > 0 && b[0] == '-' {
		return t, true
	}
	return val, false
}

// line returns the header line after the type byte, without CRLF, and
// what follows it.
func line(b []byte) (hdr, rest []byte, ok bool) {
	for i := 1; i+1 < len(b); i++ {
		if b[i] == '\r' && b[i+1] == '\n' {
			return b[1:i], b[i+2:], true
		}
	}
	return nil, nil, false
}

func parseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	neg := b[0] == '-'
	if neg || b[0] == '+' {
		b = b[1:]
		if len(b) == 0 {
			return 0, false
		}
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0') // wraps only for out-of-range input
	}
	if neg {
		n = -n
	}
	return n, true
}

// bulk splits a length-prefixed payload of n bytes plus CRLF off b.
func bulk(b []byte, n int64) (payload, rest []byte, ok bool) {
	if n < 0 || int64(len(b)) < n+2 {
		return nil, nil, false
	}
	return b[:n], b[n+2:], true
}

func (v *vm) parseValue(b []byte) (lua.LValue, []byte, bool) {
	if len(b) == 0 {
		return nil, nil, false
	}
	kind := b[0]
	hdr, rest, ok := line(b)
	if !ok {
		return nil, nil, false
	}
	L := v.L
	switch kind {
	case ':':
		n, ok := parseInt(hdr)
		return v.number(n), rest, ok
	case '+':
		t := L.CreateTable(0, 1)
		t.RawSetString("ok", v.str(hdr))
		return t, rest, true
	case '-':
		return errorTable(L, "-"+string(hdr)), rest, true
	case '$':
		n, ok := parseInt(hdr)
		if !ok {
			return nil, nil, false
		}
		if n < 0 {
			return lua.LFalse, rest, true
		}
		p, rest, ok := bulk(rest, n)
		return v.str(p), rest, ok
	case '*', '>':
		n, ok := parseInt(hdr)
		if !ok {
			return nil, nil, false
		}
		if n < 0 {
			return lua.LFalse, rest, true
		}
		t := L.CreateTable(int(min(n, 1024)), 0)
		for i := int64(1); i <= n; i++ {
			var e lua.LValue
			if e, rest, ok = v.parseValue(rest); !ok {
				return nil, nil, false
			}
			t.RawSetInt(int(i), e)
		}
		return t, rest, true
	case '_':
		return lua.LNil, rest, true
	case '#':
		return lua.LBool(len(hdr) == 1 && hdr[0] == 't'), rest, true
	case ',':
		f, err := strconv.ParseFloat(string(hdr), 64)
		if err != nil {
			switch string(hdr) {
			case "inf", "+inf":
				f = math.Inf(1)
			case "-inf":
				f = math.Inf(-1)
			case "nan":
				f = math.NaN()
			default:
				return nil, nil, false
			}
		}
		t := L.CreateTable(0, 1)
		t.RawSetString("double", lua.LNumber(f))
		return t, rest, true
	case '(':
		t := L.CreateTable(0, 1)
		t.RawSetString("big_number", v.str(hdr))
		return t, rest, true
	case '=':
		n, ok := parseInt(hdr)
		if !ok {
			return nil, nil, false
		}
		p, rest, ok := bulk(rest, n)
		if !ok || len(p) < 4 {
			return nil, nil, false
		}
		inner := L.CreateTable(0, 2)
		inner.RawSetString("string", v.str(p[4:]))
		inner.RawSetString("format", v.str(p[:3]))
		t := L.CreateTable(0, 1)
		t.RawSetString("verbatim_string", inner)
		return t, rest, true
	case '%', '~', '|':
		n, ok := parseInt(hdr)
		if !ok || n < 0 {
			return nil, nil, false
		}
		inner := L.CreateTable(0, int(min(n, 1024)))
		for i := int64(0); i < n; i++ {
			var k, e lua.LValue = nil, lua.LTrue
			if k, rest, ok = v.parseValue(rest); !ok {
				return nil, nil, false
			}
			if kind != '~' {
				if e, rest, ok = v.parseValue(rest); !ok {
					return nil, nil, false
				}
			}
			if kind != '|' && k != lua.LNil {
				inner.RawSet(k, e)
			}
		}
		if kind == '|' { // attributes are dropped; the reply follows
			return v.parseValue(rest)
		}
		field := "map"
		if kind == '~' {
			field = "set"
		}
		t := L.CreateTable(0, 1)
		t.RawSetString(field, inner)
		return t, rest, true
	}
	return nil, nil, false
}

// ---------------------------------------------------------------------------
// Lua → RESP

// appendReply appends the RESP encoding of a script's result.
func (v *vm) appendReply(b []byte, lv lua.LValue, depth int) []byte {
	switch x := lv.(type) {
	case lua.LString:
		return appendBulk(b, string(x))
	case lua.LNumber:
		return appendInt(b, int64(float64(x)))
	case lua.LBool:
		if v.scriptRESP3 {
			return v.appendBool(b, bool(x))
		}
		if x {
			return append(b, ":1\r\n"...)
		}
		return v.appendNull(b)
	case *lua.LTable:
		if depth >= maxReplyDepth {
			return append(b, "-ERR reached lua stack limit\r\n"...)
		}
		return v.appendTable(b, x, depth)
	}
	return v.appendNull(b)
}

func (v *vm) appendTable(b []byte, t *lua.LTable, depth int) []byte {
	if e, ok := t.RawGetString("err").(lua.LString); ok {
		b = append(b, '-')
		b = appendLine(b, string(e))
		return append(b, '\r', '\n')
	}
	if s, ok := t.RawGetString("ok").(lua.LString); ok {
		b = append(b, '+')
		b = appendLine(b, string(s))
		return append(b, '\r', '\n')
	}
	if d, ok := t.RawGetString("double").(lua.LNumber); ok {
		return v.appendDouble(b, float64(d))
	}
	if s, ok := t.RawGetString("big_number").(lua.LString); ok {
		if !v.callerRESP3 {
			return appendBulk(b, string(s))
		}
		b = append(b, '(')
		b = appendLine(b, string(s))
		return append(b, '\r', '\n')
	}
	if vs, ok := t.RawGetString("verbatim_string").(*lua.LTable); ok {
		f, ok1 := vs.RawGetString("format").(lua.LString)
		s, ok2 := vs.RawGetString("string").(lua.LString)
		if ok1 && ok2 {
			if !v.callerRESP3 {
				return appendBulk(b, string(s))
			}
			format := string(f) + "   "
			b = appendHeader(b, '=', len(s)+4)
			b = append(b, format[:3]...)
			b = append(b, ':')
			b = append(b, s...)
			return append(b, '\r', '\n')
		}
	}
	if m, ok := t.RawGetString("map").(*lua.LTable); ok {
		n := 0
		m.ForEach(func(_, _ lua.LValue) { n++ })
		if v.callerRESP3 {
			b = appendHeader(b, '%', n)
		} else {
			b = appendHeader(b, '*', 2*n)
		}
		m.ForEach(func(k, e lua.LValue) {
			b = v.flushed(b)
			b = v.appendReply(b, k, depth+1)
			b = v.appendReply(b, e, depth+1)
		})
		return b
	}
	if s, ok := t.RawGetString("set").(*lua.LTable); ok {
		n := 0
		s.ForEach(func(_, _ lua.LValue) { n++ })
		if v.callerRESP3 {
			b = appendHeader(b, '~', n)
		} else {
			b = appendHeader(b, '*', n)
		}
		s.ForEach(func(k, _ lua.LValue) { b = v.appendReply(v.flushed(b), k, depth+1) })
		return b
	}
	n := 0
	for t.RawGetInt(n+1) != lua.LNil {
		n++
	}
	b = appendHeader(b, '*', n)
	for i := 1; i <= n; i++ {
		b = v.appendReply(v.flushed(b), t.RawGetInt(i), depth+1)
	}
	return b
}

// flushed hands b to Options.Flush once it is past FlushAt (one
// comparison otherwise).
func (v *vm) flushed(b []byte) []byte {
	if len(b) > FlushAt && v.flush != nil {
		return v.flush(b)
	}
	return b
}

func (v *vm) appendNull(b []byte) []byte {
	if v.callerRESP3 {
		return append(b, "_\r\n"...)
	}
	return append(b, "$-1\r\n"...)
}

func (v *vm) appendBool(b []byte, t bool) []byte {
	switch {
	case v.callerRESP3 && t:
		return append(b, "#t\r\n"...)
	case v.callerRESP3:
		return append(b, "#f\r\n"...)
	case t:
		return append(b, ":1\r\n"...)
	}
	return append(b, ":0\r\n"...)
}

func (v *vm) appendDouble(b []byte, d float64) []byte {
	var buf [32]byte
	s := appendFloat17(buf[:0], d)
	if v.callerRESP3 {
		b = append(b, ',')
		b = append(b, s...)
		return append(b, '\r', '\n')
	}
	b = appendHeader(b, '$', len(s))
	b = append(b, s...)
	return append(b, '\r', '\n')
}

func appendInt(b []byte, n int64) []byte {
	b = append(b, ':')
	b = strconv.AppendInt(b, n, 10)
	return append(b, '\r', '\n')
}

func appendHeader(b []byte, kind byte, n int) []byte {
	b = append(b, kind)
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, '\r', '\n')
}

func appendBulk(b []byte, s string) []byte {
	b = appendHeader(b, '$', len(s))
	b = append(b, s...)
	return append(b, '\r', '\n')
}

// appendLine appends s with CR and LF turned into spaces, as Redis does
// for status and error replies built from script values.
func appendLine(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		b = append(b, c)
	}
	return b
}

// appendFloat17 formats like C's printf("%.17g"), which Redis uses for
// Lua numbers passed as command arguments and for double replies.
func appendFloat17(b []byte, f float64) []byte {
	switch {
	case math.IsInf(f, 1):
		return append(b, "inf"...)
	case math.IsInf(f, -1):
		return append(b, "-inf"...)
	case math.IsNaN(f):
		if math.Signbit(f) {
			return append(b, "-nan"...)
		}
		return append(b, "nan"...)
	case f == math.Trunc(f) && math.Abs(f) < 1e17:
		if f == 0 && math.Signbit(f) {
			return append(b, "-0"...)
		}
		return strconv.AppendInt(b, int64(f), 10)
	}
	return strconv.AppendFloat(b, f, 'g', 17, 64)
}

// luaNumberString is Lua 5.1's tostring for numbers ("%.14g").
func luaNumberString(f float64) string {
	var buf [32]byte
	return string(appendLuaNumber(buf[:0], f))
}
