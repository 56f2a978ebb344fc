// Package compat_test drives a real celld server over a real socket with the
// clients users run (go-redis, rueidis, redigo), checking replies against
// the CL.THROTTLE contract and Redis 7's behaviour.
package compat_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/celld/celld/data" // the string and key commands, as main registers them
	"github.com/celld/celld/server"
	"github.com/celld/celld/store"
	redigo "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// testServer is a celld on 127.0.0.1:0 with an optional controllable clock.
type testServer struct {
	Addr  string
	Srv   *server.Server
	Store *store.Store
	clock *atomic.Int64 // ns since the epoch; nil = wall clock
}

// Now returns the server's current time in ns.
func (ts *testServer) Now() int64 {
	if ts.clock == nil {
		return time.Now().UnixNano()
	}
	return ts.clock.Load()
}

// Advance moves a fake clock forward by d.
func (ts *testServer) Advance(d time.Duration) { ts.clock.Add(int64(d)) }

type option func(*server.Config, *testServer)

// withFakeClock makes the server's clock a counter starting at start ns that
// only tests move.
func withFakeClock(start int64) option {
	return func(c *server.Config, ts *testServer) {
		ts.clock = new(atomic.Int64)
		ts.clock.Store(start)
		clk := ts.clock
		c.Clock = func() int64 { return clk.Load() }
	}
}

// startServer starts an in-process celld and registers its shutdown with
// t.Cleanup, the httptest way.
func startServer(t testing.TB, opts ...option) *testServer {
	t.Helper()
	ts := &testServer{Store: store.New(store.Options{})}
	cfg := server.Config{Addr: "127.0.0.1:0"}
	for _, o := range opts {
		o(&cfg, ts)
	}
	srv, err := server.New(cfg, ts.Store)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts.Srv, ts.Addr = srv, ln.Addr().String()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return ts
}

// ---------------------------------------------------------------------------
// Transcripts: a test is a list of command → reply steps run by one helper
// that reports "step %d:" (the throttled/golang-time rate_test style), so a
// failure names the exact exchange that went wrong.

// t0 is the fake clock's start: a whole millisecond, so that a handful of 1 µs
// ticks never cross a millisecond boundary, and late enough that stored TATs
// have 19 decimal digits.
const t0 = int64(1_700_000_000_000_000_000)

// tick is how far the fake clock moves before every command of a transcript:
// the spec's worked examples are "calls back to back", here 1 µs apart.
const tick = time.Microsecond

// errText is an error reply: the text after the leading '-'.
type errText string

// step is one exchange: cmd is sent, want is the normalised reply. Replies
// normalise to int64, string (bulk, simple and verbatim strings), nil (null),
// []any, map[string]any, bool, float64 or errText.
type step struct {
	cmd  []any
	want any
}

// clockMove is a pseudo-command: a step whose cmd is advance(d) moves the fake
// clock and sends nothing.
type clockMove time.Duration

// advance returns a step that moves the fake clock by d.
func advance(d time.Duration) step { return step{cmd: []any{clockMove(d)}} }

// c splits a command written as one line into its arguments. Arguments with
// spaces or binary bytes are written as []any literals instead.
func c(line string) []any {
	f := strings.Fields(line)
	out := make([]any, len(f))
	for i, s := range f {
		out[i] = s
	}
	return out
}

// th is a CL.THROTTLE reply: limited, limit, remaining, retry_after, reset_after.
func th(limited, limit, remaining, retry, reset int64) []any {
	return []any{limited, limit, remaining, retry, reset}
}

// do sends one command and returns its normalised reply; error replies come
// back as errText, and only transport failures as err.
type do func(args ...any) (any, error)

// runSteps runs a transcript. Before each command the fake clock (if any)
// moves by tick.
func runSteps(t *testing.T, ts *testServer, send do, steps []step) {
	t.Helper()
	for i, st := range steps {
		if len(st.cmd) == 1 {
			if d, ok := st.cmd[0].(clockMove); ok {
				ts.Advance(time.Duration(d))
				continue
			}
		}
		if ts.clock != nil {
			ts.Advance(tick)
		}
		got, err := send(st.cmd...)
		if err != nil {
			t.Fatalf("step %d: %s: transport error: %v", i, show(st.cmd), err)
		}
		if !reflect.DeepEqual(got, st.want) {
			t.Errorf("step %d: %s\n got: %s\nwant: %s", i, show(st.cmd), show(got), show(st.want))
		}
	}
}

// show prints a command or reply unambiguously (%q for strings).
func show(v any) string {
	switch v := v.(type) {
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = show(e)
		}
		return "[" + strings.Join(parts, " ") + "]"
	case string:
		return strconv.Quote(v)
	case []byte:
		return strconv.Quote(string(v))
	case errText:
		return "(error) " + strconv.Quote(string(v))
	case nil:
		return "(nil)"
	default:
		return fmt.Sprintf("%v", v)
	}
}

// norm turns a client's reply value into the transcript's vocabulary.
func norm(v any) any {
	switch v := v.(type) {
	case []byte:
		return string(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = norm(e)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[fmt.Sprint(norm(k))] = norm(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = norm(e)
		}
		return out
	case int:
		return int64(v)
	case redis.Error: // go-redis error inside an array (EXEC)
		return errText(v.Error())
	case redigo.Error:
		return errText(string(v))
	case *rueidis.RedisError:
		return errText(v.Error())
	case error:
		return errText(v.Error())
	}
	return v
}

var ctx = context.Background()

// ---------------------------------------------------------------------------
// Clients. Each constructor closes its client in t.Cleanup.

// newGoRedis returns a go-redis v9 client with default options (RESP3: it
// sends HELLO 3 and CLIENT SETINFO on connect), changed only by mods.
func newGoRedis(t testing.TB, ts *testServer, mods ...func(*redis.Options)) *redis.Client {
	t.Helper()
	opt := &redis.Options{Addr: ts.Addr}
	for _, m := range mods {
		m(opt)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// resp2 makes a go-redis client speak RESP2 (HELLO 2).
func resp2(o *redis.Options) { o.Protocol = 2 }

// goRedisDo adapts a go-redis client (or Conn) to a transcript.
func goRedisDo(rdb doer) do {
	return func(args ...any) (any, error) {
		return goRedisReply(rdb.Do(ctx, args...).Result())
	}
}

func goRedisReply(v any, err error) (any, error) {
	if err == redis.Nil {
		return nil, nil
	}
	var re redis.Error
	if errors.As(err, &re) {
		return errText(re.Error()), nil
	}
	if err != nil {
		return nil, err
	}
	return norm(v), nil
}

// newRueidis returns a rueidis client with client-side caching off, so
// replies always come from the server (tracking_test.go turns it on).
func newRueidis(t testing.TB, ts *testServer, mods ...func(*rueidis.ClientOption)) rueidis.Client {
	t.Helper()
	opt := rueidis.ClientOption{InitAddress: []string{ts.Addr}, DisableCache: true}
	for _, m := range mods {
		m(&opt)
	}
	cl, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatalf("rueidis.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func rueidisDo(cl rueidis.Client) do {
	return func(args ...any) (any, error) {
		s := make([]string, len(args))
		for i, a := range args {
			s[i] = argString(a)
		}
		return rueidisReply(cl.Do(ctx, cl.B().Arbitrary(s...).Build()).ToAny())
	}
}

func rueidisReply(v any, err error) (any, error) {
	if rueidis.IsRedisNil(err) {
		return nil, nil
	}
	if re, ok := rueidis.IsRedisErr(err); ok {
		return errText(re.Error()), nil
	}
	if err != nil {
		return nil, err
	}
	return norm(v), nil
}

func argString(a any) string {
	switch a := a.(type) {
	case string:
		return a
	case []byte:
		return string(a)
	default:
		return fmt.Sprint(a)
	}
}

// newRedigo dials a redigo connection (RESP2).
func newRedigo(t testing.TB, ts *testServer) redigo.Conn {
	t.Helper()
	conn, err := redigo.Dial("tcp", ts.Addr)
	if err != nil {
		t.Fatalf("redigo.Dial: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func redigoDo(conn redigo.Conn) do {
	return func(args ...any) (any, error) {
		if len(args) == 0 {
			return nil, errors.New("empty command")
		}
		v, err := conn.Do(argString(args[0]), args[1:]...)
		var re redigo.Error
		if errors.As(err, &re) {
			return errText(string(re)), nil
		}
		if err != nil {
			return nil, err
		}
		return norm(v), nil
	}
}

// ---------------------------------------------------------------------------
// Raw sockets, for byte-exact framing.

type rawConn struct {
	t    testing.TB
	conn net.Conn
	r    *bufio.Reader
	// timeout bounds each write and read; 0 means 10 s.
	timeout time.Duration
}

// deadline is now plus rc's timeout.
func (rc *rawConn) deadline() time.Time {
	if rc.timeout > 0 {
		return time.Now().Add(rc.timeout)
	}
	return time.Now().Add(10 * time.Second)
}

func dialRaw(t testing.TB, ts *testServer) *rawConn {
	t.Helper()
	conn, err := net.Dial("tcp", ts.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &rawConn{t: t, conn: conn, r: bufio.NewReader(conn)}
}

// resp encodes a command as a RESP array of bulk strings.
func resp(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

// write sends bytes as they are.
func (rc *rawConn) write(s string) {
	rc.t.Helper()
	rc.conn.SetWriteDeadline(rc.deadline())
	if _, err := io.WriteString(rc.conn, s); err != nil {
		rc.t.Fatalf("write: %v", err)
	}
}

// read reads exactly n bytes.
func (rc *rawConn) read(n int) string {
	rc.t.Helper()
	rc.conn.SetReadDeadline(rc.deadline())
	buf := make([]byte, n)
	if _, err := io.ReadFull(rc.r, buf); err != nil {
		rc.t.Fatalf("read %d bytes: %v (got %q)", n, err, buf)
	}
	return string(buf)
}

// readLine reads one CRLF-terminated line, CRLF included.
func (rc *rawConn) readLine() string {
	rc.t.Helper()
	rc.conn.SetReadDeadline(rc.deadline())
	line, err := rc.r.ReadString('\n')
	if err != nil {
		rc.t.Fatalf("read line: %v (got %q)", err, line)
	}
	return line
}

// rawStep is one byte-exact exchange: send is written, want is read back.
type rawStep struct {
	send, want string
}

// runRaw runs a byte-exact transcript, then checks with a PING that nothing
// was left unread (a reply too long would show up here).
func runRaw(t *testing.T, rc *rawConn, steps []rawStep) {
	t.Helper()
	for i, st := range steps {
		rc.write(st.send)
		if got := rc.read(len(st.want)); got != st.want {
			t.Fatalf("step %d: sent %q\n got: %q\nwant: %q", i, st.send, got, st.want)
		}
	}
	rc.write(resp("PING"))
	if got := rc.read(len("+PONG\r\n")); got != "+PONG\r\n" {
		t.Fatalf("after the transcript: got %q, want +PONG (extra bytes in a reply?)", got)
	}
}

// withConnWrapper lets a test see the server side of every accepted
// connection (through server.Config.WrapListener).
func withConnWrapper(wrap func(net.Conn) net.Conn) option {
	return func(c *server.Config, _ *testServer) {
		c.WrapListener = func(ln net.Listener) net.Listener { return wrapListener{ln, wrap} }
	}
}

type wrapListener struct {
	net.Listener
	wrap func(net.Conn) net.Conn
}

func (l wrapListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return l.wrap(conn), nil
}
