package server

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
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
	f.Fuzz(func(t *testing.T, in string) {
		checkParseInt64(t, in)
		checkParseRedisInt(t, in) // intparse_test.go
		checkParseScanCursor(t, in)
	})
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

// BenchmarkBatchThrottle is the event loop's work per command between a
// read and a write: parseBatch, the store's prefetch and runBatch, for 16
// pipelined CL.THROTTLE calls on keys drawn from 100k (as bench/run.sh's
// random-key row), without the socket.
func BenchmarkBatchThrottle(b *testing.B) {
	s, c := newDispatchFixture(b)
	const depth, nkeys = 16, 100_000
	var pipes [][]byte
	for p := 0; p < 64; p++ {
		var buf []byte
		for i := 0; i < depth; i++ {
			key := fmt.Sprintf("ok:%012d", (p*depth+i)*7919%nkeys)
			buf = fmt.Appendf(buf, "*5\r\n$11\r\nCL.THROTTLE\r\n$%d\r\n%s\r\n$2\r\n15\r\n$2\r\n30\r\n$2\r\n60\r\n", len(key), key)
		}
		pipes = append(pipes, buf)
	}
	for k := 0; k < nkeys; k++ { // fill the keyspace
		c.out = c.out[:0]
		s.dispatchLookup(c, bargs("CL.THROTTLE", fmt.Sprintf("ok:%012d", k), "15", "30", "60"))
	}
	st := &connState{hashes: make([]uint64, maxBatchCmds)}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += depth {
		st.buf = pipes[(i/depth)%len(pipes)]
		st.start, st.end = 0, len(st.buf)
		c.out = c.out[:0]
		if err := st.parseBatch(); err != nil || len(st.cmds) != depth {
			b.Fatalf("parsed %d commands, err %v", len(st.cmds), err)
		}
		s.store.Prefetch(st.keys, st.hashes[:len(st.keys)])
		if _, ran, _ := s.runBatch(c, st); !ran {
			b.Fatal("nothing ran")
		}
	}
	b.StopTimer()
	if c.out[0] != '*' {
		b.Fatalf("reply %q", c.out)
	}
}

// runBatch shares one isolation read lock across a batch's ordinary
// commands and gives it up around the commands that manage isolation
// themselves: a multi-command script and EXEC take the write lock in the
// middle of the batch (they would deadlock if the batch still held the
// read lock), and the lock is free after the batch.
func TestBatchIsolationAroundScriptsAndExec(t *testing.T) {
	s, c := newDispatchFixture(t)
	var in []byte
	for _, cmd := range [][]string{
		{"CL.THROTTLE", "k", "15", "30", "60"},
		{"EVAL", "redis.call('SET','a','1') return redis.call('GET','a')", "0"},
		{"CL.THROTTLE", "k", "15", "30", "60"},
		{"MULTI"}, {"SET", "b", "2"}, {"EXEC"},
		{"GET", "b"}, {"NOSUCH"}, {"PING"},
	} {
		in = fmt.Appendf(in, "*%d\r\n", len(cmd))
		for _, a := range cmd {
			in = fmt.Appendf(in, "$%d\r\n%s\r\n", len(a), a)
		}
	}
	st := &connState{buf: in, end: len(in)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := st.parseBatch(); err != nil || len(st.cmds) != 9 {
			t.Errorf("parsed %d commands, err %v", len(st.cmds), err)
			return
		}
		if _, ran, stop := s.runBatch(c, st); !ran || stop {
			t.Errorf("runBatch ran=%v stop=%v", ran, stop)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("batch deadlocked on the isolation lock")
	}
	want := "*5\r\n:0\r\n:16\r\n:15\r\n:-1\r\n:2\r\n" +
		"$1\r\n1\r\n" +
		"*5\r\n:0\r\n:16\r\n:14\r\n:-1\r\n:4\r\n" +
		"+OK\r\n+QUEUED\r\n*1\r\n+OK\r\n" +
		"$1\r\n2\r\n"
	if got := string(c.out); !strings.HasPrefix(got, want) || !strings.HasSuffix(got, "+PONG\r\n") ||
		!strings.Contains(got, "-ERR unknown command 'NOSUCH'") {
		t.Errorf("replies %q, want prefix %q, the unknown-command error and PONG", got, want)
	}
	if c.isoHeld {
		t.Error("isolation still marked held after the batch")
	}
	locked := make(chan struct{})
	go func() { s.iso.lock(); s.iso.unlock(); close(locked) }()
	select {
	case <-locked:
	case <-time.After(10 * time.Second):
		t.Fatal("isolation read lock leaked by the batch")
	}
}

// A writer (EXEC, a script) on other goroutines interleaves with batches
// that share the read lock: neither side deadlocks, and under -race the
// store sees no unsynchronised access.
func TestBatchIsolationWithConcurrentWriter(t *testing.T) {
	s, c := newDispatchFixture(t)
	var in []byte
	for i := 0; i < maxBatchCmds; i++ {
		in = append(in, "*5\r\n$11\r\nCL.THROTTLE\r\n$1\r\nn\r\n$10\r\n1000000000\r\n$1\r\n1\r\n$1\r\n1\r\n"...)
	}
	stop := make(chan struct{})
	var writes atomic.Int64
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			s.iso.lock()
			writes.Add(1)
			s.iso.unlock()
		}
	}()
	// Run batches until the writer has taken the write lock many times
	// in between (at least 300 batches), so the two really interleave.
	deadline := time.After(20 * time.Second)
	st := &connState{}
	rounds := 0
	for ; rounds < 300 || writes.Load() < 100; rounds++ {
		st.buf, st.start, st.end = in, 0, len(in)
		c.out = c.out[:0]
		if err := st.parseBatch(); err != nil {
			t.Fatal(err)
		}
		s.runBatch(c, st)
		select {
		case <-deadline:
			t.Fatalf("after %d batches the writer got the lock %d times", rounds, writes.Load())
		default:
		}
	}
	close(stop)
	c.out = c.out[:0]
	s.dispatchLookup(c, bargs("CL.THROTTLE", "n", "1000000000", "1", "1"))
	// Every call of every batch counted: 1000000001 − (32·rounds + 1) left.
	if want := fmt.Sprintf("*5\r\n:0\r\n:1000000001\r\n:%d\r\n", 1000000001-(maxBatchCmds*rounds+1)); !strings.HasPrefix(string(c.out), want) {
		t.Errorf("last call %q, want prefix %q", c.out, want)
	}
}

// parseBatch has the parsers append arguments straight into st.flat's
// spare room, so a warmed buffer is used in place; a command that does not
// fit is copied in, and every command's arguments come out right either
// way (RESP, inline with a quoted word, and a '$' inline line).
func TestParseBatchArgumentsInPlace(t *testing.T) {
	in := []byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\nECHO \"a b\" c\r\n$x y\r\n")
	big := []byte("*40\r\n")
	var bigWant []string
	for i := 0; i < 40; i++ {
		a := strconv.Itoa(i)
		big = fmt.Appendf(big, "$%d\r\n%s\r\n", len(a), a)
		bigWant = append(bigWant, a)
	}
	st := &connState{flat: make([][]byte, 0, 8)}
	flatArgs := func(i int) []string {
		var out []string
		for _, a := range st.flat[st.cmds[i].off : st.cmds[i].off+st.cmds[i].n] {
			out = append(out, string(a))
		}
		return out
	}
	array := &st.flat[:1][0]
	st.buf, st.start, st.end = in, 0, len(in)
	if err := st.parseBatch(); err != nil || len(st.cmds) != 3 {
		t.Fatalf("parsed %d commands, err %v", len(st.cmds), err)
	}
	if &st.flat[:1][0] != array {
		t.Error("arguments that fit were copied into a new buffer")
	}
	for i, want := range [][]string{{"SET", "k", "v"}, {"ECHO", "a b", "c"}, {"$x", "y"}} {
		if got := flatArgs(i); !slices.Equal(got, want) {
			t.Errorf("command %d: %q, want %q", i, got, want)
		}
	}
	both := append(append([]byte(nil), in...), big...)
	st.buf, st.start, st.end = both, 0, len(both)
	if err := st.parseBatch(); err != nil || len(st.cmds) != 4 {
		t.Fatalf("parsed %d commands, err %v", len(st.cmds), err)
	}
	if got := flatArgs(3); !slices.Equal(got, bigWant) {
		t.Errorf("command that outgrew the buffer: %q", got)
	}
	if got := flatArgs(0); !slices.Equal(got, []string{"SET", "k", "v"}) {
		t.Errorf("first command after the buffer grew: %q", got)
	}
}

// x.wintest is a registered command that decides a window key
// (Command.PrefetchWindow) held in a block unless its second argument is
// "inline", for TestParseBatchWindowKeys.
func init() {
	Register(Command{
		Name: "x.wintest", Arity: -2, Flags: "write fast", FirstKey: 1, LastKey: 1, Step: 1,
		ACL: "write fast", Group: "generic", Since: "1.0.0", Summary: "Test of PrefetchWindow.",
		Run: func(x *Ctx) { x.OK() },
		PrefetchWindow: func(args [][]byte) bool {
			return len(args) < 3 || string(args[2]) != "inline"
		},
	})
}

// TestParseBatchWindowKeys: parseBatch lists in winIdx (for
// Store.PrefetchWith) the index in keys of the first key of every call of a command
// registered with PrefetchWindow for which it reports true, and only
// those, besides listing every command's keys in keys; the next batch
// starts both lists afresh.
func TestParseBatchWindowKeys(t *testing.T) {
	st := &connState{flat: make([][]byte, 0, 8)}
	in := []byte("X.WINTEST a\r\nSET b v\r\nx.wintest c\r\nX.APITEST d\r\nx.wintest e inline\r\nPING\r\n")
	st.buf, st.start, st.end = in, 0, len(in)
	if err := st.parseBatch(); err != nil || len(st.cmds) != 6 {
		t.Fatalf("parsed %d commands, err %v", len(st.cmds), err)
	}
	str := func(bs [][]byte) (out []string) {
		for _, b := range bs {
			out = append(out, string(b))
		}
		return out
	}
	if got, want := str(st.keys), []string{"a", "b", "c", "d", "e"}; !slices.Equal(got, want) {
		t.Errorf("keys %q, want %q", got, want)
	}
	var win []string
	for _, i := range st.winIdx {
		win = append(win, string(st.keys[i]))
	}
	if want := []string{"a", "c"}; !slices.Equal(win, want) {
		t.Errorf("winIdx names %q, want %q", win, want)
	}
	in = []byte("SET e v\r\n")
	st.buf, st.start, st.end = in, 0, len(in)
	if err := st.parseBatch(); err != nil || len(st.cmds) != 1 {
		t.Fatalf("parsed %d commands, err %v", len(st.cmds), err)
	}
	if len(st.winIdx) != 0 {
		t.Errorf("winIdx %v after a batch without window commands", st.winIdx)
	}
}
