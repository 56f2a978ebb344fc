package script

import (
	"fmt"
	"math"
	"strings"
	"testing"
)

// Unit tests of the Lua 5.1 dialect (lua51*.go). The expected values are
// what Redis 7.0.15's Lua answers (compat_test's TestLuaDialectMatchesRedis
// checks the same behaviour differentially against a real redis-server).

func TestStr2Number(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		in   string
		want float64
		ok   bool
	}{
		{"1e2", 100, true}, {"-1e-2", -0.01, true}, {" 0x10 ", 16, true}, {"010", 10, true},
		{"inf", math.Inf(1), true}, {"-INFINITY", math.Inf(-1), true}, {"nan", nan, true},
		{"nan(12)", nan, true}, {"0x1p4", 16, true}, {"0x1.8", 1.5, true}, {"0X.8", 0.5, true},
		{"1e400", math.Inf(1), true}, {".5", 0.5, true}, {"5.", 5, true}, {"+5", 5, true},
		{"\t\v\f\r\n5\t\v\f\r\n", 5, true}, {"10\x00abc", 10, true}, {"1e+05", 1e5, true},
		{".", 0, false}, {"1e", 0, false}, {"1e+", 0, false}, {"0b101", 0, false},
		{"1_000", 0, false}, {"infinit", 0, false}, {"", 0, false}, {" ", 0, false},
		{"0x", 0, false}, {"1e5x", 0, false}, {"- 1", 0, false}, {"--1", 0, false},
		{"1 2", 0, false}, {"0x1g", 0, false}, {"nan(", 0, false},
	} {
		got, ok := str2number(tc.in)
		if ok != tc.ok || (ok && !(got == tc.want || got != got && tc.want != tc.want)) {
			t.Errorf("str2number(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
	for in, want := range map[string]float64{"7": 7, "-42": -42, "123456789012345": 123456789012345, "1234567890123456": 1234567890123456} {
		if got, ok := str2number(in); !ok || got != want {
			t.Errorf("str2number(%q) = %v, %v", in, got, ok)
		}
	}
	for _, in := range []string{"-", "1-", "12a"} {
		if _, ok := str2number(in); ok {
			t.Errorf("str2number(%q) accepted", in)
		}
	}
	if f, ok := str2number("-0"); !ok || f != 0 || !math.Signbit(f) {
		t.Errorf("str2number(-0) = %v, %v; want -0", f, ok)
	}
	if f, _ := str2number("-nan"); f == f || !math.Signbit(f) {
		t.Errorf("str2number(-nan) = %v, want a NaN with the sign bit (glibc prints -nan)", f)
	}
}

func TestStrtoul(t *testing.T) {
	for _, tc := range []struct {
		in   string
		base int
		want uint64
		ok   bool
	}{
		{"ff", 16, 255, true}, {"0xff", 16, 255, true}, {" 11 ", 2, 3, true}, {"zz", 36, 1295, true},
		{"-ff", 16, math.MaxUint64 - 254, true}, {"99999999999999999999", 16, math.MaxUint64, true},
		{"8", 8, 0, false}, {"1.5", 16, 0, false}, {"", 16, 0, false}, {"0x", 16, 0, false},
	} {
		got, ok := strtoul(tc.in, tc.base)
		if got != tc.want || ok != tc.ok {
			t.Errorf("strtoul(%q, %d) = %d, %v; want %d, %v", tc.in, tc.base, got, ok, tc.want, tc.ok)
		}
	}
}

func TestLuaNumberFormat(t *testing.T) {
	negNaN := math.Copysign(math.NaN(), -1)
	for _, tc := range []struct {
		in   float64
		want string
	}{
		{1e15, "1e+15"}, {0.1, "0.1"}, {1.0 / 3, "0.33333333333333"}, {math.Copysign(0, -1), "-0"},
		{math.Inf(1), "inf"}, {math.Inf(-1), "-inf"}, {math.NaN(), "nan"}, {negNaN, "-nan"},
		{1e14, "1e+14"}, {99999999999999, "99999999999999"}, {123456789012345, "1.2345678901234e+14"},
		{1 << 53, "9.007199254741e+15"}, {-1e-5, "-1e-05"}, {0.1 + 0.2, "0.3"}, {1e-4, "0.0001"},
		{100, "100"}, {-7, "-7"},
	} {
		if got := luaNumberString(tc.in); got != tc.want {
			t.Errorf("luaNumberString(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestCConversions(t *testing.T) {
	if got := cInt64(math.NaN()); got != math.MinInt64 {
		t.Errorf("cInt64(NaN) = %d", got)
	}
	if got := cInt64(1 << 63); got != math.MinInt64 {
		t.Errorf("cInt64(2^63) = %d", got)
	}
	if got := cInt64(-7.9); got != -7 {
		t.Errorf("cInt64(-7.9) = %d", got)
	}
	for in, want := range map[float64]uint64{-1: math.MaxUint64, -1.5: math.MaxUint64, 1 << 64: 0, 1e19: 0x8ac7230489e80000, 3: 3} {
		if got := cUint64(in); got != want {
			t.Errorf("cUint64(%v) = %#x, want %#x", in, got, want)
		}
	}
	if got := cUint64(math.NaN()); got != 1<<63 {
		t.Errorf("cUint64(NaN) = %#x", got)
	}
	if got := cInt(1e12); got != -727379968 {
		t.Errorf("cInt(1e12) = %d", got)
	}
}

func TestRand48(t *testing.T) {
	r := newRand48()
	// Redis's first math.random() after start, and after randomseed(7).
	if got := float64(r.next()%rand48Max) / rand48Max; luaNumberString(got) != "0.39646477363839" {
		t.Errorf("first random = %v", got)
	}
	r.seed(7)
	if got := float64(r.next()%rand48Max) / rand48Max; luaNumberString(got) != "0.26644419658298" {
		t.Errorf("random after seed 7 = %v", got)
	}
}

func TestLua51Library(t *testing.T) {
	e, _ := newTestEngine(t)
	bulk := func(s string) string { return "$" + itoa(len(s)) + "\r\n" + s + "\r\n" }
	errReply := func(line, msg string) string {
		return "-ERR user_script:" + line + ": " + msg + " script: SHA, on @user_script:" + line + ".\r\n"
	}
	runEvalCases(t, e, Options{}, []evalCase{
		{body: "return string.rep('x', ARGV[1])", args: []string{"3"}, want: bulk("xxx")},
		{body: "return string.rep('x', 'abc')", want: errReply("1", "bad argument #2 to 'rep' (number expected, got string)")},
		{body: "return string.rep()", want: errReply("1", "bad argument #1 to 'rep' (string expected, got no value)")},
		{body: "local r = string.rep return r('x', {})", want: errReply("1", "bad argument #2 to 'r' (number expected, got table)")},
		{body: "return string.sub('hello', ARGV[1])", args: []string{"2"}, want: bulk("ello")},
		{body: "return string.byte('A', '1')", want: ":65\r\n"},
		{body: "return string.char('72', 105)", want: bulk("Hi")},
		{body: "return string.char(256)", want: errReply("1", "bad argument #1 to 'char' (invalid value)")},
		{body: "return string.upper('a\xc3\xa9')", want: bulk("A\xc3\xa9")},
		{body: "return string.lower('\xc3\x80B')", want: bulk("\xc3\x80b")},
		{body: "return string.format('%x', '3')", want: bulk("3")},
		{body: "return string.format('%.2f', '3')", want: bulk("3.00")},
		{body: "return string.format('%5.1f|%-6g|%06.2f', 0/0, 1/0, -1/0)", want: bulk(" -nan|inf   |  -inf")},
		{body: "return string.format('%#x|%#o|%#g|%#.3x|%.0d|%.3d', 255, 8, 1.5, 1, 0, 7)", want: bulk("0xff|010|1.50000|0x001||007")},
		{body: "return string.format('%g|%g|%.3g|%#.0e', 1e-5, 123456789, 1234567, 5)", want: bulk("1e-05|1.23457e+08|1.23e+06|5.e+00")},
		{body: "return string.format('%q', 'a\\nb\"\\0')", want: bulk("\"a\\\nb\\\"\\000\"")},
		{body: "return string.format('%y', 1)", want: errReply("1", "invalid option '%y' to 'format'")},
		{body: "return string.format('%d')", want: errReply("1", "bad argument #2 to 'format' (no value)")},
		{body: "return tostring(tonumber('1e2'))", want: bulk("100")},
		{body: "return tostring(tonumber(' 0x10 '))", want: bulk("16")},
		{body: "return tostring(tonumber('inf'))", want: bulk("inf")},
		{body: "return tostring(tonumber('-ff', 16))", want: bulk("1.844674407371e+19")},
		{body: "return tostring(1e15)", want: bulk("1e+15")},
		{body: "return tostring(1/3)", want: bulk("0.33333333333333")},
		{body: "return tostring(-0)", want: bulk("-0")},
		{body: "return tostring(math.huge)", want: bulk("inf")},
		{body: "return select(ARGV[1], 'a', 'b')", args: []string{"2"}, want: bulk("b")},
		{body: "return select('#', 1, 2)", want: ":2\r\n"},
		{body: "return table.concat({1, 2.5, 1e15}, ',')", want: bulk("1,2.5,1e+15")},
		{body: "return unpack({'a', 'b'}, '2')", want: bulk("b")},
		{body: "return unpack({}, 1, 1e6)", want: errReply("1", "too many results to unpack")},
		{body: "math.randomseed(ARGV[1]) return tostring(math.random())", args: []string{"7"}, want: bulk("0.26644419658298")},
		{body: "return math.floor('x')", want: errReply("1", "bad argument #1 to 'floor' (number expected, got string)")},
		{body: "return {string.gsub('abc', '(b)', '[%1%%]')}", want: "*2\r\n" + bulk("a[b%]c") + ":1\r\n"},
		{body: "local t = {} for w in string.gmatch('a b', '%a') do t[#t+1] = w end return t", want: "*2\r\n" + bulk("a") + bulk("b")},
		{body: "local n = 0 for i, v in ipairs({5, 6}) do n = n + i * v end for k, v in pairs({x = 1}) do n = n + v end return n", want: ":18\r\n"},
		{body: "return pairs()", want: errReply("1", "bad argument #1 to 'pairs' (table expected, got no value)")},
	})
}

func TestLua51Concat(t *testing.T) {
	e, _ := newTestEngine(t)
	bulk := func(s string) string { return "$" + itoa(len(s)) + "\r\n" + s + "\r\n" }
	errReply := func(line, msg string) string {
		return "-ERR user_script:" + line + ": " + msg + " script: SHA, on @user_script:" + line + ".\r\n"
	}
	runEvalCases(t, e, Options{}, []evalCase{
		{body: "return 'a' .. 1e15", want: bulk("a1e+15")},
		{body: "return 1e15 .. 'a' .. 1/3", want: bulk("1e+15a0.33333333333333")},
		{body: "local n = 1/3 return 'v=' .. n .. '!'", want: bulk("v=0.33333333333333!")},
		{body: "return ARGV[1] .. -0", args: []string{"x"}, want: bulk("x-0")},
		{body: "return tostring(010)", want: bulk("10")},
		{body: "local x\nreturn 'a' ..\nx", want: errReply("2", "attempt to concatenate local 'x' (a nil value)")},
		{body: "return ARGV[3] .. 'a'", want: errReply("1", "attempt to concatenate field '?' (a nil value)")},
		{body: "local t = {} return t.k .. 'a'", want: errReply("1", "attempt to concatenate field 'k' (a nil value)")},
		{body: "return KEYS .. 'a'", want: errReply("1", "attempt to concatenate global 'KEYS' (a table value)")},
		{body: "local u return (function() return u .. 'a' end)()", want: errReply("1", "attempt to concatenate upvalue 'u' (a nil value)")},
		{body: "return {} .. 'a'", want: errReply("1", "attempt to concatenate a table value")},
		{body: "local t = setmetatable({}, {__concat = function(a, b) return type(a) .. type(b) end}) return 1 .. t .. 2 .. 3",
			want: bulk("1tablestring")}, // 2 .. 3 first, then t .. "23", then 1 .. that
	})
	// A script spelling the placeholder prefix is compiled unchanged.
	body := "return '" + strings.ReplaceAll(concatMarker, "\x00", "\\0") + "0' .. KEYS[1]"
	got, err := e.Eval(nil, []byte(body), strs("k"), nil, Options{})
	if want := bulk(concatMarker + "0k"); err != nil || string(got) != want {
		t.Errorf("%q: got %q, %v; want %q", body, got, err, want)
	}
}

func TestLua51ErrorAndLoadString(t *testing.T) {
	e, _ := newTestEngine(t)
	bulk := func(s string) string { return "$" + itoa(len(s)) + "\r\n" + s + "\r\n" }
	runEvalCases(t, e, Options{}, []evalCase{
		{body: "error(1/3)", want: "-ERR user_script:1: 0.33333333333333 script: SHA, on @user_script:1.\r\n"},
		{body: "local function f()\nerror(7, 2)\nend\nf()", want: "-ERR user_script:4: 7 script: SHA, on @user_script:2.\r\n"},
		{body: "return select(2, pcall(error, 5))", want: bulk("5")},
		{body: "return loadstring('return 010 .. 1e15')()", want: bulk("101e+15")},
		{body: "return loadstring('return print')()",
			want: "-ERR <string>:1: Script attempted to access nonexistent global variable 'print' script: SHA, on <string>:1.\r\n"},
		{body: "return loadstring('x = 1')()", want: "-ERR <string>:1: Attempt to modify a readonly table script: SHA, on <string>:1.\r\n"},
		{body: "return select(2, loadstring('x ='))", want: bulk("<string>:1: syntax error near '<eof>'")},
		{body: "local parts = {'return 010 ', '.. 1e15'} local i = 0 return load(function() i = i + 1 return parts[i] end)()", want: bulk("101e+15")},
	})
}

func TestLua51StringArithmeticAndFor(t *testing.T) {
	e, _ := newTestEngine(t)
	errReply := func(msg string) string {
		return "-ERR user_script:1: " + msg + " script: SHA, on @user_script:1.\r\n"
	}
	runEvalCases(t, e, Options{}, []evalCase{
		{body: "return '010' + 0", want: ":10\r\n"},
		{body: "return -'010'", want: ":-10\r\n"},
		{body: "return ARGV[1] * 2", args: []string{"21"}, want: ":42\r\n"},
		{body: "return '-5' % 3", want: ":1\r\n"},
		{body: "return '1_0' + 0", want: errReply("attempt to perform arithmetic on a string value")},
		{body: "local t = setmetatable({}, {__add = function() return 7 end}) return '1' + t", want: ":7\r\n"},
		{body: "local n = 0 for i = 1, ARGV[1] do n = n + 1 end return n", args: []string{"3"}, want: ":3\r\n"},
		{body: "for i = 1, 'x' do end", want: errReply("'for' limit must be a number")},
		{body: "for i = nil, 1 do end", want: errReply("'for' initial value must be a number")},
	})
}

// TestLua51Concurrent runs a script using the shared concatenation and for
// functions (compiled constants every pooled state calls) from several
// goroutines at once; -race checks that they share nothing mutable.
func TestLua51Concurrent(t *testing.T) {
	e, _ := newTestEngine(t)
	body := []byte("local s = '' for i = 1, ARGV[1] do s = s .. i / 2 .. ',' end return s .. ('010' + 0)")
	want := "$18\r\n0.5,1,1.5,2,2.5,10\r\n"
	done := make(chan struct{})
	for g := 0; g < 6; g++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := 0; i < 100; i++ {
				got, err := e.Eval(nil, body, nil, strs("5"), Options{})
				if err != nil || string(got) != want {
					t.Errorf("got %q %v, want %q", got, err, want)
					return
				}
			}
		}()
	}
	for g := 0; g < 6; g++ {
		<-done
	}
}

// The pattern matcher is Lua 5.1's (lua51match.go), not gopher-lua's: %f
// frontiers match where Lua's do, a malformed part the match never reaches
// is no error, %1 after a position capture never matches, gmatch finds
// each match lazily, and errors read as Lua's. Expected values are Redis
// 7.0.15's answers.
func TestLua51PatternMatcher(t *testing.T) {
	e, _ := newTestEngine(t)
	const show = "local function show(...) local t = {} for i = 1, select('#', ...) do t[i] = tostring((select(i, ...))) end return table.concat(t, ' ') end " +
		"local ok, r = pcall(function() return show(%s) end) if ok then return r end return 'error: ' .. r"
	var cases []evalCase
	for _, c := range []struct{ expr, want string }{
		{"string.find('THE (quick) fox', '%f[%a]%a+')", "1 3"},
		{"string.find('THE (quick) fox', '%f[%a]%a+', 5)", "6 10"},
		{"string.gsub('THE (quick) fox', '%f[%a]%a+', 'W')", "W (W) W 3"},
		{"string.gsub('hello world', '%f[%w]%w+', '<%0>')", "<hello> <world> 2"},
		{"string.find('x', '%f[%z]')", "2 1"},
		{"string.match('bbb', 'a)')", "nil"},
		{"string.match('bbb', 'a(')", "nil"},
		{"string.gsub('bbb', 'a[', 'x')", "bbb 0"},
		{"string.match('ab', '()a%1')", "nil"},
		{"string.find('a+b', '%')", "error: user_script:1: malformed pattern (ends with '%')"},
		{"string.find('a+b', '[a')", "error: user_script:1: malformed pattern (missing ']')"},
		{"string.find('a+b', '(')", "error: user_script:1: unfinished capture"},
		{"string.find('a+b', '%fa')", "error: user_script:1: missing '[' after '%f' in pattern"},
		{"string.find('a+b', '%b')", "error: user_script:1: unbalanced pattern"},
		{"string.gsub('abc', 'b', '%2')", "error: user_script:1: invalid capture index"},
		{"string.gsub('abc', '(b)', '[%1%0]')", "a[bb]c 1"},
		{"string.match('user:42:api', '^(%a+):(%d+):(%a+)$')", "user 42 api"},
		{"string.match('  trim  ', '^%s*(.-)%s*$')", "trim"},
		{"string.find('a.b', '.', 1, true)", "2 2"},
		{"string.gsub('hello', '', '-')", "-h-e-l-l-o- 6"},
		{"string.gsub('hello', '^h?', 'x')", "xello 1"},
		{"string.gsub('a,b,,c', ',', ';', 2)", "a;b;,c 2"},
		{"string.gsub('abc', '%w', {a = 'A', b = true})", "error: user_script:1: invalid replacement value (a boolean)"},
		{"string.gsub('abc', '()', '%1')", "1a2b3c4 4"},
	} {
		cases = append(cases, evalCase{body: fmt.Sprintf(show, c.expr), want: fmt.Sprintf("$%d\r\n%s\r\n", len(c.want), c.want)})
	}
	for _, c := range []struct{ body, want string }{
		{"local t = {} for k, v in string.gmatch('k1=v1;k2=v2', '(%w+)=(%w+)') do t[#t+1] = k .. ':' .. v end return table.concat(t, ',')", "k1:v1,k2:v2"},
		{"local t = {} for p in string.gmatch('abc', '()') do t[#t+1] = p end return table.concat(t, ',')", "1,2,3,4"},
		{"local f = string.gmatch('aXbX', '(%w)X') return (f() or '') .. (f() or '') .. tostring(f() == nil)", "abtrue"},
		{"local t = {} for w in string.gmatch('^a^b', '^.') do t[#t+1] = w end return table.concat(t, ',')", "^a,^b"},
		{"local n = 0 for w in string.gmatch('bbb', 'a)') do n = n + 1 end return tostring(n)", "0"},
	} {
		cases = append(cases, evalCase{body: c.body, want: fmt.Sprintf("$%d\r\n%s\r\n", len(c.want), c.want)})
	}
	runEvalCases(t, e, Options{}, cases)
}
