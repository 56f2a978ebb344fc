package server

import (
	"strconv"
	"strings"
	"testing"
)

var parseInt64Cases = []string{
	"0", "1", "-1", "15", "+15", "0015", "-0015", "+0", "-0", "00",
	" 15", "15 ", "1 5", "\t15", "15\n",
	"1.5", "15.0", "1e3", "0x0f", "0X0F", "0b1", "0o17", "1_5", "_15", "15_",
	"", "+", "-", "+-1", "-+1", "--1", "++1",
	"9223372036854775807", "+9223372036854775807", "09223372036854775807",
	"9223372036854775808", "9223372036854775809", "9223372036854775810",
	"-9223372036854775807", "-9223372036854775808", "-09223372036854775808",
	"-9223372036854775809", "-9223372036854775810",
	"922337203685477580", "9223372036854775800", "92233720368547758070",
	"18446744073709551615", "18446744073709551616", "-18446744073709551616",
	"99999999999999999999", "100000000000000000000", "-100000000000000000000",
	"000000000000000000000000000000000000000001",
	"-000000000000000000000000000000000000000001",
	"123456789012345678901234567890",
	"١٢", "１２", "1\x00", "\x001",
}

func TestParseInt64MatchesStrconv(t *testing.T) {
	for _, in := range parseInt64Cases {
		checkParseInt64(t, in)
	}
}

func checkParseInt64(t *testing.T, in string) {
	t.Helper()
	got, ok := parseInt64([]byte(in))
	want, err := strconv.ParseInt(in, 10, 64)
	if ok != (err == nil) {
		t.Errorf("parseInt64(%q) ok = %v; strconv.ParseInt: %d, %v", in, ok, want, err)
		return
	}
	if ok && got != want {
		t.Errorf("parseInt64(%q) = %d; strconv.ParseInt = %d", in, got, want)
	}
}

func FuzzParseInt64(f *testing.F) {
	for _, in := range parseInt64Cases {
		f.Add(in)
	}
	f.Fuzz(func(t *testing.T, in string) { checkParseInt64(t, in) })
}

func TestParseInt64ZeroAllocs(t *testing.T) {
	b := []byte("-9223372036854775808")
	if n := testing.AllocsPerRun(1000, func() { parseInt64(b) }); n != 0 {
		t.Errorf("parseInt64 allocates %v per call", n)
	}
}

func TestAppendError(t *testing.T) {
	for _, tc := range []struct{ msg, want string }{
		{"ERR x", "-ERR x\r\n"},
		{"ERR a\r\nb", "-ERR a  b\r\n"},
		{"ERR a\nb\rc", "-ERR a b c\r\n"},
		{"\r\nERR x\r\n", "-ERR x\r\n"},
		{"\n\r\nERR x\n\n\r", "-ERR x\r\n"},
		{"ERR x \r\n", "-ERR x \r\n"}, // only CR and LF are trimmed
		{" ERR x ", "- ERR x \r\n"},
		{"ERR \rx\n", "-ERR  x\r\n"},
		{"\r\n", "-\r\n"},
		{"", "-\r\n"},
		{"Cell error: Store error: Couldn't parse as integer: a\nb", "-Cell error: Store error: Couldn't parse as integer: a b\r\n"},
	} {
		got := string(appendError([]byte("prefix"), tc.msg))
		if got != "prefix"+tc.want {
			t.Errorf("appendError(%q) = %q, want %q", tc.msg, got, "prefix"+tc.want)
		}
	}
}

func TestCString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"abc", "abc"},
		{"a\x00b", "a"},
		{"\x00abc", ""},
		{"abc\x00", "abc"},
		{"\x00", ""},
	} {
		if got := string(cString([]byte(tc.in))); got != tc.want {
			t.Errorf("cString(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func bargs(ss ...string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

// TestUnknownCommandError checks the text against Redis 7's processCommand:
//
//	for (i=1; i < c->argc && sdslen(args) < 128; i++)
//	    args = sdscatprintf(args, "'%.*s' ", 128-(int)sdslen(args), argv[i]);
//	"unknown command '%.128s', with args beginning with: %s"
//
// where sdslen(args) counts the quotes and spaces already written, and %s
// stops at a NUL.
func TestUnknownCommandError(t *testing.T) {
	const pre = "ERR unknown command '"
	const mid = "', with args beginning with: "
	x := func(n int) string { return strings.Repeat("x", n) }
	y := func(n int) string { return strings.Repeat("y", n) }
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no args", []string{"foo"}, pre + "foo" + mid},
		{"two args", []string{"foo", "a", "b"}, pre + "foo" + mid + "'a' 'b' "},
		{"empty arg", []string{"foo", ""}, pre + "foo" + mid + "'' "},
		{"empty name", []string{""}, pre + mid},
		{"name 128", []string{x(128)}, pre + x(128) + mid},
		{"name 129 cut", []string{x(129)}, pre + x(128) + mid},
		{"name 500 cut", []string{x(500), "a"}, pre + x(128) + mid + "'a' "},
		{"name NUL", []string{"fo\x00o", "a"}, pre + "fo" + mid + "'a' "},
		{"arg NUL", []string{"foo", "a\x00b", "c"}, pre + "foo" + mid + "'a' 'c' "},
		{"arg NUL first", []string{"foo", "\x00b"}, pre + "foo" + mid + "'' "},
		// One long argument: precision 128 (nothing written yet).
		{"arg 200", []string{"foo", y(200)}, pre + "foo" + mid + "'" + y(128) + "' "},
		{"arg 128", []string{"foo", y(128), "z"}, pre + "foo" + mid + "'" + y(128) + "' "},
		{"arg 127", []string{"foo", y(127), "z"}, pre + "foo" + mid + "'" + y(127) + "' "},
		// 100 bytes → 103 written; the next gets precision 25; then stop.
		{"arg 100 then long", []string{"foo", y(100), x(50), "z"},
			pre + "foo" + mid + "'" + y(100) + "' '" + x(25) + "' "},
		// 124 → 127 written (< 128): one more, with precision 1.
		{"arg 124 then one", []string{"foo", y(124), "abc", "z"},
			pre + "foo" + mid + "'" + y(124) + "' 'a' "},
		// 125 → exactly 128 written: stop.
		{"arg 125 stops", []string{"foo", y(125), "abc"},
			pre + "foo" + mid + "'" + y(125) + "' "},
		// Many short args: 'a' ' is 4 bytes; 32 of them make 128.
		{"many short", append([]string{"foo"}, strings.Split(strings.Repeat("a,", 40)+"a", ",")...),
			pre + "foo" + mid + strings.Repeat("'a' ", 32)},
		// 31 args of 4 bytes = 124 written: the 32nd, of 10 bytes, gets 4.
		{"cut after many", append(append([]string{"foo"}, strings.Split(strings.Repeat("a,", 30)+"a", ",")...), "bbbbbbbbbb", "c"),
			pre + "foo" + mid + strings.Repeat("'a' ", 31) + "'bbbb' "},
		// NUL in an argument counts only the bytes before it.
		{"NUL then more", []string{"foo", y(60) + "\x00" + y(60), x(100)},
			pre + "foo" + mid + "'" + y(60) + "' '" + x(65) + "' "},
	} {
		got := unknownCommandError(bargs(tc.args...))
		if got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

// TestUnknownCommandReply: the wire form, through appendError (CR/LF in the
// command name become spaces; the trailing space of the args list stays).
func TestUnknownCommandReply(t *testing.T) {
	s, c := newDispatchFixture(t)
	s.dispatchLookup(c, bargs("a\r\nb", "x\ny"))
	want := "-ERR unknown command 'a  b', with args beginning with: 'x y' \r\n"
	if string(c.out) != want {
		t.Errorf("got %q\nwant %q", c.out, want)
	}
	c.out = c.out[:0]
	s.dispatchLookup(c, bargs("nosuch"))
	want = "-ERR unknown command 'nosuch', with args beginning with: \r\n"
	if string(c.out) != want {
		t.Errorf("got %q\nwant %q", c.out, want)
	}
	// Inside MULTI an unknown command flags the transaction.
	c.out = c.out[:0]
	s.dispatchLookup(c, bargs("MULTI"))
	s.dispatchLookup(c, bargs("nosuch", "a"))
	s.dispatchLookup(c, bargs("PING"))
	s.dispatchLookup(c, bargs("EXEC"))
	want = "+OK\r\n-ERR unknown command 'nosuch', with args beginning with: 'a' \r\n+QUEUED\r\n" +
		"-EXECABORT Transaction discarded because of previous errors.\r\n"
	if string(c.out) != want {
		t.Errorf("MULTI: got %q\nwant %q", c.out, want)
	}
}

func TestWrongArityAndLookup(t *testing.T) {
	s, c := newDispatchFixture(t)
	s.dispatchLookup(c, bargs("GET"))
	if want := "-ERR wrong number of arguments for 'get' command\r\n"; string(c.out) != want {
		t.Errorf("got %q want %q", c.out, want)
	}
	for _, name := range []string{"ping", "PING", "PiNg"} {
		if lookup(commands, []byte(name)) == nil {
			t.Errorf("lookup(%q) = nil", name)
		}
	}
	for _, name := range []string{"", "pin", "pingg", "ping\x00", strings.Repeat("a", 33), strings.Repeat("p", 1000)} {
		if lookup(commands, []byte(name)) != nil {
			t.Errorf("lookup(%q) != nil", name)
		}
	}
	// No table name is longer than the lookup buffer.
	for name, cmd := range commands {
		if len(name) > maxNameLen {
			t.Errorf("command %q longer than maxNameLen", name)
		}
		for sub := range cmd.subs {
			if len(sub) > maxNameLen {
				t.Errorf("subcommand %q longer than maxNameLen", sub)
			}
		}
	}
}

// dispatchLookup is dispatch with the table lookup that parseBatch does
// for commands read from a connection.
func (s *Server) dispatchLookup(c *client, args [][]byte) {
	var cmd *command
	if len(args) > 0 {
		cmd = lookup(commands, args[0])
	}
	s.dispatch(c, cmd, args)
}

// executeLookup is execute with parseBatch's table lookup.
func (s *Server) executeLookup(c *client, args [][]byte) {
	var cmd *command
	if len(args) > 0 {
		cmd = lookup(commands, args[0])
	}
	s.execute(c, cmd, args)
}
