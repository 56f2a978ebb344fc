package compat_test

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// Ports of Redis's tests/unit/protocol.tcl, against the server behind the
// protocol guard as main runs it. Each case runs on a new connection
// ("reconnect" in the Tcl).

// TestProtocolTcl: the cases that end with a reply and a close.
func TestProtocolTcl(t *testing.T) {
	ts := startServer(t, guarded())
	for _, tc := range []struct{ name, send, want string }{
		{"Out of range multibulk length", "*3000000000\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"Out of range multibulk length (older Tcl: *20000000)", "*20000000\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		// celld's limit is 1024*1024 arguments (--max-multibulk-len),
		// Redis 6's; Redis 7 takes up to INT_MAX.
		{"Over 1048576 arguments", "*1048577\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"Wrong multibulk payload header", "*3\r\n$3\r\nSET\r\n$1\r\nx\r\nfooz\r\n", "-ERR Protocol error: expected '$', got 'f'\r\n"},
		{"Negative multibulk payload length", "*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$-10\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"Out of range multibulk payload length", "*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$2000000000\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"Non-number multibulk payload length", "*3\r\n$3\r\nSET\r\n$1\r\nx\r\n$blabla\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"Multi bulk request not followed by bulk arguments", "*1\r\nfoo\r\n", "-ERR Protocol error: expected '$', got 'f'\r\n"},
		{"Unbalanced number of quotes", "set \"\"\"test-key\"\"\" test-value\r\nping\r\n", "-ERR Protocol error: unbalanced quotes in request\r\n"},
		// The lengths that crash or spin redcon without the guard.
		{"$2^63-1", "*1\r\n$9223372036854775807\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"*2^63-1", "*9223372036854775807\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"$2^31", "*1\r\n$2147483648\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"*2^31-1", "*2147483647\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"20-digit count", "*99999999999999999999\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"20-digit length", "*1\r\n$18446744073709551616\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		// Commands before the bad frame run and are answered first.
		{"replies before the error", "PING\r\n*1\r\n$4\r\nPING\r\n*1\r\nfoo\r\n", "+PONG\r\n+PONG\r\n-ERR Protocol error: expected '$', got 'f'\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := dialRaw(t, ts)
			rc.write(tc.send)
			rc.expectClosed(tc.want)
		})
	}
}

// The cases after which the connection stays usable.
func TestProtocolTclIgnored(t *testing.T) {
	ts := startServer(t, guarded())
	for _, tc := range []struct{ name, send string }{
		{"Handle an empty query", "\r\n"},
		{"Negative multibulk length", "*-10\r\n"},
		{"Zero multibulk length", "*0\r\n"},
		{"Blank inline lines", "\r\n\r\n   \r\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := dialRaw(t, ts)
			rc.write(tc.send)
			runRaw(t, rc, nil) // then PING answers PONG
		})
	}
	t.Run("Generic wrong number of args", func(t *testing.T) {
		rc := dialRaw(t, ts)
		runRaw(t, rc, []rawStep{{resp("PING", "x", "y", "z"), "-ERR wrong number of arguments for 'ping' command\r\n"}})
	})
}

// "Protocol desync regression test #1..#3": after a byte that starts a
// frame badly, the client keeps sending; the server must answer a protocol
// error and close rather than buffer forever. The Tcl sends the literal word
// "payload" in a loop (its $payload lacks the '$'), so that is sent here.
func TestProtocolDesync(t *testing.T) {
	ts := startServer(t, guarded())
	for i, seq := range []string{"\x00", "*\x00", "$\x00"} {
		conn, err := net.Dial("tcp", ts.Addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.WriteString(conn, seq); err != nil {
			t.Fatal(err)
		}
		sent := 0
		for sent < 16<<20 { // far past the 64 KiB line limit
			n, err := io.WriteString(conn, strings.Repeat("payload", 1024))
			sent += n
			if err != nil {
				break
			}
		}
		reply, _ := io.ReadAll(conn) // a reset after the reply is fine
		conn.Close()
		if !strings.HasPrefix(string(reply), "-ERR Protocol error: ") {
			t.Errorf("#%d (%q): after %d bytes the server sent %q, want a protocol error", i+1, seq, sent, reply)
		}
	}
}

// The guard's bounds, at and just past each one.
func TestGuardDefaultsAtTheServer(t *testing.T) {
	ts := startServer(t, guarded())

	// Up to 1,048,576 arguments (what bounds a command's memory is the
	// query buffer limit: TestManyArgumentsDefaultLimits).
	t.Run("1048576 arguments", func(t *testing.T) {
		rc := dialRaw(t, ts)
		args := make([]string, 1025)
		args[0] = "DEL"
		for i := 1; i < len(args); i++ {
			args[i] = "k"
		}
		runRaw(t, rc, []rawStep{{resp(args...), ":0\r\n"}})
		rc.write("*1048577\r\n")
		rc.expectClosed("-ERR Protocol error: invalid multibulk length\r\n")
	})

	t.Run("512 KiB bulk", func(t *testing.T) {
		rc := dialRaw(t, ts)
		v := strings.Repeat("v", 512<<10)
		runRaw(t, rc, []rawStep{{resp("ECHO", v), "$524288\r\n" + v + "\r\n"}})
		rc.write("*2\r\n$4\r\nECHO\r\n$524289\r\n")
		rc.expectClosed("-ERR Protocol error: invalid bulk length\r\n")
	})

	t.Run("64 KiB inline", func(t *testing.T) {
		rc := dialRaw(t, ts)
		word := strings.Repeat("w", 64<<10-len("ECHO \r"))
		runRaw(t, rc, []rawStep{{"ECHO " + word + "\r\n", "$65530\r\n" + word + "\r\n"}})
		rc.write("ECHO " + word + "ww\r\n")
		rc.expectClosed("-ERR Protocol error: too big inline request\r\n")
	})

	t.Run("64 KiB inline without a newline", func(t *testing.T) {
		rc := dialRaw(t, ts)
		rc.write(strings.Repeat("x", 64<<10+1))
		rc.expectClosed("-ERR Protocol error: too big inline request\r\n")
	})

	t.Run("inline words: only the line's length bounds them", func(t *testing.T) {
		rc := dialRaw(t, ts)
		runRaw(t, rc, []rawStep{{"DEL" + strings.Repeat(" k", 32000) + "\r\n", ":0\r\n"}})
		rc.write("DEL" + strings.Repeat(" k", 33000) + "\r\n")
		rc.expectClosed("-ERR Protocol error: too big inline request\r\n")
	})
}
