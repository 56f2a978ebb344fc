package compat_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/celld/celld/guard"
	"github.com/celld/celld/server"
	"github.com/celld/celld/store"
	"go.uber.org/goleak"
)

// Shutdown leaves no goroutine behind even when clients are still connected
// in every awkward state: idle, authenticated or not, mid-bulk, mid-inline,
// in a TLS handshake that never comes, over maxclients on the TLS port, and
// blocked writing to a client that does not read. (TestMain checks the whole
// package at the end; this checks one server right after its Shutdown, with
// the clients still open.)
func TestShutdownLeavesNoGoroutines(t *testing.T) {
	before := goleak.IgnoreCurrent()
	p := newPKI(t)
	var lb logBuffer
	cfg := server.Config{Addr: "127.0.0.1:0", TLSConfig: p.serverConfig(false)}
	for _, o := range []option{withPassword(testPass), withLog(&lb),
		withGuard(nil, guard.Limits{}, guard.MaxClients(8), guard.WriteTimeout(time.Minute))} {
		o(&cfg, nil)
	}
	s, err := server.New(cfg, store.New(store.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	pln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 2)
	go func() { served <- s.Serve(pln) }()
	go func() { served <- s.ServeTLS(tln) }()
	plain, tlsAddr := pln.Addr().String(), tln.Addr().String()

	var clients []net.Conn
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	dial := func(addr, send string) net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
		if send != "" {
			c.SetWriteDeadline(time.Now().Add(10 * time.Second))
			io.WriteString(c, send)
		}
		return c
	}
	expect := func(c net.Conn, want string) {
		t.Helper()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		got := make([]byte, len(want))
		if _, err := io.ReadFull(c, got); err != nil || string(got) != want {
			t.Fatalf("got %q, %v; want %q", got, err, want)
		}
	}
	expect(dial(plain, "PING\r\n"), noAuthReply)                             // idle, unauthenticated
	expect(dial(plain, resp("AUTH", testPass)), "+OK\r\n")                   // idle, authenticated
	dial(plain, resp("AUTH", testPass)+"*2\r\n$4\r\nECHO\r\n$100000\r\nabc") // mid-bulk
	dial(plain, "ECHO "+strings.Repeat("x", 1000))                           // mid-inline
	dial(tlsAddr, "")                                                        // no TLS handshake, ever
	tc, err := tls.Dial("tcp", tlsAddr, p.clientConfig(false))               // TLS, mid-command
	if err != nil {
		t.Fatal(err)
	}
	clients = append(clients, tc)
	io.WriteString(tc, "*1\r\n$4\r\nPI")
	// A client that never reads, the server blocked writing to it.
	blocked := dial(plain, "")
	blocked.(*net.TCPConn).SetReadBuffer(4096) // so the server's writes block soon
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		blocked.SetWriteDeadline(time.Now().Add(30 * time.Second))
		io.WriteString(blocked, resp("AUTH", testPass)+strings.Repeat(resp("ECHO", strings.Repeat("v", 512<<10)), 64))
	}()
	for range 3 { // over maxclients (8) on the TLS port, and silent
		dial(tlsAddr, "")
	}
	time.Sleep(300 * time.Millisecond) // let the server reach those states

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err = s.Shutdown(ctx) // times out on the blocked writer, then closes everything
	t.Logf("Shutdown: %v", err)
	for range 2 {
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	}
	<-wrote // the server closed that connection, so the client's write failed
	// The clients are all still open: only the server's goroutines had to go.
	if err := goleak.Find(before); err != nil {
		t.Fatalf("goroutines left after Shutdown returned:\n%v", err)
	}
}
