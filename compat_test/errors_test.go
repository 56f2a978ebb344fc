package compat_test

import (
	"strings"
	"testing"
)

// Every error text of spec sections 2 and 7, verbatim, through go-redis
// (RESP3 and RESP2). Cell errors carry no "ERR" prefix.

const (
	usage    = errText("Cell error: Store error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]")
	parse    = "Cell error: Store error: Couldn't parse as integer: "
	zeroRate = errText("Cell error: Store error: Zero rates are not supported")
	expire   = errText("Cell error: Store error: Error while setting key expire")
	badValue = errText("Cell error: Store error: invalid stored value")
)

// parseErr is the parse error naming arg as echoed.
func parseErr(arg string) errText { return errText(parse + arg) }

func TestErrorUsage(t *testing.T) {
	protocols(t, func(t *testing.T, ts *testServer, send do) {
		runSteps(t, ts, send, []step{
			{c("CL.THROTTLE"), usage},
			{c("CL.THROTTLE k"), usage},
			{c("CL.THROTTLE k 15"), usage},
			{c("CL.THROTTLE k 15 30"), usage},                // 3 args
			{c("CL.THROTTLE k 15 30 60 1 1"), usage},         // 6 args
			{c("cl.throttle k 15 30 60 1 1 1 1 1 1"), usage}, // 10 args
			{c("Cl.Throttle k 15 30"), usage},                // always lower-case in the text
			// The arity check comes first.
			{c("CL.THROTTLE k x x x x x"), usage},
			{c("CL.THROTTLE k x x"), usage},
			{c("EXISTS k"), int64(0)},
		})
	})
}

func TestErrorParse(t *testing.T) {
	protocols(t, func(t *testing.T, ts *testServer, send do) {
		runSteps(t, ts, send, []step{
			// Valid integer spellings (strconv.ParseInt base 10).
			{c("CL.THROTTLE p1 +15 30 60"), th(0, 16, 15, -1, 2)},
			{c("CL.THROTTLE p2 0015 +30 0060 +1"), th(0, 16, 15, -1, 2)},
			{c("CL.THROTTLE p3 15 30 60 -0"), th(0, 16, 16, -1, 0)},
			// Extreme but valid: limit MaxInt64, and DVT = 2e9 × MaxInt64
			// wraps to −2e9, so even a peek is denied.
			{c("CL.THROTTLE p4 9223372036854775806 30 60 0"), th(1, 9223372036854775807, 0, -1, 0)},
			// MinInt64: limit MinInt64+1, DVT = 2e9 × (MinInt64+1) wraps to
			// 2e9: one request fits.
			{c("CL.THROTTLE p5 -9223372036854775808 30 60"), th(0, -9223372036854775807, 0, -1, 2)},

			// Invalid ones are echoed as sent.
			{[]any{"CL.THROTTLE", "k", " 15", "30", "60"}, parseErr(" 15")},
			{[]any{"CL.THROTTLE", "k", "15 ", "30", "60"}, parseErr("15 ")},
			{c("CL.THROTTLE k 1.5 30 60"), parseErr("1.5")},
			{c("CL.THROTTLE k 15.0 30 60"), parseErr("15.0")},
			{c("CL.THROTTLE k 1e3 30 60"), parseErr("1e3")},
			{c("CL.THROTTLE k 0x0f 30 60"), parseErr("0x0f")},
			{c("CL.THROTTLE k 1_5 30 60"), parseErr("1_5")},
			{c("CL.THROTTLE k + 30 60"), parseErr("+")},
			{c("CL.THROTTLE k - 30 60"), parseErr("-")},
			{c("CL.THROTTLE k ++1 30 60"), parseErr("++1")},
			{c("CL.THROTTLE k 9223372036854775808 30 60"), parseErr("9223372036854775808")},
			{c("CL.THROTTLE k -9223372036854775809 30 60"), parseErr("-9223372036854775809")},
			{c("CL.THROTTLE k 99999999999999999999 30 60"), parseErr("99999999999999999999")},
			{c("CL.THROTTLE k abc 30 60"), parseErr("abc")},
			{[]any{"CL.THROTTLE", "k", "\xff", "30", "60"}, parseErr("\xff")},
			// The empty argument echoes nothing after "integer: ".
			{[]any{"CL.THROTTLE", "k", "", "30", "60"}, parseErr("")},
			{[]any{"CL.THROTTLE", "k", "15", "30", "60", ""}, parseErr("")},

			// CR/LF inside become spaces, trailing ones are dropped, a NUL
			// cuts the text.
			{[]any{"CL.THROTTLE", "k", "1\r\n5", "30", "60"}, parseErr("1  5")},
			{[]any{"CL.THROTTLE", "k", "1\n5", "30", "60"}, parseErr("1 5")},
			{[]any{"CL.THROTTLE", "k", "1\r5", "30", "60"}, parseErr("1 5")},
			{[]any{"CL.THROTTLE", "k", "15\r\n", "30", "60"}, parseErr("15")},
			{[]any{"CL.THROTTLE", "k", "15\n\n\r", "30", "60"}, parseErr("15")},
			{[]any{"CL.THROTTLE", "k", "\r\n15", "30", "60"}, parseErr("  15")},
			{[]any{"CL.THROTTLE", "k", "1\x005", "30", "60"}, parseErr("1")},
			{[]any{"CL.THROTTLE", "k", "\x0015", "30", "60"}, parseErr("")},
			{[]any{"CL.THROTTLE", "k", "a\r\nb\x00c\r\n", "30", "60"}, parseErr("a  b")},

			// Order: max_burst, count, period, quantity; the first bad one
			// is named.
			{c("CL.THROTTLE k a b c d"), parseErr("a")},
			{c("CL.THROTTLE k 15 b c d"), parseErr("b")},
			{c("CL.THROTTLE k 15 30 c d"), parseErr("c")},
			{c("CL.THROTTLE k 15 30 60 d"), parseErr("d")},
			// A parse error comes before the zero-rate check.
			{c("CL.THROTTLE k 15 0 60 x"), parseErr("x")},
			{c("CL.THROTTLE k 15 0 y"), parseErr("y")},
			{c("EXISTS k"), int64(0)},
		})
	})
}

func TestErrorZeroRate(t *testing.T) {
	protocols(t, func(t *testing.T, ts *testServer, send do) {
		runSteps(t, ts, send, []step{
			{c("CL.THROTTLE k 15 0 60"), zeroRate},
			{c("CL.THROTTLE k 15 30 0"), zeroRate},
			{c("CL.THROTTLE k 15 0 0"), zeroRate},
			{c("CL.THROTTLE k 15 2000000000 1"), zeroRate}, // EI < 1 ns
			{c("CL.THROTTLE k 15 0 60 5"), zeroRate},
			{c("EXISTS k"), int64(0)},
			// One request per ns is not zero: 1e9 per 1 s → EI 1 ns. Its
			// remaining divides whole µs by trunc(EI/1000) = 0: 0/0 → 0 ...
			{c("CL.THROTTLE k 15 1000000000 1"), th(0, 16, 0, -1, 0)},
			// ... and 2 µs/0 → +Inf → MaxInt64.
			{c("CL.THROTTLE k2 2000 1000000000 1"), th(0, 2001, 9223372036854775807, -1, 0)},
		})
	})
}

func TestErrorUnknownCommand(t *testing.T) {
	protocols(t, func(t *testing.T, ts *testServer, send do) {
		runSteps(t, ts, send, []step{
			{c("foo a b"), errText("ERR unknown command 'foo', with args beginning with: 'a' 'b' ")},
			{c("foo"), errText("ERR unknown command 'foo', with args beginning with: ")},
			{c("FOO Bar"), errText("ERR unknown command 'FOO', with args beginning with: 'Bar' ")},
			{c("CL.THROTTLEX k 1 1 1"), errText("ERR unknown command 'CL.THROTTLEX', with args beginning with: 'k' '1' '1' '1' ")},
			// Arguments are quoted as C strings (cut at NUL), CR/LF become
			// spaces, and only the first 128 bytes of argument text are shown.
			{[]any{"foo", "a\r\nb", "c\x00d"}, errText("ERR unknown command 'foo', with args beginning with: 'a  b' 'c' ")},
			{[]any{"foo", strings.Repeat("x", 200), "y"}, errText("ERR unknown command 'foo', with args beginning with: '" + strings.Repeat("x", 128) + "' ")},
			{[]any{"foo", "aaaaaaaaaa", strings.Repeat("y", 200), "z"}, errText("ERR unknown command 'foo', with args beginning with: 'aaaaaaaaaa' '" + strings.Repeat("y", 115) + "' ")},
			{[]any{strings.Repeat("n", 200)}, errText("ERR unknown command '" + strings.Repeat("n", 128) + "', with args beginning with: ")},
			{c("PING"), "PONG"}, // the connection survives
		})
	})
}

func TestErrorInvalidStoredValue(t *testing.T) {
	protocols(t, func(t *testing.T, ts *testServer, send do) {
		// A restored value, and strings SET stores (any bytes, issue 23):
		// CL.THROTTLE reads none of them as a TAT (spec section 7).
		ts.Store.Load([]byte("bad"), []byte("abc"), 0)
		runSteps(t, ts, send, []step{
			{c("SET other abc"), "OK"},
			{c("CL.THROTTLE other 15 30 60"), badValue},
			{c("SET other -5"), "OK"},
			{c("CL.THROTTLE other 15 30 60"), badValue},
			{c("SET other 18446744073709551616"), "OK"},
			{c("CL.THROTTLE other 15 30 60"), badValue},
			{c("SET other 1.5"), "OK"},
			{c("CL.THROTTLE other 15 30 60"), badValue},
			{c("SET other ''"), "OK"},
			{c("GET other"), "''"},
			{c("INCRBY other -7"), errText("ERR value is not an integer or out of range")},
			{c("DECRBY neg 7"), int64(-7)},
			{c("CL.THROTTLE neg 15 30 60"), badValue},
			{c("GET neg"), "-7"},
			{c("CL.THROTTLE bad 15 30 60"), badValue},
			{c("CL.THROTTLE bad 15 30 60 0"), badValue},
			// Nothing written.
			{c("GET bad"), "abc"},
			{c("TYPE bad"), "string"},
			{c("STRLEN bad"), int64(3)},
			{c("PTTL bad"), int64(-1)},
			// Checks before the lookup still win.
			{c("CL.THROTTLE bad 15 30"), usage},
			{c("CL.THROTTLE bad x 30 60"), parseErr("x")},
			{c("CL.THROTTLE bad 15 0 60"), zeroRate},
			// Overwriting with SET repairs it.
			{c("SET bad 0"), "OK"},
			{c("CL.THROTTLE bad 15 30 60"), th(0, 16, 15, -1, 2)},
		})
	})
}
