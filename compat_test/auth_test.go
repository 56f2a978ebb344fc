package compat_test

import (
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/celld/celld/guard"
	"github.com/celld/celld/server"
	redigo "github.com/gomodule/redigo/redis"
	"github.com/redis/go-redis/v9"
)

// requirepass, AUTH, HELLO AUTH and RESET, through the protocol guard wired
// as main wires it. Ports of Redis's tests/unit/auth.tcl where they apply.

// Redis's exact texts.
const (
	noAuthReply     = "-NOAUTH Authentication required.\r\n"
	wrongPassReply  = "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
	noPassSetReply  = "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n"
	helloNoAuth     = "-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time\r\n"
	unauthMultibulk = "-ERR Protocol error: unauthenticated multibulk length\r\n"
	unauthBulk      = "-ERR Protocol error: unauthenticated bulk length\r\n"
)

const testPass = "foobar"

// startAuthServer is a guarded server with requirepass foobar.
func startAuthServer(t *testing.T, opts ...option) *testServer {
	t.Helper()
	return startServer(t, append([]option{withFakeClock(t0), withPassword(testPass), guarded()}, opts...)...)
}

// expectClosed reads what the server still sends and checks that it then
// closes the connection, within 10 s.
func (rc *rawConn) expectClosed(want string) {
	rc.t.Helper()
	rc.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(rc.r)
	if err != nil && !isReset(err) {
		rc.t.Fatalf("waiting for the server to close: %v (got %q)", err, got)
	}
	if string(got) != want {
		rc.t.Fatalf("before closing, the server sent %q, want %q", got, want)
	}
}

// isReset reports a connection reset: the server closed with our bytes
// unread, which is also a close.
func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && strings.Contains(op.Err.Error(), "reset")
}

// auth.tcl, first server: no password configured.
func TestAuthWithoutPassword(t *testing.T) {
	ts := startServer(t, withFakeClock(t0), guarded())
	rc := dialRaw(t, ts)
	id := clientID(t, rc)
	runRaw(t, rc, []rawStep{
		// AUTH fails if there is no password configured server side.
		{resp("AUTH", "foo"), noPassSetReply},
		// Arity check for auth command.
		{resp("AUTH", "a", "b", "c"), "-ERR syntax error\r\n"},
		{resp("AUTH"), "-ERR wrong number of arguments for 'auth' command\r\n"},
		// The default user is "nopass": any password is accepted for it.
		{resp("AUTH", "default", "anything"), "+OK\r\n"},
		{resp("AUTH", "nobody", "anything"), wrongPassReply},
		{resp("HELLO", "3", "AUTH", "default", "x"), hello3(id)},
		{resp("HELLO", "2", "AUTH", "nobody", "x"), wrongPassReply},
		// RESET keeps a password-less connection usable.
		{resp("RESET"), "+RESET\r\n"},
		{resp("GET", "k"), "$-1\r\n"},
	})
}

// auth.tcl, second server: requirepass foobar.
func TestAuthRequirepass(t *testing.T) {
	ts := startAuthServer(t)
	rc := dialRaw(t, ts)
	runRaw(t, rc, []rawStep{
		// AUTH fails when a wrong password is given.
		{resp("AUTH", "wrong!"), wrongPassReply},
		// Arbitrary command gives an error when AUTH is required.
		{resp("SET", "foo", "bar"), noAuthReply},
		{resp("CL.THROTTLE", "k", "15", "30", "60"), noAuthReply},
		{resp("GET", "foo"), noAuthReply},
		{resp("CLIENT", "ID"), noAuthReply},
		{"GET foo\r\n", noAuthReply}, // inline too
		// Redis 7 checks existence and arity before authentication.
		{resp("NOSUCH", "x"), "-ERR unknown command 'NOSUCH', with args beginning with: 'x' \r\n"},
		{resp("GET"), "-ERR wrong number of arguments for 'get' command\r\n"},
		{resp("HELLO", "3"), helloNoAuth},
		{resp("HELLO"), helloNoAuth},
		{resp("HELLO", "3", "AUTH", "default", "wrong"), wrongPassReply},
		{resp("HELLO", "3", "AUTH", "nobody", testPass), wrongPassReply},
		{resp("AUTH", "nobody", testPass), wrongPassReply},
		// A prefix or an extension of the password is wrong.
		{resp("AUTH", "foo"), wrongPassReply},
		{resp("AUTH", "foobarx"), wrongPassReply},
		{resp("AUTH", ""), wrongPassReply},
		// AUTH succeeds when the right password is given.
		{resp("AUTH", testPass), "+OK\r\n"},
		// Once AUTH succeeded we can actually send commands to the server.
		{resp("SET", "foo", "100"), "+OK\r\n"},
		{resp("GET", "foo"), "$3\r\n100\r\n"},
		{resp("CL.THROTTLE", "k", "15", "30", "60"), "*5\r\n:0\r\n:16\r\n:15\r\n:-1\r\n:2\r\n"},
		// A failed AUTH does not log an authenticated connection out.
		{resp("AUTH", "wrong!"), wrongPassReply},
		{resp("GET", "foo"), "$3\r\n100\r\n"},
		{resp("AUTH", "default", testPass), "+OK\r\n"},
	})
}

func TestAuthDefaultUserForm(t *testing.T) {
	ts := startAuthServer(t)
	rc := dialRaw(t, ts)
	runRaw(t, rc, []rawStep{
		{resp("AUTH", "default", "nope"), wrongPassReply},
		{resp("AUTH", "default", testPass), "+OK\r\n"},
		{resp("GET", "x"), "$-1\r\n"},
	})
}

// HELLO 3 AUTH default <pass> authenticates and switches to RESP3 in one
// command.
func TestHelloAuthRaw(t *testing.T) {
	ts := startAuthServer(t)
	rc := dialRaw(t, ts)
	runRawOnly(t, rc, []rawStep{
		{resp("HELLO", "3", "AUTH", "default", "wrong"), wrongPassReply},
		{resp("GET", "k"), noAuthReply}, // still RESP2 and unauthenticated
		// No protocol version: "AUTH" is read as the version.
		{resp("HELLO", "AUTH", "default", testPass), "-ERR Protocol version is not an integer or out of range\r\n"},
	})
	rc.write(resp("HELLO", "3", "AUTH", "default", testPass))
	got := rc.readReply()
	if want := hello3(clientID(t, rc)); got != want {
		t.Fatalf("HELLO 3 AUTH default <pass>:\n got %q\nwant %q", got, want)
	}
	runRaw(t, rc, []rawStep{
		{resp("GET", "k"), "_\r\n"}, // RESP3 null: authenticated and switched
		{resp("CL.THROTTLE", "k", "1", "1", "1"), "*5\r\n:0\r\n:2\r\n:1\r\n:-1\r\n:1\r\n"},
	})
}

// HELLO 2 AUTH ... SETNAME: all three at once.
func TestHelloAuthSetname(t *testing.T) {
	ts := startAuthServer(t)
	rc := dialRaw(t, ts)
	rc.write(resp("HELLO", "2", "AUTH", "default", testPass, "SETNAME", "worker"))
	got := rc.readReply()
	if want := hello2(clientID(t, rc)); got != want {
		t.Fatalf("HELLO 2 AUTH default <pass> SETNAME worker:\n got %q\nwant %q", got, want)
	}
	runRaw(t, rc, []rawStep{{resp("CLIENT", "GETNAME"), "$6\r\nworker\r\n"}})
	// A wrong password sets no name.
	rc = dialRaw(t, ts)
	runRaw(t, rc, []rawStep{
		{resp("HELLO", "2", "AUTH", "default", "x", "SETNAME", "worker"), wrongPassReply},
		{resp("AUTH", testPass), "+OK\r\n"},
		{resp("CLIENT", "GETNAME"), "$-1\r\n"},
	})
}

// RESET logs the connection out when a password is set, and the guard's
// pre-authentication limits come back with it.
func TestResetDeauthenticates(t *testing.T) {
	ts := startAuthServer(t)
	rc := dialRaw(t, ts)
	eleven := resp("ECHO", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10")
	runRaw(t, rc, []rawStep{
		{resp("AUTH", testPass), "+OK\r\n"},
		{eleven, "-ERR wrong number of arguments for 'echo' command\r\n"}, // 11 args pass the guard
		{resp("RESET"), "+RESET\r\n"},
		{resp("GET", "k"), noAuthReply},
		{resp("CL.THROTTLE", "k", "1", "1", "1"), noAuthReply},
		{resp("AUTH", testPass), "+OK\r\n"},
		{resp("GET", "k"), "$-1\r\n"},
	})
	rc = dialRaw(t, ts)
	rc.write(resp("AUTH", testPass) + resp("RESET") + resp("PING"))
	for _, want := range []string{"+OK\r\n", "+RESET\r\n", noAuthReply} {
		if got := rc.read(len(want)); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	// Unauthenticated again: 11 arguments are refused by the guard.
	rc.write(eleven)
	rc.expectClosed(unauthMultibulk)
}

// auth.tcl: "For unauthenticated clients multibulk and bulk length are
// limited" — at most 10 arguments and 16 KiB bulks before AUTH, then the
// connection is closed.
func TestUnauthenticatedLimits(t *testing.T) {
	ts := startAuthServer(t)
	for _, tc := range []struct{ name, send, want string }{
		{"*100", "*100\r\n", unauthMultibulk},
		{"*11", "*11\r\n", unauthMultibulk},
		{"$16385", "*1\r\n$16385\r\n", unauthBulk},
		{"$16385 as AUTH's password", "*2\r\n$4\r\nAUTH\r\n$16385\r\n", unauthBulk},
		// Redis's own case, $100000000: over celld's 512 KiB bulk limit,
		// which is checked first (Redis's proto-max-bulk-len is 512 MB).
		{"$100000000", "*1\r\n$100000000\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"after a NOAUTH", resp("GET", "k") + "*11\r\n", noAuthReply + unauthMultibulk},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := dialRaw(t, ts)
			rc.write(tc.send)
			rc.expectClosed(tc.want)
		})
	}
	// At the limits exactly: 10 arguments and a 16 KiB bulk are read and
	// answered NOAUTH.
	rc := dialRaw(t, ts)
	runRaw(t, rc, []rawStep{
		{resp("ECHO", "1", "2", "3", "4", "5", "6", "7", "8", "9"), "-ERR wrong number of arguments for 'echo' command\r\n"},
		{resp("GET", strings.Repeat("k", 16384)), noAuthReply},
		{resp("AUTH", strings.Repeat("p", 16384)), wrongPassReply},
		{resp("AUTH", testPass), "+OK\r\n"},
	})
}

// An AUTH pipelined with what follows lifts the limits for the very next
// command, as in Redis.
func TestPipelinedAuthLiftsLimits(t *testing.T) {
	ts := startAuthServer(t)
	rc := dialRaw(t, ts)
	big := strings.Repeat("v", 100000)
	rc.write(resp("AUTH", testPass) + resp("ECHO", big) +
		resp("ECHO", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11"))
	for _, want := range []string{"+OK\r\n", "$100000\r\n" + big + "\r\n", "-ERR wrong number of arguments for 'echo' command\r\n"} {
		if got := rc.read(len(want)); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
}

// A wrong password pipelined with a big command: the big one is refused.
func TestPipelinedWrongAuthKeepsLimits(t *testing.T) {
	ts := startAuthServer(t)
	rc := dialRaw(t, ts)
	rc.write(resp("AUTH", "wrong") + resp("ECHO", strings.Repeat("v", 20000)))
	rc.expectClosed(wrongPassReply + unauthBulk)
}

// auth.tcl: binary passwords are compared in full, NUL bytes included.
func TestAuthBinaryPassword(t *testing.T) {
	ts := startServer(t, withPassword("abc\x00def"), guarded())
	rc := dialRaw(t, ts)
	runRaw(t, rc, []rawStep{
		{resp("AUTH", "abc"), wrongPassReply},
		{resp("AUTH", "abc\x00de"), wrongPassReply},
		{resp("AUTH", "abc\x00def"), "+OK\r\n"},
	})
}

// QUIT works before AUTH.
func TestQuitBeforeAuth(t *testing.T) {
	ts := startAuthServer(t)
	rc := dialRaw(t, ts)
	rc.write(resp("QUIT"))
	rc.expectClosed("+OK\r\n")
}

// auth.tcl: "For unauthenticated clients output buffer is limited". A client
// that pipelines commands (each answered NOAUTH) and never reads cannot make
// the server hold its replies: once the socket buffers are full, the write
// times out (the guard's write deadline, here 200 ms instead of 10 s) and
// the server drops the connection.
func TestUnauthenticatedClientThatNeverReads(t *testing.T) {
	ts := startServer(t, withPassword(testPass), withGuard(nil, guard.Limits{}, guard.WriteTimeout(200*time.Millisecond)))
	conn, err := net.Dial("tcp", ts.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	chunk := []byte(strings.Repeat(resp("SET", "x", "5"), 1000)) // 25 KB, 1,000 NOAUTHs
	deadline := time.Now().Add(30 * time.Second)
	sent := 0
	for i := 0; i < 1000; i++ { // Redis's test sends up to 1,000,000 commands
		conn.SetWriteDeadline(deadline)
		if _, err := conn.Write(chunk); err != nil {
			if isReset(err) || errors.Is(err, net.ErrClosed) || strings.Contains(err.Error(), "broken pipe") {
				t.Logf("dropped after %d commands (%d KB)", sent, sent*25/1000)
				return
			}
			t.Fatalf("write after %d commands: %v", sent, err)
		}
		sent += 1000
	}
	t.Fatalf("the server kept reading after %d commands whose replies were never read", sent)
}

// ---------------------------------------------------------------------------
// Clients.

// go-redis with Options.Password: RESP3 sends HELLO 3 AUTH default <pass>,
// RESP2 sends HELLO 2 AUTH default <pass>.
func TestAuthGoRedis(t *testing.T) {
	ts := startAuthServer(t)
	for _, proto := range []int{3, 2} {
		rdb := newGoRedis(t, ts, func(o *redis.Options) { o.Password = testPass; o.Protocol = proto })
		got, err := rdb.Do(ctx, "CL.THROTTLE", "go-redis", 15, 30, 60).Int64Slice()
		if err != nil {
			t.Fatalf("RESP%d: %v", proto, err)
		}
		if len(got) != 5 || got[0] != 0 || got[1] != 16 {
			t.Fatalf("RESP%d: CL.THROTTLE = %v", proto, got)
		}
		if p := rdb.Ping(ctx).Val(); p != "PONG" {
			t.Fatalf("RESP%d: PING = %q", proto, p)
		}
	}
	// A wrong password: every command fails with WRONGPASS.
	bad := newGoRedis(t, ts, func(o *redis.Options) { o.Password = "wrong"; o.MaxRetries = -1 })
	if err := bad.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS invalid username-password pair or user is disabled.") {
		t.Fatalf("wrong password: PING error %v", err)
	}
	// No password: NOAUTH.
	none := newGoRedis(t, ts, func(o *redis.Options) { o.MaxRetries = -1 })
	if err := none.Get(ctx, "k").Err(); err == nil || err.Error() != "NOAUTH Authentication required." {
		t.Fatalf("no password: GET error %v", err)
	}
}

// redigo's DialPassword sends AUTH <pass>.
func TestAuthRedigo(t *testing.T) {
	ts := startAuthServer(t)
	conn, err := redigo.Dial("tcp", ts.Addr, redigo.DialPassword(testPass))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	got, err := redigo.Int64s(conn.Do("CL.THROTTLE", "redigo", 15, 30, 60))
	if err != nil || len(got) != 5 || got[1] != 16 {
		t.Fatalf("CL.THROTTLE = %v, %v", got, err)
	}
	if _, err := redigo.Dial("tcp", ts.Addr, redigo.DialPassword("wrong")); err == nil ||
		err.Error() != "WRONGPASS invalid username-password pair or user is disabled." {
		t.Fatalf("wrong password: Dial error %v", err)
	}
	if _, err := redigo.Dial("tcp", ts.Addr, redigo.DialUsername("default"), redigo.DialPassword(testPass)); err != nil {
		t.Fatalf("AUTH default <pass>: %v", err)
	}
	plain := newRedigo(t, ts)
	if _, err := plain.Do("GET", "k"); err == nil || err.Error() != "NOAUTH Authentication required." {
		t.Fatalf("no password: GET error %v", err)
	}
}

// Protected mode on, no password, loopback client: served as usual.
func TestProtectedModeAllowsLoopback(t *testing.T) {
	var lb logBuffer
	ts := startServer(t, withConfig(func(c *server.Config) { c.ProtectedMode = true }), withLog(&lb), guarded())
	rc := dialRaw(t, ts)
	runRaw(t, rc, []rawStep{{resp("GET", "k"), "$-1\r\n"}})
	if n := lb.count("protected mode"); n != 0 {
		t.Fatalf("a loopback client was refused:\n%s", lb.String())
	}
}
