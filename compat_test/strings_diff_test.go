package compat_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// Issue 23: strings and counters, each transcript run side by side against
// a real redis-server (redisdiff_test.go) and compared byte for byte.

func TestRedisDiffStringsBasic(t *testing.T) {
	diffRun(t, []dstep{
		dw("SET k hello", "+OK\r\n"),
		dw("GET k", "$5\r\nhello\r\n"),
		{cmd: []string{"SET", "bin", "a\x00b\r\n\xff"}, want: "+OK\r\n"},
		{cmd: []string{"GET", "bin"}, want: "$6\r\na\x00b\r\n\xff\r\n"},
		dw("STRLEN bin", ":6\r\n"),
		{cmd: []string{"SET", "empty", ""}},
		d("GET empty"),
		d("STRLEN empty"),
		d("EXISTS empty"),
		d("SET k v NX"),
		d("SET k v XX GET"),
		d("SET n1 v NX GET"),
		d("SET k v2 GET"),
		d("SET k v EX 10 PX 10"),
		d("SET k v KEEPTTL EX 10"),
		d("SET k v EX 0"),
		d("SET k v EX -1"),
		d("SET k v EX x"),
		d("SET k v PX 9223372036854775807"),
		d("SET k v EX 9223372036854775807"),
		d("SET k v EXAT 1"),
		d("GET k"),
		d("SET k v EX 100"),
		d("SET k w KEEPTTL"),
		d("TTL k"),
		d("SET k w"),
		d("TTL k"),
		d("SET k v FOO"),
		d("SETNX k x"),
		d("SETNX fresh x"),
		d("SETEX k 0 x"),
		d("SETEX k x x"),
		d("SETEX k 100 x"),
		d("TTL k"),
		d("PSETEX k 100000 y"),
		{cmd: []string{"PTTL", "k"}, norm: within(99000, 100000)},
		d("GETSET k z"),
		d("TTL k"),
		d("GETSET nokey z"),
		d("GETDEL k"),
		d("GETDEL k"),
		d("EXISTS k"),
		d("SET k v"),
		d("GETEX k"),
		d("GETEX k EX 100"),
		d("TTL k"),
		d("GETEX k PERSIST"),
		d("TTL k"),
		d("GETEX k EX 10 PERSIST"),
		d("GETEX k NX"),
		d("GETEX k PX 0"),
		d("GETEX k EXAT 1"),
		d("EXISTS k"),
		d("GETEX missing EX 10"),
		d("GETEX missing EX -1"),
		d("GETEX missing EX x"),
		d("GETEX missing FOO"),
		d("SET k v"),
		d("GETEX k EX -1"),
		d("GETEX k EX x"),
		d("GETEX k PXAT 9223372036854775807"),
		d("GETEX k EX 9223372036854775807"),
		d("MSET a 1 b 2 c 3"),
		d("MGET a b c nokey"),
		d("MSET a 1 b"),
		d("MSETNX a 5 z 6"),
		d("MSETNX y 5 z 6"),
		d("MGET y z a"),
		d("MSET a x a y"),
		d("GET a"),
	})
}

// within normalises an integer reply in [lo, hi] (a TTL that time may
// have shortened by a few ms) to ":ok".
func within(lo, hi int64) func(string) string {
	return func(r string) string {
		var n int64
		if _, err := fmt.Sscanf(r, ":%d\r\n", &n); err == nil && n >= lo && n <= hi {
			return ":ok"
		}
		return r
	}
}

func TestRedisDiffStringsRanges(t *testing.T) {
	diffRun(t, []dstep{
		d("APPEND k hello"),
		d("APPEND k ' world'"),
		d("GET k"),
		d("SET n 123"),
		d("APPEND n 4"),
		d("GET n"),
		d("INCR n"),
		d("GETRANGE k 0 3"),
		d("GETRANGE k -3 -1"),
		d("GETRANGE k 0 -1"),
		d("GETRANGE k -1 -5"),
		d("GETRANGE k 5 3"),
		d("GETRANGE k -100 100"),
		d("GETRANGE k 100 200"),
		d("GETRANGE nokey 0 -1"),
		d("GETRANGE k x 1"),
		d("GETRANGE n 1 2"),
		d("SUBSTR k 0 2"),
		d("SETRANGE k 6 WORLD"),
		d("GET k"),
		d("SETRANGE k 20 tail"),
		d("GET k"),
		d("SETRANGE k -1 x"),
		d("SETRANGE k x x"),
		{cmd: []string{"SETRANGE", "k", "1", ""}},
		{cmd: []string{"SETRANGE", "new", "5", ""}},
		d("EXISTS new"),
		d("SETRANGE new 2 ab"),
		d("GET new"),
		d("SETRANGE k 536870912 x"),
		d("SETRANGE k 9223372036854775807 x"),
		d("SETRANGE n 0 9"),
		d("GET n"),
		d("STRLEN nokey"),
	})
}

func TestRedisDiffCounters(t *testing.T) {
	diffRun(t, []dstep{
		d("INCR c"),
		d("INCRBY c 10"),
		d("DECR c"),
		d("DECRBY c 20"),
		d("GET c"),
		d("INCRBY c -9223372036854775799"),
		d("DECR c"),
		d("INCRBY c -1"),
		d("SET c 9223372036854775807"),
		d("INCR c"),
		d("DECRBY c -1"),
		d("DECRBY c -9223372036854775808"),
		d("INCRBY c 9223372036854775808"),
		d("INCRBY c +1"),
		d("INCRBY c 01"),
		d("SET c 007"),
		d("INCR c"),
		d("SET c +5"),
		d("INCR c"),
		d("SET c ' 5'"),
		d("INCR c"),
		d("SET c 5.0"),
		d("INCR c"),
		d("SET c -0"),
		d("INCR c"),
		d("SET c 18446744073709551615"),
		d("INCR c"),
		d("SET c 100"),
		d("EXPIRE c 100"),
		d("INCR c"),
		d("TTL c"),
		d("DECRBY c 101"),
		d("GET c"),
		d("TTL c"),
		d("INCRBYFLOAT f 10.5"),
		d("INCRBYFLOAT f 0.1"),
		d("INCRBYFLOAT f -5.0e3"),
		d("INCRBYFLOAT f 1e400"),
		d("INCRBYFLOAT f inf"),
		d("INCRBYFLOAT f nan"),
		d("INCRBYFLOAT f abc"),
		d("INCRBYFLOAT f ' 1'"),
		d("INCRBYFLOAT f 0x10"),
		d("INCRBYFLOAT f 1e-400"),
		d("INCRBYFLOAT f 1.e2"),
		d("INCRBYFLOAT f .5"),
		d("INCRBYFLOAT f 5."),
		d("GET f"),
		d("SET f 3.0e3"),
		d("INCRBYFLOAT f 200"),
		d("SET f 1e300"),
		d("INCRBYFLOAT f 1"),
		d("SET f 1.5"),
		d("INCRBYFLOAT f -1.5"),
		d("SET f -0.0"),
		d("INCRBYFLOAT f 0"),
		d("SET f 0.1"),
		d("INCRBYFLOAT f 0.2"),
		d("SET f 12345678901234567890"),
		d("INCRBYFLOAT f 1"),
		d("SET f 1.18e4932"),
		d("INCRBYFLOAT f 1.18e4932"),
		d("SET f 5"),
		d("EXPIRE f 100"),
		d("INCRBYFLOAT f 1.25"),
		d("TTL f"),
		d("SET f abc"),
		d("INCRBYFLOAT f 1"),
		d("INCR f"),
	})
}

// INCRBYFLOAT in long double, on random operands: the x87 80-bit
// arithmetic and "%.17Lf" formatting Redis uses, emulated by kinds.
func TestRedisDiffIncrByFloatRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 1))
	var steps []dstep
	for i := range 300 {
		key := fmt.Sprintf("f%d", i%7)
		var arg string
		switch r.IntN(5) {
		case 0:
			arg = fmt.Sprintf("%d.%d", r.IntN(2000)-1000, r.IntN(1000))
		case 1:
			arg = fmt.Sprintf("%.3e", (r.Float64()-0.5)*1e20)
		case 2:
			arg = fmt.Sprintf("%g", (r.Float64()-0.5)*1e-5)
		case 3:
			arg = fmt.Sprint(r.Int64N(1<<40) - 1<<39)
		default:
			arg = fmt.Sprintf("0.%d", r.IntN(100))
		}
		steps = append(steps, dstep{cmd: []string{"INCRBYFLOAT", key, arg}})
	}
	diffRun(t, steps)
}

// The key commands on strings: RENAME, COPY, OBJECT, TOUCH, EXPIRE's
// options.
func TestRedisDiffKeyCommands(t *testing.T) {
	diffRun(t, []dstep{
		d("SET a 1"),
		d("RENAME a b"),
		d("GET b"),
		d("EXISTS a"),
		d("RENAME a b"),
		d("RENAME b b"),
		d("RENAMENX b b"),
		d("SET c 3"),
		d("RENAMENX b c"),
		d("RENAMENX b d"),
		d("PEXPIRE d 100000"),
		d("RENAME d e"),
		d("TTL e"),
		d("COPY e f"),
		d("TTL f"),
		d("COPY e f"),
		d("COPY e f REPLACE"),
		d("COPY e e"),
		d("COPY nokey f"),
		d("COPY e f FOO"),
		d("COPY e g DB 0"),
		d("COPY e g DB x"),
		d("MGET e f g"),
		d("TYPE e"),
		d("TYPE nokey"),
		d("OBJECT ENCODING e"),
		d("SET s hello"),
		d("OBJECT ENCODING s"),
		{cmd: []string{"SET", "long", strings.Repeat("x", 45)}},
		d("OBJECT ENCODING long"),
		{cmd: []string{"SET", "long44", strings.Repeat("x", 44)}},
		d("OBJECT ENCODING long44"),
		d("SET big 12345678901234567890"),
		d("OBJECT ENCODING big"),
		d("SET neg -5"),
		d("OBJECT ENCODING neg"),
		d("OBJECT ENCODING nokey"),
		d("OBJECT REFCOUNT e"),
		d("OBJECT REFCOUNT s"),
		d("OBJECT FREQ s"),
		d("OBJECT IDLETIME s"),
		d("OBJECT NOPE s"),
		d("OBJECT ENCODING"),
		d("OBJECT HELP"),
		d("TOUCH s e nokey"),
		d("EXPIRE s 100 NX"),
		d("EXPIRE s 200 NX"),
		d("EXPIRE s 50 GT"),
		d("EXPIRE s 500 GT"),
		d("EXPIRE s 50 LT"),
		d("TTL s"),
		d("EXPIRE s 50 XX"),
		d("PERSIST s"),
		d("EXPIRE s 50 XX"),
		d("EXPIRE s 50 GT"),
		d("EXPIRE s 50 NX XX"),
		d("EXPIRE s 50 GT LT"),
		d("EXPIRE s 50 FOO"),
		d("EXPIRETIME s"),
		d("EXPIREAT s 1"),
		d("EXISTS s"),
		d("UNLINK e f nokey"),
		d("DEL c c"),
	})
}

func TestRedisDiffBits(t *testing.T) {
	diffRun(t, []dstep{
		d("SETBIT b 7 1"),
		d("GET b"),
		d("SETBIT b 7 0"),
		d("SETBIT b 100 1"),
		d("STRLEN b"),
		d("GETBIT b 100"),
		d("GETBIT b 99"),
		d("GETBIT b 100000"),
		d("GETBIT nokey 0"),
		d("SET n 1"),
		d("GETBIT n 2"),
		d("GETBIT n 7"),
		d("SETBIT n 6 1"),
		d("GET n"),
		d("SETBIT n 6 2"),
		d("SETBIT n -1 1"),
		d("SETBIT n x 1"),
		d("SETBIT n 4294967296 1"),
		d("GETBIT n 4294967296"),
		d("SETBIT n 0 x"),
		d("EXPIRE n 100"),
		d("SETBIT n 0 1"),
		d("TTL n"),
	})
}
