package compat_test

import (
	"io"
	"testing"
	"time"

	"github.com/celld/celld/server"
)

// SHUTDOWN starts the server's ordered stop (main wires it to the same path
// as SIGTERM) and, as Redis does on success, closes the connection without
// a reply; ABORT and unknown options answer Redis's errors.
func TestShutdownCommand(t *testing.T) {
	asked := make(chan struct{}, 1)
	ts := startServer(t, withConfig(func(c *server.Config) {
		c.OnShutdown = func() { asked <- struct{}{} }
	}))
	rc := dialRaw(t, ts)
	runRaw(t, rc, []rawStep{
		{resp("SHUTDOWN", "ABORT"), "-ERR No shutdown in progress.\r\n"},
		{resp("SHUTDOWN", "LATER"), "-ERR syntax error\r\n"},
	})
	rc.write(resp("SHUTDOWN", "NOSAVE"))
	rc.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if b, err := rc.r.ReadByte(); err != io.EOF {
		t.Fatalf("after SHUTDOWN: read %q, %v; want the connection closed without a reply", b, err)
	}
	select {
	case <-asked:
	default:
		t.Fatal("SHUTDOWN did not call the shutdown hook")
	}

	// Without a hook (an embedding that did not wire one) it is an error.
	plain := startServer(t)
	runRaw(t, dialRaw(t, plain), []rawStep{
		{resp("SHUTDOWN"), "-ERR Errors trying to SHUTDOWN. Check logs.\r\n"},
	})
}
