package server

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/redcon"
)

// pipelineConn is a client connection that sends a fixed pipeline and
// reads its replies without allocating, for measuring the server's
// allocations over a real loopback connection.
type pipelineConn struct {
	tb    testing.TB
	c     net.Conn
	req   []byte
	lines int // '\n' in the replies to one req
	buf   []byte
}

func newPipelineConn(tb testing.TB, addr string, cmd []string, depth, replyLines int) *pipelineConn {
	tb.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	p := &pipelineConn{tb: tb, c: c, lines: depth * replyLines, buf: make([]byte, 64<<10)}
	for range depth {
		p.req = append(p.req, encode(cmd...)...)
	}
	return p
}

// round sends the pipeline once and reads every reply.
func (p *pipelineConn) round() {
	if _, err := p.c.Write(p.req); err != nil {
		p.tb.Fatal(err)
	}
	for seen := 0; seen < p.lines; {
		n, err := p.c.Read(p.buf)
		if err != nil {
			p.tb.Fatal(err)
		}
		seen += bytes.Count(p.buf[:n], []byte{'\n'})
	}
}

// mallocs returns the process's allocation count so far.
func mallocs() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Mallocs
}

// TestConnPipelineZeroAllocs pins zero allocations per command, in steady
// state, for CL.THROTTLE (an existing key, allowed) and PING sent 16 at a
// time over a real loopback connection: read, parse, dispatch, reply and
// write, server and client together (the client side does not allocate).
func TestConnPipelineZeroAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("timing-free but slow under -short")
	}
	_, addr := startServer(t, nil)
	const depth, rounds = 16, 2000
	for _, tc := range []struct {
		cmd   []string
		lines int
	}{
		{[]string{"CL.THROTTLE", "alloc:key", "1000000000000", "1000", "1"}, 6},
		{[]string{"PING"}, 1},
	} {
		p := newPipelineConn(t, addr, tc.cmd, depth, tc.lines)
		for range 200 { // warm up: buffers grown, key created
			p.round()
		}
		// AllocsPerRun rounds down to whole allocations per run; count
		// them all instead. A few may come from the runtime or the expiry
		// sweep, so allow a handful over rounds*depth commands.
		runtime.GC()
		before := mallocs()
		for range rounds {
			p.round()
		}
		total := mallocs() - before
		perCmd := float64(total) / float64(rounds*depth)
		t.Logf("%s: %d allocations over %d commands (%.5f per command)", tc.cmd[0], total, rounds*depth, perCmd)
		if total > 20 {
			t.Errorf("%s over a pipelined connection: %d allocations for %d commands, want 0 in steady state",
				tc.cmd[0], total, rounds*depth)
		}
	}
}

func benchmarkConnPipeline(b *testing.B, cmd []string, replyLines int) {
	_, addr := startServer(b, nil)
	const depth = 16
	p := newPipelineConn(b, addr, cmd, depth, replyLines)
	for range 100 {
		p.round()
	}
	b.ReportAllocs()
	b.ResetTimer()
	// One op is one command: b.N is rounded up to whole pipelines.
	for i := 0; i < b.N; i += depth {
		p.round()
	}
}

// BenchmarkConnPipelineThrottle: CL.THROTTLE over a loopback connection,
// 16 commands per pipeline (redis-benchmark -P 16, one client); allocs/op
// are per command, server and client together.
func BenchmarkConnPipelineThrottle(b *testing.B) {
	benchmarkConnPipeline(b, []string{"CL.THROTTLE", "bench:key", "1000000000000", "1000", "1"}, 6)
}

// BenchmarkConnPipelinePing: PING, as above.
func BenchmarkConnPipelinePing(b *testing.B) {
	benchmarkConnPipeline(b, []string{"PING"}, 1)
}

// Inline commands parse as redcon's Reader parses them: readInline (used
// for lines starting with '$') and redcon.ReadNextCommand (the others)
// against redcon.Reader, which the server used before.
func TestInlineParsingMatchesRedconReader(t *testing.T) {
	lines := []string{
		"PING", "ping  a   b ", "  lead", "a b c", `"quoted arg" x`, `'single' "double"`,
		`"esc\n\r\t\\\"x"`, `"" ''`, `"unterminated`, `a"b`, `"a"b`, `"a" b"`, `'it''s'`,
		"", " ", "  ", "tab\tinside", `"\q"`, `"a\`, `x "y z" w`, `"a" `, `"a"  "b"`,
		"trailing ", "CL.THROTTLE user:1 15 30 60",
	}
	for _, l := range lines {
		for _, lead := range []string{"", "$", "$1 ", "$$"} {
			for _, eol := range []string{"\r\n", "\n"} {
				in := lead + l + eol
				if in[0] == '*' {
					continue
				}
				want, wantErr := redconReaderArgs(in)
				var got [][]byte
				var gotErr error
				var complete bool
				var rest []byte
				if in[0] == '$' {
					complete, got, rest, gotErr = readInline([]byte(in+"NEXT"), nil)
				} else {
					complete, got, _, rest, gotErr = redcon.ReadNextCommand([]byte(in+"NEXT"), nil)
				}
				if (gotErr != nil) != (wantErr != nil) || (gotErr != nil && gotErr.Error() != wantErr.Error()) {
					t.Errorf("%q: error %v, redcon.Reader %v", in, gotErr, wantErr)
					continue
				}
				if gotErr != nil {
					continue
				}
				if !complete || string(rest) != "NEXT" {
					t.Errorf("%q: complete %v, rest %q", in, complete, rest)
				}
				if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
					t.Errorf("%q: args %q, redcon.Reader %q", in, got, want)
				}
			}
		}
	}
	// Incomplete lines.
	for _, in := range []string{"$", "$abc", "$abc\r"} {
		if complete, _, _, err := readInline([]byte(in), nil); complete || err != nil {
			t.Errorf("%q: complete %v, err %v", in, complete, err)
		}
	}
}

// redconReaderArgs is what redcon.Reader reads from one inline line (nil
// args for a blank line, which it skips).
func redconReaderArgs(line string) ([][]byte, error) {
	rd := redcon.NewReader(strings.NewReader(line + "PING\r\n"))
	cmd, err := rd.ReadCommand()
	if err != nil {
		return nil, err
	}
	if len(cmd.Args) == 1 && string(cmd.Args[0]) == "PING" && !strings.Contains(line, "PING") {
		return nil, nil // the line was blank: this is the next command
	}
	return cmd.Args, nil
}

// A command larger than the read buffer, sent whole or a few bytes at a
// time, and a pipeline whose replies exceed the early-write threshold.
func TestConnLargeCommandsAndPipelines(t *testing.T) {
	_, addr := startServer(t, nil)
	r := dial(t, addr)

	big := strings.Repeat("x", 1<<20)
	r.send([]string{"ECHO", big}, []string{"PING"}, []string{"ECHO", "after"})
	for _, want := range []string{big, "+PONG", "after"} {
		if got := r.mustReply(); got != want {
			t.Fatalf("reply %.40q..., want %.40q...", got, want)
		}
	}

	// Trickled: the buffer grows while the command arrives, then shrinks.
	req := append(encode("ECHO", strings.Repeat("y", 100<<10)), encode("PING")...)
	go func() {
		for len(req) > 0 {
			n := min(len(req), 7000)
			if _, err := r.c.Write(req[:n]); err != nil {
				return
			}
			req = req[n:]
			time.Sleep(time.Millisecond)
		}
	}()
	if got := r.mustReply(); got != strings.Repeat("y", 100<<10) {
		t.Fatalf("trickled ECHO: %d bytes", len(got))
	}
	if got := r.mustReply(); got != "+PONG" {
		t.Fatalf("after trickled ECHO: %q", got)
	}

	// 30,000 PINGs in one write: about 210 KB of replies, written in
	// parts while the pipeline runs, all in order.
	var pipe []byte
	for i := range 30000 {
		pipe = append(pipe, encode("ECHO", strconv.Itoa(i))...)
	}
	go r.c.Write(pipe)
	for i := range 30000 {
		if got := r.mustReply(); got != strconv.Itoa(i) {
			t.Fatalf("reply %d: %q", i, got)
		}
	}
}

// Without the guard, an invalid stream is answered with redcon's protocol
// error text after the replies to the commands before it, then closed.
func TestConnProtocolErrorWithoutGuard(t *testing.T) {
	_, addr := startServer(t, nil)
	for _, tc := range []struct{ in, want string }{
		{"PING\r\n*1\r\n$x\r\n", "-ERR Protocol error: invalid bulk length"},
		{"*1\r\n$4\r\nPING\r\n*x\r\n", "-ERR Protocol error: invalid multibulk length"},
		{"PING\r\n*1\r\n+PING\r\n", "-ERR Protocol error: expected '$', got '+'"},
		{"PING\r\n\"unbalanced\r\n", "-ERR Protocol error: unbalanced quotes in request"},
		{"PING\r\n$x \"y\r\n", "-ERR Protocol error: unbalanced quotes in request"},
	} {
		r := dial(t, addr)
		if _, err := io.WriteString(r.c, tc.in); err != nil {
			t.Fatal(err)
		}
		if got := r.mustReply(); got != "+PONG" {
			t.Errorf("%q: first reply %q", tc.in, got)
		}
		if got := r.mustReply(); got != tc.want {
			t.Errorf("%q: %q, want %q", tc.in, got, tc.want)
		}
		r.expectEOF()
	}
}

// Inline commands, blank lines and "*0" between commands.
func TestConnInlineAndEmptyCommands(t *testing.T) {
	_, addr := startServer(t, nil)
	r := dial(t, addr)
	io.WriteString(r.c, "PING\r\n\r\n  \r\n*0\r\necho \"a b\"\n$x y\r\n*1\r\n$4\r\nPING\r\n")
	for _, want := range []string{"+PONG", "a b",
		"-ERR unknown command '$x', with args beginning with: 'y' ", "+PONG"} {
		if got := r.mustReply(); got != want {
			t.Errorf("reply %q, want %q", got, want)
		}
	}
}

// total_commands_processed counts every command run or queued, as Redis
// counts calls: not the commands refused before running (arity, unknown),
// nor the INFO reading it (counted when it returns); those of closed
// connections stay counted; no shared counter on the hot path.
func TestTotalCommandsProcessed(t *testing.T) {
	s, addr := startServer(t, nil)
	total := func(r *rawConn) int64 {
		t.Helper()
		r.send([]string{"INFO", "stats"})
		n, err := strconv.ParseInt(infoField(r.mustReply(), "total_commands_processed"), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	a := dial(t, addr)
	if got := total(a); got != 0 {
		t.Fatalf("first INFO: %d, want 0", got)
	}
	// One pipeline: run, rejected (arity, unknown), queued, EXEC, INFO.
	a.send([]string{"PING"}, []string{"GET"}, []string{"NOPE"}, []string{"MULTI"},
		[]string{"PING"}, []string{"EXEC"}, []string{"INFO", "stats"})
	for range 6 {
		a.mustReply()
	}
	if got := infoField(a.mustReply(), "total_commands_processed"); got != "5" {
		t.Fatalf("after the first INFO and a pipeline of 4 counted: %s, want 5", got)
	}
	b := dial(t, addr)
	b.send([]string{"PING"}, []string{"PING"})
	b.mustReply()
	b.mustReply()
	b.c.Close()
	waitFor(t, func() bool { return s.clientCount() == 1 })
	if got := total(a); got != 8 {
		t.Fatalf("after a closed connection's 2: %d, want 8", got)
	}
	if got := s.Stats().CommandsProcessed; got != 9 {
		t.Fatalf("Stats().CommandsProcessed = %d, want 9 (the last INFO included)", got)
	}
}

func (s *Server) clientCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.clients)
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// readResp3 reads one RESP3 value and renders it as text: pushes as
// "push[...]", maps and arrays as "[...]", nulls as "null".
func readResp3(rd *bufio.Reader) (string, error) {
	line, err := rd.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	switch line[0] {
	case '+', '-', ':', '#', ',':
		return line, nil
	case '_':
		return "null", nil
	case '$', '=':
		n, _ := strconv.Atoi(line[1:])
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(rd, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case '*', '%', '~', '>':
		n, _ := strconv.Atoi(line[1:])
		if line[0] == '%' {
			n *= 2
		}
		parts := make([]string, 0, n)
		for range n {
			p, err := readResp3(rd)
			if err != nil {
				return "", err
			}
			parts = append(parts, p)
		}
		if line[0] == '>' {
			return "push[" + strings.Join(parts, " ") + "]", nil
		}
		return "[" + strings.Join(parts, " ") + "]", nil
	}
	return "", fmt.Errorf("unknown reply type %q", line)
}

// A pipeline whose replies are written in parts (past maxBatchOut) keeps
// the connection busy for pushes until its last reply: the invalidation
// caused by the pipeline's own SET comes after the SET's reply, never
// between the replies written early.
func TestTrackingPushFollowsLongPipeline(t *testing.T) {
	_, addr := startServer(t, nil)
	r := dial(t, addr)
	rd := bufio.NewReader(r.c)
	r.send([]string{"HELLO", "3"}, []string{"CLIENT", "TRACKING", "ON"})
	for range 2 {
		if _, err := readResp3(rd); err != nil {
			t.Fatal(err)
		}
	}
	// Replies larger than the requests, so that one read's pipeline
	// (16 KiB at most) answers with several early writes, before and
	// after the SET.
	const infos = 40
	pipe := encode("GET", "tk")
	for range infos {
		pipe = append(pipe, encode("INFO", "everything")...)
	}
	pipe = append(pipe, encode("SET", "tk", "1")...)
	for range infos {
		pipe = append(pipe, encode("INFO", "everything")...)
	}
	pipe = append(pipe, encode("ECHO", "last")...)
	if len(pipe) > readBufSize {
		t.Fatalf("pipeline of %d bytes does not fit one read", len(pipe))
	}
	go r.c.Write(pipe)
	want := []string{"null"}
	for range infos {
		want = append(want, "INFO")
	}
	want = append(want, "+OK")
	for range infos {
		want = append(want, "INFO")
	}
	want = append(want, "last", "push[invalidate [tk]]")
	size := 0
	for i, w := range want {
		got, err := readResp3(rd)
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		if w == "INFO" && strings.Contains(got, "# Server") {
			size += len(got)
			continue
		}
		if got != w {
			t.Fatalf("reply %d: %.60q, want %q", i, got, w)
		}
	}
	if size < 2*maxBatchOut {
		t.Errorf("INFO replies total %d bytes: too few for several early writes", size)
	}
}

// TestConnBatchesAcrossPipeline: commands are parsed in batches of
// maxBatchCmds before they run (so the store can prefetch their keys); a
// pipeline several batches long, mixing RESP and inline commands and
// CL.THROTTLE calls whose replies depend on the ones before (the same key
// again and again, so each call must see the previous one's write), is
// answered in order, and a protocol error in the middle of a batch comes
// after every command before it and ends the connection.
func TestConnBatchesAcrossPipeline(t *testing.T) {
	_, addr := startServer(t, nil)
	r := dial(t, addr)
	var in []byte
	var want []string
	const n = 3*maxBatchCmds + 7
	for i := range n {
		switch i % 3 {
		case 0:
			in = append(in, encode("CL.THROTTLE", "batch:k", "100", "1", "3600")...)
			want = append(want, fmt.Sprintf("[:0 :101 :%d :-1 :%d]", 100-i/3, 3600*(i/3+1)))
		case 1:
			in = fmt.Appendf(in, "ECHO inline%d\r\n", i)
			want = append(want, fmt.Sprintf("inline%d", i))
		case 2:
			in = append(in, encode("cl.throttle", fmt.Sprintf("batch:%d", i), "5", "1", "60")...)
			want = append(want, "[:0 :6 :5 :-1 :60]")
		}
	}
	in = append(in, "*1\r\n$x\r\n"...)
	in = append(in, encode("PING")...) // after the error: never runs
	if _, err := r.c.Write(in); err != nil {
		t.Fatal(err)
	}
	for i, w := range want {
		if got := r.mustReply(); got != w {
			t.Fatalf("reply %d = %q, want %q", i, got, w)
		}
	}
	if got := r.mustReply(); got != "-ERR Protocol error: invalid bulk length" {
		t.Fatalf("after %d replies: %q, want the protocol error", n, got)
	}
	r.expectEOF()
}
