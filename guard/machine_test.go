package guard

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// Redis's error lines, as the client receives them.
const (
	rInvalidMB   = "-ERR Protocol error: invalid multibulk length\r\n"
	rInvalidBulk = "-ERR Protocol error: invalid bulk length\r\n"
	rTooBigMB    = "-ERR Protocol error: too big mbulk count string\r\n"
	rTooBigBulk  = "-ERR Protocol error: too big bulk count string\r\n"
	rTooBigInl   = "-ERR Protocol error: too big inline request\r\n"
	rUnbalanced  = "-ERR Protocol error: unbalanced quotes in request\r\n"
	rUnauthMB    = "-ERR Protocol error: unauthenticated multibulk length\r\n"
	rUnauthBulk  = "-ERR Protocol error: unauthenticated bulk length\r\n"
)

func expectedDollar(c byte) string {
	return "-ERR Protocol error: expected '$', got '" + string([]byte{c}) + "'\r\n"
}

type guardCase struct {
	name   string
	in     string
	lim    Limits // zero fields: defaults
	unauth bool   // RequireAuth, never authenticated
	out    string // what redcon must receive
	reply  string // what the client must receive from the guard
	kind   error  // nil: the stream just ended (io.EOF); else ErrProtocol, ...
}

const (
	get   = "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"
	ping  = "*1\r\n$4\r\nPING\r\n"
	setkv = "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n"
)

var guardCases = []guardCase{
	// Valid streams pass through byte-exact.
	{name: "one command", in: ping, out: ping},
	{name: "pipeline", in: ping + get + setkv + ping, out: ping + get + setkv + ping},
	{name: "empty bulk", in: "*2\r\n$4\r\nECHO\r\n$0\r\n\r\n", out: "*2\r\n$4\r\nECHO\r\n$0\r\n\r\n"},
	{name: "binary payload", in: "*2\r\n$4\r\nECHO\r\n$6\r\n\r\n*$\x00\xff\r\n", out: "*2\r\n$4\r\nECHO\r\n$6\r\n\r\n*$\x00\xff\r\n"},
	{name: "incomplete tail passes its payload", in: ping + "*2\r\n$3\r\nGET\r\n$5\r\nab", out: ping + "*2\r\n$3\r\nGET\r\n$5\r\nab"},
	{name: "incomplete header held", in: ping + "*2\r\n$3\r\nGET\r\n$1", out: ping + "*2\r\n$3\r\nGET\r\n"},
	{name: "inline PING", in: "PING\r\n", out: "PING\r\n"},
	{name: "inline LF only", in: "PING\nPING\n", out: "PING\nPING\n"},
	{name: "inline args and quotes", in: "SET k \"a b\\n\" 'x'\r\n", out: "SET k \"a b\\n\" 'x'\r\n"},
	{name: "inline empty lines", in: "\r\n\n   \r\nPING\r\n", out: "\r\n\n   \r\nPING\r\n"},
	{name: "inline then multibulk", in: "PING\r\n" + get, out: "PING\r\n" + get},
	{name: "max args", in: "*1024\r\n" + strings.Repeat("$1\r\nx\r\n", 1024), out: "*1024\r\n" + strings.Repeat("$1\r\nx\r\n", 1024)},
	{name: "max bulk", in: "*1\r\n$524288\r\n" + strings.Repeat("x", 524288) + "\r\n", out: "*1\r\n$524288\r\n" + strings.Repeat("x", 524288) + "\r\n"},
	{name: "inline of MaxInline bytes", in: strings.Repeat("a", 65535) + "\r\n", out: strings.Repeat("a", 65535) + "\r\n"},
	{name: "inline CR counts", in: strings.Repeat("a", 65536) + "\r\n", out: strings.Repeat("a", 65536), reply: rTooBigInl, kind: ErrProtocol},

	// Counts <= 0 are ignored, as in Redis; redcon would reject them.
	{name: "*0", in: "*0\r\n", out: ""},
	{name: "*-1", in: "*-1\r\n", out: ""},
	{name: "*0 between commands", in: ping + "*0\r\n" + ping + "*-1\r\n*-10\r\n" + get, out: ping + ping + get},
	{name: "most negative count", in: "*-9223372036854775808\r\n" + ping, out: ping},

	// The redcon crashers.
	{name: "bulk 2^63-1", in: "*1\r\n$9223372036854775807\r\nabc\r\n", out: "*1\r\n", reply: rInvalidBulk, kind: ErrProtocol},
	{name: "count 2^63-1", in: "*9223372036854775807\r\n", reply: rInvalidMB, kind: ErrProtocol},
	{name: "count 1048576 waits for its arguments", in: "*1048576\r\n$1\r\nx\r\n", out: "*1048576\r\n$1\r\nx\r\n"},
	{name: "count 1048577", in: "*1048577\r\n", reply: rInvalidMB, kind: ErrProtocol},
	{name: "count over a lower MaxArgs", lim: Limits{MaxArgs: 1024}, in: "*1025\r\n", reply: rInvalidMB, kind: ErrProtocol},
	{name: "count of INT_MAX", lim: Limits{MaxArgs: MaxArgsCeiling}, in: "*2147483647\r\n$1\r\nx\r\n", out: "*2147483647\r\n$1\r\nx\r\n"},
	// Many tiny arguments are charged ArgOverhead each: memory stays
	// bounded by MaxQueryBuffer however many the count allows.
	{name: "tiny arguments charged", lim: Limits{MaxBulk: 10, MaxQueryBuffer: 7 + 31*99 + 1}, in: "*1000\r\n" + strings.Repeat("$1\r\nx\r\n", 100), out: "*1000\r\n" + strings.Repeat("$1\r\nx\r\n", 99), kind: ErrQueryBuffer},
	{name: "count 2^31", in: "*2147483648\r\n", reply: rInvalidMB, kind: ErrProtocol},
	{name: "huge bulk after arg", in: "*2\r\n$3\r\nGET\r\n$1000000000\r\n", out: "*2\r\n$3\r\nGET\r\n", reply: rInvalidBulk, kind: ErrProtocol},
	{name: "bulk over MaxBulk", in: "*1\r\n$524289\r\n", out: "*1\r\n", reply: rInvalidBulk, kind: ErrProtocol},
	{name: "20-digit bulk", in: "*1\r\n$18446744073709551616\r\n", out: "*1\r\n", reply: rInvalidBulk, kind: ErrProtocol},
	{name: "count overflow negative", in: "*-9223372036854775809\r\n", reply: rInvalidMB, kind: ErrProtocol},
	{name: "commands before the error run", in: ping + get + "*1\r\n$-5\r\n", out: ping + get + "*1\r\n", reply: rInvalidBulk, kind: ErrProtocol},

	// Junk in numbers and frames.
	{name: "*abc", in: "*abc\r\n", reply: rInvalidMB, kind: ErrProtocol},
	{name: "* empty", in: "*\r\n", reply: rInvalidMB, kind: ErrProtocol},
	{name: "*+1", in: "*+1\r\n", reply: rInvalidMB, kind: ErrProtocol},
	{name: "*01", in: "*01\r\n", reply: rInvalidMB, kind: ErrProtocol},
	{name: "*-0", in: "*-0\r\n", reply: rInvalidMB, kind: ErrProtocol},
	{name: "*-", in: "*-\r\n", reply: rInvalidMB, kind: ErrProtocol},
	{name: "* space", in: "* 1\r\n", reply: rInvalidMB, kind: ErrProtocol},
	{name: "*1 then lone LF", in: "*1\n", reply: "", kind: nil},
	{name: "*1 CR junk", in: "*1\rx", reply: rInvalidMB, kind: ErrProtocol},
	{name: "expected $", in: "*1\r\nx3\r\n", out: "*1\r\n", reply: expectedDollar('x'), kind: ErrProtocol},
	{name: "expected $ waits for CR", in: "*1\r\nx3", out: "*1\r\n", reply: "", kind: nil},
	{name: "expected $ got CR", in: "*1\r\n\r\n", out: "*1\r\n", reply: expectedDollar(' '), kind: ErrProtocol},
	{name: "expected $ after arg", in: "*3\r\n$3\r\nSET\r\n$1\r\nx\r\nfooz\r\n", out: "*3\r\n$3\r\nSET\r\n$1\r\nx\r\n", reply: expectedDollar('f'), kind: ErrProtocol},
	{name: "$-1 in request", in: "*1\r\n$-1\r\n", out: "*1\r\n", reply: rInvalidBulk, kind: ErrProtocol},
	{name: "$ junk", in: "*1\r\n$1x\r\n", out: "*1\r\n", reply: rInvalidBulk, kind: ErrProtocol},
	{name: "$ leading zero", in: "*1\r\n$01\r\nx\r\n", out: "*1\r\n", reply: rInvalidBulk, kind: ErrProtocol},
	{name: "$ CR junk", in: "*1\r\n$1\rxx\r\n", out: "*1\r\n", reply: rInvalidBulk, kind: ErrProtocol},
	{name: "payload not followed by CRLF", in: "*1\r\n$1\r\nxyz\r\n", out: "*1\r\n$1\r\nx", reply: rInvalidBulk, kind: ErrProtocol},
	{name: "payload CR then junk", in: "*1\r\n$1\r\nx\rz", out: "*1\r\n$1\r\nx\r", reply: rInvalidBulk, kind: ErrProtocol},
	{name: "mbulk line too long", in: "*" + strings.Repeat("1", 70000), reply: rTooBigMB, kind: ErrProtocol},
	{name: "mbulk junk line too long", in: "*x" + strings.Repeat("y", 70000) + "\r\n", reply: rTooBigMB, kind: ErrProtocol},
	{name: "mbulk junk line ends in time", in: "*x" + strings.Repeat("y", 1000) + "\r\n", reply: rInvalidMB, kind: ErrProtocol},
	{name: "bulk line too long", in: "*1\r\n$" + strings.Repeat("1", 70000), out: "*1\r\n", reply: rTooBigBulk, kind: ErrProtocol},
	{name: "not-$ line too long", in: "*1\r\nx" + strings.Repeat("1", 70000), out: "*1\r\n", reply: rTooBigBulk, kind: ErrProtocol},

	// Inline lines.
	{name: "inline too big", in: strings.Repeat("a", 65537), out: strings.Repeat("a", 65536), reply: rTooBigInl, kind: ErrProtocol},
	{name: "inline too big then LF", in: strings.Repeat("a", 65537) + "\n", out: strings.Repeat("a", 65536), reply: rTooBigInl, kind: ErrProtocol},
	{name: "inline within limit waits", in: strings.Repeat("a", 65536), out: strings.Repeat("a", 65536)},
	{name: "inline of 1025 words", in: strings.Repeat("a ", 1025) + "\r\n", out: strings.Repeat("a ", 1025) + "\r\n"},
	{name: "inline too many words", lim: Limits{MaxArgs: 1024}, in: strings.Repeat("a ", 1025) + "\r\n", out: strings.Repeat("a ", 1024) + "a", reply: rTooBigInl, kind: ErrProtocol},
	{name: "inline unbalanced", in: "SET k \"abc\r\n", out: "SET k \"abc\r", reply: rUnbalanced, kind: ErrProtocol},
	{name: "inline quote mid-word", in: "SET k ab\"c\"\r\n", out: "SET k ab", reply: rUnbalanced, kind: ErrProtocol},
	{name: "inline text after close quote", in: "SET k \"a\"b\r\n", out: "SET k \"a\"", reply: rUnbalanced, kind: ErrProtocol},
	{name: "inline trailing backslash in quote", in: "SET k \"a\\\r\n", out: "SET k \"a\\\r", reply: rUnbalanced, kind: ErrProtocol},
	{name: "inline unbalanced after good lines", in: "PING\r\n'x\r\n", out: "PING\r\n'x\r", reply: rUnbalanced, kind: ErrProtocol},

	// Cross-protocol scripting: closed, no reply.
	{name: "POST", in: "POST / HTTP/1.1\r\nHost: x\r\n\r\n", out: "POST / HTTP/1.1\r", kind: ErrSecurity},
	{name: "Host:", in: "PING\r\nHost: x\r\n", out: "PING\r\nHost: x\r", kind: ErrSecurity},
	{name: "post lower case", in: "post /\n", out: "post /", kind: ErrSecurity},
	{name: "quoted POST", in: "\"POST\" x\r\n", out: "\"POST\" x\r", kind: ErrSecurity},
	{name: "multibulk POST", in: "*2\r\n$4\r\nPoSt\r\n$1\r\n/\r\n", out: "*2\r\n$4\r\nPoSt\r\n$1\r\n/\r", kind: ErrSecurity},
	{name: "multibulk HOST:", in: "*1\r\n$5\r\nHOST:\r\n", out: "*1\r\n$5\r\nHOST:\r", kind: ErrSecurity},
	{name: "POST as second arg is fine", in: "*2\r\n$4\r\nECHO\r\n$4\r\nPOST\r\n", out: "*2\r\n$4\r\nECHO\r\n$4\r\nPOST\r\n"},
	{name: "POSTS is fine", in: "POSTS x\r\n", out: "POSTS x\r\n"},
	{name: "POST unbalanced is unbalanced", in: "POST \"x\r\n", out: "POST \"x\r", reply: rUnbalanced, kind: ErrProtocol},
	{name: "GET then Host", in: "GET / HTTP/1.1\r\nHost: a\r\n", out: "GET / HTTP/1.1\r\nHost: a\r", kind: ErrSecurity},

	// Unauthenticated limits.
	{name: "unauth 10 args ok", unauth: true, in: "*10\r\n" + strings.Repeat("$1\r\nx\r\n", 10), out: "*10\r\n" + strings.Repeat("$1\r\nx\r\n", 10)},
	{name: "unauth 11 args", unauth: true, in: "*11\r\n", reply: rUnauthMB, kind: ErrProtocol},
	{name: "unauth count invalid first", unauth: true, in: "*1048577\r\n", reply: rInvalidMB, kind: ErrProtocol},
	{name: "unauth bulk 16384 ok", unauth: true, in: "*1\r\n$16384\r\n" + strings.Repeat("x", 16384) + "\r\n", out: "*1\r\n$16384\r\n" + strings.Repeat("x", 16384) + "\r\n"},
	{name: "unauth bulk 16385", unauth: true, in: "*1\r\n$16385\r\n", out: "*1\r\n", reply: rUnauthBulk, kind: ErrProtocol},
	{name: "unauth bulk invalid first", unauth: true, in: "*1\r\n$600000\r\n", out: "*1\r\n", reply: rInvalidBulk, kind: ErrProtocol},
	{name: "unauth inline words", unauth: true, in: "a b c d e f g h i j k\r\n", out: "a b c d e f g h i j k\r", reply: rTooBigInl, kind: ErrProtocol},
	// A middle argument (scan's shortBulks) obeys the same bounds.
	{name: "unauth middle bulk at UnauthMaxBulk", unauth: true, lim: Limits{UnauthMaxBulk: 10}, in: "*3\r\n$3\r\nSET\r\n$10\r\nkkkkkkkkkk\r\n$1\r\nv\r\n", out: "*3\r\n$3\r\nSET\r\n$10\r\nkkkkkkkkkk\r\n$1\r\nv\r\n"},
	{name: "unauth middle bulk over UnauthMaxBulk", unauth: true, lim: Limits{UnauthMaxBulk: 10}, in: "*3\r\n$3\r\nSET\r\n$11\r\nkkkkkkkkkkk\r\n$1\r\nv\r\n", out: "*3\r\n$3\r\nSET\r\n", reply: rUnauthBulk, kind: ErrProtocol},
	{name: "middle bulk over the query buffer", lim: Limits{MaxBulk: 10, MaxQueryBuffer: 4 + 33 + 32 - 1}, in: "*3\r\n$3\r\nSET\r\n$2\r\nab\r\n$1\r\nv\r\n", out: "*3\r\n$3\r\nSET\r\n", kind: ErrQueryBuffer},
	{name: "middle bulk fills the query buffer", lim: Limits{MaxBulk: 10, MaxQueryBuffer: 4 + 33 + 32}, in: "*3\r\n$3\r\nSET\r\n$2\r\nab\r\n$1\r\nv\r\n", out: "*3\r\n$3\r\nSET\r\n$2\r\nab\r\n", kind: ErrQueryBuffer},
	{name: "unauth pipeline", unauth: true, in: "AUTH x\r\n" + ping + get, out: "AUTH x\r\n" + ping + get},

	// The query buffer cap: closed without a reply.
	{name: "query buffer", lim: Limits{MaxQueryBuffer: 600000}, in: "*2\r\n$300000\r\n" + strings.Repeat("x", 300000) + "\r\n$300000\r\n", out: "*2\r\n$300000\r\n" + strings.Repeat("x", 300000) + "\r\n", kind: ErrQueryBuffer},
	{name: "query buffer exact fit", lim: Limits{MaxBulk: 300000, MaxQueryBuffer: 4 + 9 + 300000 + 2 + ArgOverhead}, in: "*1\r\n$300000\r\n" + strings.Repeat("x", 300000) + "\r\n", out: "*1\r\n$300000\r\n" + strings.Repeat("x", 300000) + "\r\n"},
	{name: "query buffer one over", lim: Limits{MaxBulk: 300000, MaxQueryBuffer: 4 + 9 + 300000 + 1 + ArgOverhead}, in: "*1\r\n$300000\r\n", out: "*1\r\n", kind: ErrQueryBuffer},
}

// splitters are the ways each case is cut into socket reads.
var splitters = []struct {
	name string
	fn   func([]byte) [][]byte
}{
	{"whole", whole},
	{"bytes", byteByByte},
	{"random1", func(b []byte) [][]byte { return randomSplits(b, 1) }},
	{"random2", func(b []byte) [][]byte { return randomSplits(b, 2) }},
	{"random3", func(b []byte) [][]byte { return randomSplits(b, 3) }},
}

func TestGuard(t *testing.T) {
	for _, tc := range guardCases {
		t.Run(tc.name, func(t *testing.T) {
			in := []byte(tc.in)
			for _, sp := range splitters {
				if sp.name == "bytes" && len(in) > 100000 {
					continue // a million reads of one byte adds nothing here
				}
				readSizes := []int{4096, 1, 5, 64}
				if len(in) > 100000 {
					readSizes = []int{4096, 64} // smaller reads of this much add only time
				}
				for _, readSize := range readSizes {
					res := feed(sp.fn(in), tc.lim, !tc.unauth, readSize)
					where := fmt.Sprintf("%s, reads of %d", sp.name, readSize)
					checkResult(t, where, tc, res)
				}
			}
			// The reference parser agrees, and so does redcon's reader.
			ref := reference(in, tc.lim, !tc.unauth)
			res := feed(whole(in), tc.lim, !tc.unauth, 4096)
			if err := checkReference(in, res, ref); err != nil {
				t.Error(err)
			}
		})
	}
}

func checkResult(t *testing.T, where string, tc guardCase, res result) {
	t.Helper()
	if !bytes.Equal(res.out, []byte(tc.out)) {
		t.Errorf("%s: redcon got %s, want %s", where, abbrev(res.out), abbrev([]byte(tc.out)))
	}
	if res.reply != tc.reply {
		t.Errorf("%s: client got %q, want %q", where, res.reply, tc.reply)
	}
	if !errors.Is(res.err, io.EOF) {
		t.Errorf("%s: error %v does not wrap io.EOF", where, res.err)
	}
	wantViol, wantHooks := 0, 0
	if tc.kind == nil {
		if res.err != io.EOF {
			t.Errorf("%s: error %v, want io.EOF", where, res.err)
		}
	} else {
		wantViol = 1
		if !errors.Is(res.err, tc.kind) {
			t.Errorf("%s: error %v, want %v", where, res.err, tc.kind)
		}
		if tc.kind == ErrSecurity {
			wantHooks = 1
		}
	}
	if res.viols != wantViol || res.hooks != wantHooks {
		t.Errorf("%s: OnViolation called %d times, OnSecurityWarning %d; want %d, %d", where, res.viols, res.hooks, wantViol, wantHooks)
	}
}

func abbrev(b []byte) string {
	if len(b) > 80 {
		return fmt.Sprintf("%q...(%d bytes)", b[:80], len(b))
	}
	return fmt.Sprintf("%q", b)
}

// A client that authenticates mid-stream gets the full limits from the next
// command on, even when it pipelined AUTH with that command.
func TestAuthLiftsLimitsForNextCommand(t *testing.T) {
	big := "*12\r\n" + strings.Repeat("$1\r\nx\r\n", 12)
	in := "AUTH pw\r\n" + big + "*1\r\n$20000\r\n" + strings.Repeat("y", 20000) + "\r\n"
	for _, sp := range splitters {
		fc := &fakeConn{chunks: sp.fn([]byte(in))}
		c := NewConn(fc, Limits{}, RequireAuth(true))
		var out []byte
		p := make([]byte, 4096)
		for {
			n, err := c.Read(p)
			out = append(out, p[:n]...)
			if bytes.HasPrefix(out, []byte("AUTH pw\r\n")) {
				c.SetAuthenticated(true) // as the AUTH handler would, once AUTH has arrived
			}
			if err != nil {
				if err != io.EOF {
					t.Fatalf("%s: %v (client got %q)", sp.name, err, fc.written())
				}
				break
			}
		}
		if string(out) != in {
			t.Fatalf("%s: redcon got %s", sp.name, abbrev(out))
		}
	}
}

// Before authentication, Read stops after each command, so the server can
// run AUTH before the limits are applied to the next one.
func TestUnauthReadsOneCommandAtATime(t *testing.T) {
	in := "AUTH pw\r\n" + ping + get + "*20\r\n"
	fc := &fakeConn{chunks: whole([]byte(in))}
	c := NewConn(fc, Limits{}, RequireAuth(true))
	p := make([]byte, 4096)
	for _, want := range []string{"AUTH pw\r\n", ping, get} {
		n, err := c.Read(p)
		if err != nil || string(p[:n]) != want {
			t.Fatalf("Read = %q, %v; want %q", p[:n], err, want)
		}
	}
	// The *20 header was read from the socket with the rest, but is judged
	// only now, under the limits in force after AUTH ran.
	c.SetAuthenticated(true)
	if n, err := c.Read(p); err != nil || string(p[:n]) != "*20\r\n" {
		t.Fatalf("Read = %q, %v; want the *20 header, allowed once authenticated", p[:n], err)
	}
	if n, err := c.Read(p); n != 0 || err != io.EOF {
		t.Fatalf("Read = %q, %v; want io.EOF", p[:n], err)
	}
}

func TestSetAuthenticatedFalseRestoresLimits(t *testing.T) {
	fc := &fakeConn{chunks: [][]byte{[]byte(ping), []byte("*11\r\n")}}
	c := NewConn(fc, Limits{}) // starts authenticated
	p := make([]byte, 4096)
	if n, err := c.Read(p); err != nil || string(p[:n]) != ping {
		t.Fatalf("Read = %q, %v", p[:n], err)
	}
	c.SetAuthenticated(false)
	if _, err := c.Read(p); !errors.Is(err, ErrProtocol) || fc.written() != rUnauthMB {
		t.Fatalf("Read error %v, client got %q", err, fc.written())
	}
}

func TestLimitsValidate(t *testing.T) {
	if err := DefaultLimits().Validate(); err != nil {
		t.Fatal(err)
	}
	if err := (Limits{}).Validate(); err != nil {
		t.Fatalf("zero Limits: %v", err)
	}
	if (Limits{}).withDefaults() != DefaultLimits() {
		t.Fatal("zero Limits do not take the defaults")
	}
	big := Limits{MaxBulk: MaxBulkCeiling}
	if err := big.Validate(); err != nil {
		t.Fatalf("MaxBulk at its ceiling with a zero MaxQueryBuffer: %v", err)
	}
	for _, l := range []Limits{
		{MaxArgs: -1},
		{MaxArgs: MaxArgsCeiling + 1},
		{MaxBulk: -1},
		{MaxBulk: MaxBulkCeiling + 1},
		{MaxInline: 10},
		{MaxInline: MaxInlineCeiling + 1},
		{MaxBulk: 1 << 20, MaxQueryBuffer: 1 << 19},
		{MaxArgs: 1024, UnauthMaxArgs: 2000},
		{MaxArgs: 5, UnauthMaxArgs: 6},
		{UnauthMaxBulk: -5},
		{MaxBulk: 100, UnauthMaxBulk: 200},
	} {
		if err := l.Validate(); !errors.Is(err, ErrLimits) {
			t.Errorf("%+v: Validate() = %v, want ErrLimits", l, err)
		}
	}
}

func TestNewConnPanicsOnInvalidLimits(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	NewConn(&fakeConn{}, Limits{MaxArgs: -1})
}

func TestCloseIsIdempotent(t *testing.T) {
	fc := &fakeConn{}
	released := 0
	c := newConn(fc, DefaultLimits(), newOptions(nil), func() { released++ })
	for range 3 {
		c.Close()
	}
	if fc.closed != 1 || released != 1 {
		t.Fatalf("inner Close called %d times, slot released %d times", fc.closed, released)
	}
}

func TestErrorText(t *testing.T) {
	e := newError(vInvalidBulk, 0)
	if e.Error() != "guard: Protocol error: invalid bulk length" || e.Reply != rInvalidBulk {
		t.Fatalf("%q %q", e.Error(), e.Reply)
	}
	if !errors.Is(e, io.EOF) || !errors.Is(e, ErrProtocol) {
		t.Fatal("Error must wrap io.EOF and its kind")
	}
	if e := newError(vSecurity, 0); e.Reply != "" || !errors.Is(e, ErrSecurity) {
		t.Fatalf("security: %+v", e)
	}
	if e := newError(vQueryBuffer, 0); e.Reply != "" || !errors.Is(e, ErrQueryBuffer) {
		t.Fatalf("query buffer: %+v", e)
	}
}

// A partial inline line trickled in one byte per packet reaches redcon in
// reads of the caller's buffer size, not byte by byte: redcon rescans a
// partial inline line from its start on every read.
func TestPartialInlineLineCoalesced(t *testing.T) {
	line := strings.Repeat("x", 20000) + "\r\n"
	in := "PING\r\n" + line + "PI"
	c := NewConn(&fakeConn{chunks: byteByByte([]byte(in))}, Limits{})
	p := make([]byte, 4096)
	var sizes []int
	var out []byte
	for {
		n, err := c.Read(p)
		out = append(out, p[:n]...)
		if err != nil {
			break
		}
		sizes = append(sizes, n)
	}
	if string(out) != in {
		t.Fatalf("redcon got %s", abbrev(out))
	}
	// "PING\r\n" at once (a complete command is never held back), then the
	// 20002-byte line in reads that (but for the last) nearly fill p, then
	// "PI" at the end of input.
	if len(sizes) < 3 || sizes[0] != 6 || sizes[len(sizes)-1] != 2 {
		t.Fatalf("reads of %v", sizes)
	}
	for _, n := range sizes[1 : len(sizes)-2] {
		if n < len(p)-minRead {
			t.Fatalf("reads of %v: the partial line was not coalesced", sizes)
		}
	}
}
