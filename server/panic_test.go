package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/celld/celld/internal/testutil"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/celld/celld/store"
)

// startServer runs a Server on 127.0.0.1:0 and shuts it down (waiting for
// Serve to return) when the test ends.
func startServer(t testing.TB, logw io.Writer) (*Server, string) {
	t.Helper()
	return startServerConfig(t, logw, Config{})
}

// startServerConfig is startServer with cfg (Addr and Logger are set here).
func startServerConfig(t testing.TB, logw io.Writer, cfg Config) (*Server, string) {
	t.Helper()
	if logw == nil {
		logw = io.Discard
	}
	cfg.Addr = "127.0.0.1:0"
	cfg.Logger = slog.New(slog.NewTextHandler(logw, nil))
	s, err := New(cfg, store.New(store.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	t.Cleanup(func() {
		// Shutdown waits for every connection goroutine; one stuck on a
		// lock would hang it forever, so give up (and leak) after a while
		// rather than hang the whole test binary.
		shut := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			shut <- s.Shutdown(ctx)
		}()
		select {
		case err := <-shut:
			if err != nil {
				t.Errorf("Shutdown: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Shutdown did not return: a connection goroutine is stuck; server leaked")
			return
		}
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return after Shutdown")
		}
	})
	return s, ln.Addr().String()
}

// rawConn is a RESP client over a plain net.Conn.
type rawConn struct {
	t  *testing.T
	c  net.Conn
	rd *bufio.Reader
}

func dial(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return &rawConn{t: t, c: c, rd: bufio.NewReader(c)}
}

func encode(args ...string) []byte {
	b := fmt.Appendf(nil, "*%d\r\n", len(args))
	for _, a := range args {
		b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b
}

// send writes one or more commands in a single write (one pipeline).
func (r *rawConn) send(cmds ...[]string) {
	r.t.Helper()
	var b []byte
	for _, c := range cmds {
		b = append(b, encode(c...)...)
	}
	if _, err := r.c.Write(b); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

// reply reads one RESP2 reply and renders it as text: "+OK", "-ERR x",
// ":1", "$-1", the bulk string itself, or "[a b]" for arrays (and RESP3's
// maps, flattened); RESP3's pushes render as ">[a b]".
func (r *rawConn) reply() (string, error) {
	line, err := r.rd.ReadString('\n')
	if err != nil {
		return "", err
	}
	if !strings.HasSuffix(line, "\r\n") {
		return "", fmt.Errorf("line without CRLF: %q", line)
	}
	line = line[:len(line)-2]
	switch line[0] {
	case '+', '-', ':':
		return line, nil
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return "$-1", nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r.rd, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case '*', '>', '%': // RESP3's pushes render as ">[...]", maps as "[k v ...]"
		n, _ := strconv.Atoi(line[1:])
		if line[0] == '%' {
			n *= 2
		}
		parts := make([]string, 0, n)
		for i := 0; i < n; i++ {
			p, err := r.reply()
			if err != nil {
				return "", err
			}
			parts = append(parts, p)
		}
		if line[0] == '>' {
			return ">[" + strings.Join(parts, " ") + "]", nil
		}
		return "[" + strings.Join(parts, " ") + "]", nil
	}
	return "", fmt.Errorf("unknown reply type %q", line)
}

func (r *rawConn) mustReply() string {
	r.t.Helper()
	s, err := r.reply()
	if err != nil {
		r.t.Fatalf("reading reply: %v", err)
	}
	return s
}

// expectEOF asserts the server closed the connection with nothing more to
// say.
func (r *rawConn) expectEOF() {
	r.t.Helper()
	rest, err := io.ReadAll(r.rd)
	if len(rest) > 0 {
		r.t.Errorf("after close: unexpected bytes %q", rest)
	}
	if err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
		r.t.Errorf("waiting for close: %v", err)
	}
}

// registerPanicCommand adds "test.panic" to the dispatch table for one
// test. The id of the last client that ran it is stored in lastID.
func registerPanicCommand(t *testing.T) (lastID *atomic.Int64) {
	t.Helper()
	const name = "test.panic"
	if _, dup := commands[name]; dup {
		t.Fatalf("%s already registered", name)
	}
	lastID = new(atomic.Int64)
	commands[name] = &command{
		name:  name,
		arity: -1,
		run: func(_ *Server, c *client, _ [][]byte) {
			lastID.Store(c.id)
			panic("boom from test.panic")
		},
	}
	t.Cleanup(func() { delete(commands, name) })
	return lastID
}

// waitClientsGone waits until the server has unregistered every connection,
// i.e. the loop of each has returned (and with it, every command it had
// read).
func waitClientsGone(t *testing.T, s *Server) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.mu.Lock()
		n := len(s.clients)
		s.mu.Unlock()
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still registered", n)
		}
		time.Sleep(time.Millisecond)
	}
}

func infoField(info, field string) string {
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v
		}
	}
	return ""
}

func TestHandlerPanicClosesOnlyThatConnection(t *testing.T) {
	registerPanicCommand(t)
	logs := &testutil.Buffer{}
	_, addr := startServer(t, logs)

	c1 := dial(t, addr)
	c1.send([]string{"TEST.PANIC", "x"})
	if got := c1.mustReply(); got != "-ERR internal error" {
		t.Fatalf("panicking command: reply %q", got)
	}
	c1.expectEOF()

	c2 := dial(t, addr)
	c2.send([]string{"PING"})
	if got := c2.mustReply(); got != "+PONG" {
		t.Fatalf("second connection: %q", got)
	}
	c2.send([]string{"INFO", "stats"})
	info := c2.mustReply()
	if v := infoField(info, "handler_panics"); v != "1" {
		t.Errorf("INFO stats handler_panics = %q, want 1\n%s", v, info)
	}
	if !strings.Contains(logs.String(), "boom from test.panic") {
		t.Errorf("panic not logged; log:\n%s", logs.String())
	}
}

// TestHandlerPanicStopsThePipeline: commands pipelined after the one that
// panicked must not run: the connection is closed, even though the rest of
// the pipeline was read in the same read.
func TestHandlerPanicStopsThePipeline(t *testing.T) {
	registerPanicCommand(t)
	s, addr := startServer(t, nil)

	c1 := dial(t, addr)
	c1.send([]string{"TEST.PANIC"}, []string{"SET", "after:panic", "1"}, []string{"PING"})
	if got := c1.mustReply(); got != "-ERR internal error" {
		t.Fatalf("reply %q", got)
	}
	c1.expectEOF()
	waitClientsGone(t, s) // the server side has finished with c1's pipeline

	c2 := dial(t, addr)
	c2.send([]string{"EXISTS", "after:panic"})
	if got := c2.mustReply(); got != ":0" {
		t.Errorf("SET pipelined after a panicking command was executed on the closed connection (EXISTS = %s)", got)
	}
}

// TestQuitStopsThePipeline: as in Redis (CLIENT_CLOSE_AFTER_REPLY stops
// processInputBuffer), nothing pipelined after QUIT runs.
func TestQuitStopsThePipeline(t *testing.T) {
	s, addr := startServer(t, nil)

	c1 := dial(t, addr)
	c1.send([]string{"QUIT"}, []string{"SET", "after:quit", "1"},
		[]string{"CL.THROTTLE", "after:quit:throttle", "0", "1", "60"})
	if got := c1.mustReply(); got != "+OK" {
		t.Fatalf("QUIT: %q", got)
	}
	c1.expectEOF()
	waitClientsGone(t, s)

	c2 := dial(t, addr)
	c2.send([]string{"EXISTS", "after:quit", "after:quit:throttle"})
	if got := c2.mustReply(); got != ":0" {
		t.Errorf("commands pipelined after QUIT were executed (EXISTS = %s)", got)
	}
}

// TestHandlerPanicReleasesIsolationLock: dispatch takes the isolation read
// lock (s.iso.rlock) around s.run and releases it with a plain call, not a
// defer, so a command that panics leaves its read lock held for good. The
// next EXEC (which takes the write lock of every slot) then waits forever,
// and with a writer waiting, every later command on that slot blocks too:
// one panic hangs the server. After a recovered panic, MULTI/EXEC on
// another connection must still work.
func TestHandlerPanicReleasesIsolationLock(t *testing.T) {
	lastID := registerPanicCommand(t)
	s, addr := startServer(t, nil)

	c1 := dial(t, addr)
	c1.send([]string{"TEST.PANIC"})
	if got := c1.mustReply(); got != "-ERR internal error" {
		t.Fatalf("reply %q", got)
	}
	c1.expectEOF()

	// One command per write: the server flushes replies only after the
	// whole pipeline it read has run.
	c2 := dial(t, addr)
	c2.send([]string{"MULTI"})
	if got := c2.mustReply(); got != "+OK" {
		t.Fatalf("MULTI: %q", got)
	}
	c2.send([]string{"PING"})
	if got := c2.mustReply(); got != "+QUEUED" {
		t.Fatalf("PING in MULTI: %q", got)
	}
	c2.send([]string{"EXEC"})
	c2.c.SetReadDeadline(time.Now().Add(3 * time.Second))
	got, err := c2.reply()
	if err != nil {
		t.Errorf("EXEC after a recovered panic: no reply in 3 s (%v): the panicking command's "+
			"isolation read lock was never released (dispatch.go: s.iso.rlock / s.run / s.iso.runlock without defer)", err)
		// Release the leaked read lock so the server can shut down.
		s.iso.runlock(lastID.Load())
		c2.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		got = c2.mustReply()
	} else if got != "[+PONG]" {
		t.Errorf("EXEC: %q", got)
	}
	c2.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	c2.send([]string{"PING"})
	if got := c2.mustReply(); got != "+PONG" {
		t.Errorf("PING after EXEC: %q", got)
	}
}

// TestExecuteAfterCloseRunsNothing is the deterministic form of the two
// pipeline tests above: once a command has closed the connection (QUIT, or
// a recovered panic), execute runs nothing more for it, even if called
// (serveConn also stops parsing the batch it has read).
func TestExecuteAfterCloseRunsNothing(t *testing.T) {
	registerPanicCommand(t)
	s, _ := newDispatchFixture(t)

	// QUIT, then SET on the same connection in the same batch.
	c := newFakeClient(t, s)
	s.executeLookup(c, bargs("QUIT"))
	if !c.closed || string(c.out) != "+OK\r\n" {
		t.Fatalf("after QUIT: closed %v, out %q", c.closed, c.out)
	}
	s.executeLookup(c, bargs("SET", "after:quit", "1"))
	if _, ok := s.store.Get([]byte("after:quit"), s.nowMs()); ok {
		t.Errorf("SET after QUIT (same pipeline) was executed; replies written: %q", c.out)
	}

	// A panic, then SET. The panicking command's reply so far is replaced
	// by the error; the replies before it stay.
	c = newFakeClient(t, s)
	s.executeLookup(c, bargs("PING"))
	s.executeLookup(c, bargs("TEST.PANIC"))
	if !c.closed || string(c.out) != "+PONG\r\n-ERR internal error\r\n" {
		t.Fatalf("after panic: closed %v, out %q", c.closed, c.out)
	}
	s.executeLookup(c, bargs("SET", "after:panic", "1"))
	if _, ok := s.store.Get([]byte("after:panic"), s.nowMs()); ok {
		t.Errorf("SET after a panic (same pipeline) was executed; replies written: %q", c.out)
	}
}

// TestExecutePanicReleasesIsolationReadLock is the deterministic form of
// TestHandlerPanicReleasesIsolationLock: after a recovered panic, the
// isolation slot of the panicking client must be free for a writer.
func TestExecutePanicReleasesIsolationReadLock(t *testing.T) {
	lastID := registerPanicCommand(t)
	s, _ := newDispatchFixture(t)
	c := newFakeClient(t, s)
	s.executeLookup(c, bargs("TEST.PANIC"))
	if string(c.out) != "-ERR internal error\r\n" {
		t.Fatalf("out %q", c.out)
	}
	id := lastID.Load()
	slot := &s.iso.slots[id%isoSlots]
	if !slot.TryLock() {
		t.Errorf("isolation slot %d is still read-locked after the panic of client %d: "+
			"dispatch does s.iso.rlock(c.id); s.run(...); s.iso.runlock(c.id) without a defer", id%isoSlots, id)
		slot.RUnlock() // release the leaked read lock
		return
	}
	slot.Unlock()
}
