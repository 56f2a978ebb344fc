package compat_test

import (
	"testing"
)

// Redis 7 keyspace commands over limiter keys. The fake clock sits at t0
// (Unix ms 1700000000000, Unix s 1700000000) and moves 1 µs per command, so
// every step below runs within that millisecond.

const (
	nowS  = "1700000000"
	nowMs = "1700000000000"
)

func TestSetOptions(t *testing.T) {
	protocols(t, func(t *testing.T, ts *testServer, send do) {
		runSteps(t, ts, send, []step{
			{c("SET k 1"), "OK"},
			{c("TTL k"), int64(-1)},
			{c("SET k 1 EX 10"), "OK"},
			{c("TTL k"), int64(10)},
			{c("PTTL k"), int64(10000)},
			{c("SET k 1 PX 1500"), "OK"},
			{c("PTTL k"), int64(1500)},
			{c("TTL k"), int64(2)}, // (1500 + 500) / 1000
			{c("SET k 1 px 1499"), "OK"},
			{c("TTL k"), int64(1)},
			{c("SET k 1 EXAT 1700000100"), "OK"},
			{c("TTL k"), int64(100)},
			{c("EXPIRETIME k"), int64(1700000100)},
			{c("PEXPIRETIME k"), int64(1700000100000)},
			{c("SET k 1 PXAT 1700000005000"), "OK"},
			{c("PTTL k"), int64(5000)},
			// KEEPTTL keeps it; a plain SET drops it.
			{c("SET k 2 KEEPTTL"), "OK"},
			{c("PTTL k"), int64(5000)},
			{c("GET k"), "2"},
			{c("SET k 3"), "OK"},
			{c("PTTL k"), int64(-1)},
			// An absolute time in the past: OK, and the key is gone.
			{c("SET gone 1 PXAT 1"), "OK"},
			{c("EXISTS gone"), int64(0)},
			{c("SET gone2 1 EXAT " + nowS), "OK"},
			{c("EXISTS gone2"), int64(0)},

			// NX / XX.
			{c("SET n 1 NX"), "OK"},
			{c("SET n 2 NX"), nil},
			{c("GET n"), "1"},
			{c("SET x 1 XX"), nil},
			{c("EXISTS x"), int64(0)},
			{c("SET n 5 XX"), "OK"},
			{c("GET n"), "5"},
			// GET returns the old value, or null.
			{c("SET n 6 GET"), "5"},
			{c("SET fresh 1 GET"), nil},
			{c("EXISTS fresh"), int64(1)},
			{c("SET n 7 NX GET"), "6"}, // not set: NX fails
			{c("GET n"), "6"},
			{c("SET x 1 XX GET"), nil},
			{c("EXISTS x"), int64(0)},
			{c("SET n 8 XX GET EX 100"), "6"},
			{c("TTL n"), int64(100)},
			// SET on a limiter key replaces its TAT.
			{c("CL.THROTTLE lim 0 1 60"), th(0, 1, 0, -1, 60)},
			{c("SET lim 0 GET"), tatAt(42*tick + 60e9)}, // set by step 41, at t0+42µs
			{c("CL.THROTTLE lim 0 1 60"), th(0, 1, 0, -1, 60)},

			// Errors, in Redis 7's order: syntax first, then the number.
			{c("SET k 1 EX 0"), errText("ERR invalid expire time in 'set' command")},
			{c("SET k 1 EX -5"), errText("ERR invalid expire time in 'set' command")},
			{c("SET k 1 PX 0"), errText("ERR invalid expire time in 'set' command")},
			{c("SET k 1 EXAT 0"), errText("ERR invalid expire time in 'set' command")},
			{c("SET k 1 PXAT -1"), errText("ERR invalid expire time in 'set' command")},
			{c("SET k 1 EX 9223372036854775807"), errText("ERR invalid expire time in 'set' command")},
			{c("SET k 1 PX 9223372036854775807"), errText("ERR invalid expire time in 'set' command")},
			{c("SET k 1 EX abc"), errText("ERR value is not an integer or out of range")},
			{c("SET k 1 EX 1.5"), errText("ERR value is not an integer or out of range")},
			{c("SET k 1 EX 10 PX 10"), errText("ERR syntax error")},
			{c("SET k 1 NX XX"), errText("ERR syntax error")},
			{c("SET k 1 KEEPTTL EX 10"), errText("ERR syntax error")},
			{c("SET k 1 EX 10 KEEPTTL"), errText("ERR syntax error")},
			{c("SET k 1 EX"), errText("ERR syntax error")},
			{c("SET k 1 FOO"), errText("ERR syntax error")},
			{c("SET k 1 EX abc PX 5"), errText("ERR syntax error")},
			{c("SET k"), errText("ERR wrong number of arguments for 'set' command")},
			{c("GET k"), "3"}, // none of the failures wrote
			// Repeating an option is not an error: the last one wins.
			{c("SET k 4 EX 10 EX 20"), "OK"},
			{c("TTL k"), int64(20)},
			{c("SET k 5 NX NX"), nil},
			{c("SET k 5 GET GET"), "4"},
		})
	})
}

func TestExpireFamily(t *testing.T) {
	protocols(t, func(t *testing.T, ts *testServer, send do) {
		runSteps(t, ts, send, []step{
			{c("EXPIRE missing 10"), int64(0)},
			{c("TTL missing"), int64(-2)},
			{c("PTTL missing"), int64(-2)},
			{c("EXPIRETIME missing"), int64(-2)},
			{c("PEXPIRETIME missing"), int64(-2)},
			{c("PERSIST missing"), int64(0)},

			{c("SET e 1"), "OK"},
			{c("EXPIRETIME e"), int64(-1)},
			{c("PEXPIRETIME e"), int64(-1)},
			{c("EXPIRE e 100"), int64(1)},
			{c("TTL e"), int64(100)},
			{c("EXPIRE e 200 NX"), int64(0)}, // has a TTL
			{c("EXPIRE e 200 XX"), int64(1)},
			{c("TTL e"), int64(200)},
			{c("EXPIRE e 100 GT"), int64(0)},
			{c("EXPIRE e 300 GT"), int64(1)},
			{c("EXPIRE e 400 LT"), int64(0)},
			{c("EXPIRE e 50 lt"), int64(1)},
			{c("TTL e"), int64(50)},
			{c("PERSIST e"), int64(1)},
			{c("PERSIST e"), int64(0)},
			{c("TTL e"), int64(-1)},
			// No TTL counts as infinite: GT never, LT always.
			{c("EXPIRE e 100 XX"), int64(0)},
			{c("EXPIRE e 100 GT"), int64(0)},
			{c("EXPIRE e 100 LT"), int64(1)},
			{c("PERSIST e"), int64(1)},
			{c("EXPIRE e 100 NX"), int64(1)},
			{c("EXPIRE e 100 XX GT"), int64(0)}, // not greater
			{c("EXPIRE e 101 XX GT"), int64(1)},

			{c("EXPIRE e 10 NX XX"), errText("ERR NX and XX, GT or LT options at the same time are not compatible")},
			{c("EXPIRE e 10 NX GT"), errText("ERR NX and XX, GT or LT options at the same time are not compatible")},
			{c("EXPIRE e 10 GT LT"), errText("ERR GT and LT options at the same time are not compatible")},
			{c("EXPIRE e 10 FOO"), errText("ERR Unsupported option FOO")},
			{c("EXPIRE e abc"), errText("ERR value is not an integer or out of range")},
			{c("EXPIRE e abc FOO"), errText("ERR Unsupported option FOO")}, // options first
			{c("EXPIRE e"), errText("ERR wrong number of arguments for 'expire' command")},
			{c("EXPIRE e 9223372036854775807"), errText("ERR invalid expire time in 'expire' command")},
			{c("PEXPIRE e 9223372036854775807"), errText("ERR invalid expire time in 'pexpire' command")},
			{c("TTL e"), int64(101)},

			// PEXPIRE / EXPIREAT / PEXPIREAT.
			{c("PEXPIRE e 1500"), int64(1)},
			{c("PTTL e"), int64(1500)},
			{c("EXPIREAT e 1700000100"), int64(1)},
			{c("TTL e"), int64(100)},
			{c("EXPIRETIME e"), int64(1700000100)},
			{c("PEXPIREAT e 1700000100500"), int64(1)},
			{c("PEXPIRETIME e"), int64(1700000100500)},
			{c("EXPIRETIME e"), int64(1700000101)}, // rounded, as TTL is
			{c("PEXPIREAT e 1700000100400 LT"), int64(1)},
			{c("EXPIRETIME e"), int64(1700000100)},

			// A time not in the future deletes the key (and counts as set).
			{c("EXPIRE e -1"), int64(1)},
			{c("EXISTS e"), int64(0)},
			{c("SET e 1"), "OK"},
			{c("PEXPIREAT e " + nowMs), int64(1)},
			{c("EXISTS e"), int64(0)},
			{c("SET e 1"), "OK"},
			{c("EXPIREAT e 1"), int64(1)},
			{c("EXISTS e"), int64(0)},

			// On a limiter key: a shorter TTL makes the key vanish early
			// (a fresh bucket), PERSIST keeps the TAT forever.
			{c("CL.THROTTLE lim 0 1 60"), th(0, 1, 0, -1, 60)},
			{c("CL.THROTTLE lim 0 1 60"), th(1, 1, 0, 60, 60)},
			{c("PERSIST lim"), int64(1)},
			{c("PTTL lim"), int64(-1)},
			{c("PEXPIRE lim 1"), int64(1)},
			advance(2e6),
			{c("CL.THROTTLE lim 0 1 60"), th(0, 1, 0, -1, 60)},
		})
	})
}

func TestDelExistsStrlenSelect(t *testing.T) {
	protocols(t, func(t *testing.T, ts *testServer, send do) {
		runSteps(t, ts, send, []step{
			{c("SET a 1"), "OK"},
			{c("SET b 12345"), "OK"},
			{c("EXISTS a a a b c"), int64(4)}, // duplicates counted
			{c("EXISTS c"), int64(0)},
			{c("STRLEN b"), int64(5)},
			{c("STRLEN c"), int64(0)},
			{c("SET z 007"), "OK"},
			{c("GET z"), "007"}, // kept verbatim
			{c("STRLEN z"), int64(3)},
			{c("DEL a a c"), int64(1)},
			{c("UNLINK b b z"), int64(2)},
			{c("EXISTS a b z"), int64(0)},
			{c("DEL a"), int64(0)},
			{c("DEL"), errText("ERR wrong number of arguments for 'del' command")},
			{c("EXISTS"), errText("ERR wrong number of arguments for 'exists' command")},
			{c("TYPE nothing"), "none"},
			{c("GET nothing"), nil},

			{c("SELECT 0"), "OK"},
			{c("SELECT 1"), "OK"}, // 16 databases (databases_test.go)
			{c("SELECT 15"), "OK"},
			{c("SELECT 16"), errText("ERR DB index is out of range")},
			{c("SELECT -1"), errText("ERR DB index is out of range")},
			{c("SELECT abc"), errText("ERR value is not an integer or out of range")},
			{c("SELECT 0"), "OK"},
		})
	})
}
