package sidecar

import (
	"bytes"
	"strconv"
	"strings"
	"testing"

	"github.com/celld/celld/server"
)

func TestReplyEnd(t *testing.T) {
	cases := []struct {
		in   string
		want int // -1: protocol error
	}{
		{"+OK\r\n", 5},
		{"+OK\r\n+OK\r\n", 5},
		{"+OK\r", 0},
		{"-ERR x\r\n", 8},
		{":12\r\n", 5},
		{"$3\r\nabc\r\n", 9},
		{"$3\r\nab", 0},
		{"$-1\r\n", 5},
		{"$3\r\nabcd\r\n", -1},
		{"*2\r\n:1\r\n$1\r\na\r\n", 15},
		{"*2\r\n:1\r\n", 0},
		{"*-1\r\n", 5},
		{"%1\r\n+a\r\n:1\r\n", 12},
		{"|1\r\n+k\r\n+v\r\n:5\r\n", 16},
		{"_\r\n", 3},
		{",1.5\r\n", 6},
		{"=7\r\ntxt:abc\r\n", 13},
		{"?\r\n", -1},
		{"+OK\n", -1},
		// A length past maxCount is refused: near 2^63, size+n+2
		// overflowed and the framer indexed before the buffer (a panic
		// that killed the sidecar); 2^62 would be waited for forever.
		{"$9223372036854775807\r\nabc", -1},
		{"$9223372036854775786\r\n", -1},
		{"*1\r\n$4611686018427387904\r\nab", -1},
		{"!1099511627777\r\n", -1},
		{"$1099511627776\r\nab", 0},
	}
	for i, c := range cases {
		n, err := replyEnd([]byte(c.in))
		if c.want < 0 {
			if err == nil {
				t.Errorf("case %d %q: no error, n=%d", i, c.in, n)
			}
			continue
		}
		if err != nil || n != c.want {
			t.Errorf("case %d %q: got %d, %v; want %d", i, c.in, n, err, c.want)
		}
	}
}

func FuzzReplyEnd(f *testing.F) {
	f.Add([]byte("*2\r\n:1\r\n$1\r\na\r\n"))
	f.Add([]byte("%1\r\n+a\r\n:1\r\n"))
	f.Add([]byte("*1\r\n$9223372036854775807\r\nabc")) // overflowed size+n+2 (a panic) before session 19
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := replyEnd(b)
		if err == nil && (n < 0 || n > len(b)) {
			t.Fatalf("n=%d outside [0,%d]", n, len(b))
		}
		// Fed one byte at a time, a kept framer finds the same end (or
		// an error where one pass found one).
		var f framer
		var m int
		var ferr error
		for i := 1; i <= len(b) && m == 0 && ferr == nil; i++ {
			m, ferr = f.next(b[:i])
		}
		if (err != nil) != (ferr != nil) || (err == nil && m != n) {
			t.Fatalf("byte by byte: %d, %v; one pass: %d, %v", m, ferr, n, err)
		}
		if err == nil && n > 0 {
			// A complete value stays complete with more bytes after it.
			m, err2 := replyEnd(append(append([]byte{}, b[:n]...), "+x\r\n"...))
			if err2 != nil || m != n {
				t.Fatalf("prefix of %d bytes: %d, %v", n, m, err2)
			}
		}
	})
}

func TestRedirect(t *testing.T) {
	for _, c := range []struct {
		in   string
		addr string
		ask  bool
		ok   bool
	}{
		{"-MOVED 3999 127.0.0.1:6381\r\n", "127.0.0.1:6381", false, true},
		{"-ASK 3999 10.0.0.1:7000\r\n", "10.0.0.1:7000", true, true},
		{"-ERR MOVED\r\n", "", false, false},
		{":1\r\n", "", false, false},
	} {
		addr, ask, ok := redirect([]byte(c.in))
		if addr != c.addr || ask != c.ask || ok != c.ok {
			t.Errorf("%q: %q %v %v", c.in, addr, ask, ok)
		}
	}
}

func TestOpenThrottle(t *testing.T) {
	args := func(s ...string) server.ForwardReq {
		r := server.ForwardReq{}
		for _, a := range s {
			r.Args = append(r.Args, []byte(a))
		}
		return r
	}
	for _, c := range []struct {
		req  server.ForwardReq
		want string
	}{
		{args("CL.THROTTLE", "k", "9", "10", "60"), "*5\r\n:0\r\n:10\r\n:9\r\n:-1\r\n:0\r\n"},
		{args("cl.throttle", "k", "0", "1", "1", "5"), "*5\r\n:0\r\n:1\r\n:0\r\n:-1\r\n:0\r\n"},
		{args("cl.throttle", "k", "x", "1", "1"), ""},
		{args("GET", "k"), ""},
	} {
		r, ok := openThrottle(&c.req)
		if string(r) != c.want || ok != (c.want != "") {
			t.Errorf("%q: %q %v, want %q", c.req.Args, r, ok, c.want)
		}
	}
}

// TestAppendForward: what goes upstream is always the canonical encoding
// of Args, whether the client's bytes are reused (canonical) or not (a
// count with a leading zero or a sign, which Redis would refuse).
func TestAppendForward(t *testing.T) {
	args := [][]byte{[]byte("CL.THROTTLE"), []byte("k"), []byte("15"), []byte(""), []byte("0123456789")}
	want := string(appendCommand(nil, args...))
	cases := []struct {
		raw   string
		reuse bool
	}{
		{want, true},
		{"", false}, // inline command: no Raw
		{strings.Replace(want, "$1\r\n", "$01\r\n", 1), false}, // leading zero
		{strings.Replace(want, "*5\r\n", "*+5\r\n", 1), false}, // sign
		{want + "*1\r\n$4\r\nPING\r\n", false},                 // not this command alone
	}
	for i, c := range cases {
		req := &server.ForwardReq{Args: args}
		if c.raw != "" {
			req.Raw = []byte(c.raw)
		}
		got := appendForward([]byte("x"), req)
		if string(got) != "x"+want {
			t.Errorf("case %d: sent %q, want %q", i, got, "x"+want)
		}
		if reused := c.raw != "" && len(req.Raw) == commandLen(args); reused != c.reuse {
			t.Errorf("case %d: raw reused %v, want %v", i, reused, c.reuse)
		}
	}
	for _, n := range []int{0, 1, 9, 10, 99, 100, 12345} {
		a := [][]byte{make([]byte, n), []byte("x")}
		if got, want := commandLen(a), len(appendCommand(nil, a...)); got != want {
			t.Errorf("commandLen with a %d-byte argument: %d, want %d", n, got, want)
		}
	}
}

// TestLineInt: lineInt answers what strconv.Atoi answers, for the lines
// its fast loop takes and for those it hands to Atoi.
func TestLineInt(t *testing.T) {
	lines := []string{"0", "5", "-1", "-5", "99", "007", "+5", "-", "", "+", "1a", "a1", " 1", "1 ",
		"123456789012345678", "-123456789012345678", "1234567890123456789", "9223372036854775807",
		"9223372036854775808", "-9223372036854775808", "--1", "-+1", "1-"}
	for _, l := range lines {
		n, ok := lineInt([]byte(l))
		want, err := strconv.Atoi(l)
		if ok != (err == nil) || (ok && n != want) {
			t.Errorf("lineInt(%q) = %d, %v; strconv.Atoi: %d, %v", l, n, ok, want, err)
		}
	}
}

// TestLineEnd: lineEnd finds the first '\n' as bytes.IndexByte does, on
// both sides of its 16-byte fast loop.
func TestLineEnd(t *testing.T) {
	for n := 0; n < 40; n++ {
		for at := -1; at < n; at++ {
			b := bytes.Repeat([]byte{'x'}, n)
			if at >= 0 {
				b[at] = '\n'
				if at+1 < n {
					b[n-1] = '\n' // a later one must not be taken
				}
			}
			if got, want := lineEnd(b), bytes.IndexByte(b, '\n'); got != want {
				t.Fatalf("len %d, newline at %d: %d, want %d", n, at, got, want)
			}
		}
	}
}
