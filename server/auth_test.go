package server

import (
	"crypto/tls"
	"github.com/celld/celld/internal/testutil"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/celld/celld/store"
)

// Protected mode and the password check, tested on the functions themselves:
// a non-loopback client cannot be made from a loopback-only test host, so
// the connection is a fake whose peer address says 10.1.2.3.

// redisDenied is Redis 7.2's protected-mode text (networking.c,
// clientAcceptHandler), copied here independently of deniedText.
const redisDenied = "-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. " +
	"In this mode connections are only accepted from the loopback interface. " +
	"If you want to connect from external computers to Redis you may adopt one of the following solutions: " +
	"1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface " +
	"by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible " +
	"from internet if you do so. Use CONFIG REWRITE to make this change permanent. " +
	"2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected " +
	"mode option to 'no', and then restarting the server. " +
	"3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. " +
	"4) Set up an authentication password for the default user. " +
	"NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n"

// peerConn is a net.Conn with a chosen peer address that records writes.
type peerConn struct {
	remote net.Addr
	wrote  testutil.Buffer
}

func (p *peerConn) Read([]byte) (int, error)         { return 0, io.EOF }
func (p *peerConn) Write(b []byte) (int, error)      { return p.wrote.Write(b) }
func (p *peerConn) written() string                  { return p.wrote.String() }
func (p *peerConn) Close() error                     { return nil }
func (p *peerConn) LocalAddr() net.Addr              { return &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 6379} }
func (p *peerConn) RemoteAddr() net.Addr             { return p.remote }
func (p *peerConn) SetDeadline(time.Time) error      { return nil }
func (p *peerConn) SetReadDeadline(time.Time) error  { return nil }
func (p *peerConn) SetWriteDeadline(time.Time) error { return nil }

// strAddr is a net.Addr of an unknown type, so that allowedPeer falls back to
// parsing the string.
type strAddr string

func (a strAddr) Network() string { return "tcp" }
func (a strAddr) String() string  { return string(a) }

func newAccessServer(t *testing.T, cfg Config, logw io.Writer) *Server {
	t.Helper()
	if logw == nil {
		logw = io.Discard
	}
	cfg.Logger = slog.New(slog.NewTextHandler(logw, nil))
	s, err := New(cfg, store.New(store.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func tcpAddr(s string) net.Addr {
	a, err := net.ResolveTCPAddr("tcp", s)
	if err != nil {
		panic(err)
	}
	return a
}

func TestAllowedPeerProtectedMode(t *testing.T) {
	if len(redisDenied) != 1066 { // Redis's string is 1,066 bytes with its CRLF
		t.Fatalf("the reference text is %d bytes, want 1066", len(redisDenied))
	}
	for _, tc := range []struct {
		name   string
		remote string
		addr   net.Addr // the socket's own address; nil: strAddr(remote)
		allow  bool
	}{
		{"IPv4 loopback", "127.0.0.1:5555", nil, true},
		{"other 127/8 address", "127.1.2.3:5555", nil, true},
		{"IPv6 loopback", "[::1]:5555", nil, true},
		{"IPv4-mapped loopback", "[::ffff:127.0.0.1]:5555", nil, true},
		{"private IPv4", "10.1.2.3:5555", nil, false},
		{"private IPv4, TCP address", "10.1.2.3:5555", tcpAddr("10.1.2.3:5555"), false},
		{"loopback, TCP address", "127.0.0.1:5555", tcpAddr("127.0.0.1:5555"), true},
		{"public IPv6", "[2001:db8::1]:5555", nil, false},
		{"IPv4-mapped public", "[::ffff:10.1.2.3]:5555", nil, false},
		// net.ParseIP cannot parse a zoned address; such a peer is
		// link-local, never loopback, and must not slip through.
		{"link-local IPv6 with zone", "[fe80::1%eth0]:5555", nil, false},
		{"link-local IPv6 with zone, TCP address", "[fe80::1%eth0]:5555",
			&net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 5555, Zone: "eth0"}, false},
		{"unix socket", "@", &net.UnixAddr{Name: "@", Net: "unix"}, true},
		{"not host:port", "pipe", nil, true},
		{"host:port that is not an IP", "example.com:5555", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs strings.Builder
			s := newAccessServer(t, Config{ProtectedMode: true}, &logs)
			addr := tc.addr
			if addr == nil {
				addr = strAddr(tc.remote)
			}
			nc := &peerConn{remote: addr}
			got := s.allowedPeer(nc)
			if got != tc.allow {
				t.Fatalf("allowedPeer(%s) = %v, want %v", tc.remote, got, tc.allow)
			}
			want, wantLog := "", 0
			if !tc.allow {
				want, wantLog = redisDenied, 1
			}
			if w := nc.written(); w != want {
				t.Errorf("wrote %q\nwant %q", w, want)
			}
			if n := strings.Count(logs.String(), "protected mode: refused"); n != wantLog {
				t.Errorf("%d log lines about the refusal, want %d:\n%s", n, wantLog, logs.String())
			}
		})
	}
}

// Protected mode is off with --protected-mode no, and has no effect once a
// password is set (the non-loopback client must AUTH instead).
func TestAllowedPeerOptOutAndPassword(t *testing.T) {
	for _, cfg := range []Config{
		{ProtectedMode: false},
		{ProtectedMode: true, RequirePass: "secret"},
	} {
		s := newAccessServer(t, cfg, nil)
		nc := &peerConn{remote: tcpAddr("10.1.2.3:5555")}
		if !s.allowedPeer(nc) {
			t.Errorf("protected-mode=%v requirepass=%q: a non-loopback client was refused", cfg.ProtectedMode, cfg.RequirePass)
		}
		if w := nc.written(); w != "" {
			t.Errorf("wrote %q", w)
		}
	}
}

// tlsPeer is the guard's position: a wrapper with NetConn over a *tls.Conn,
// whose peer is non-loopback.
type tlsPeer struct {
	*tls.Conn
	remote net.Addr
}

func (p tlsPeer) RemoteAddr() net.Addr { return p.remote }
func (p tlsPeer) NetConn() net.Conn    { return p.Conn }

// allowedPeer runs on the accept loop. Over TLS, writing the DENIED
// text first runs the handshake, which waits for the client without a
// deadline: a client that connects and sends nothing would stop the server
// accepting anyone. The refusal must not wait for the client.
func TestAllowedPeerDoesNotWaitForTLSHandshake(t *testing.T) {
	s := newAccessServer(t, Config{ProtectedMode: true}, nil)
	srvEnd, cliEnd := net.Pipe()
	defer cliEnd.Close() // the client never writes: no ClientHello
	defer srvEnd.Close()
	tc := tls.Server(srvEnd, &tls.Config{Certificates: []tls.Certificate{testutil.SelfSigned(t)}})
	conn := tlsPeer{Conn: tc, remote: tcpAddr("10.1.2.3:5555")}
	done := make(chan bool, 1)
	go func() { done <- s.allowedPeer(conn) }()
	select {
	case ok := <-done:
		if ok {
			t.Fatal("a non-loopback TLS client was allowed in protected mode")
		}
	case <-time.After(5 * time.Second):
		srvEnd.Close() // unblock the handshake so the goroutine ends
		<-done
		t.Fatal("allowedPeer blocked on the TLS handshake of a silent client: the accept loop would stall")
	}
}

func TestPasswordMatches(t *testing.T) {
	s := newAccessServer(t, Config{RequirePass: "abc\x00def"}, nil)
	for _, tc := range []struct {
		pass string
		ok   bool
	}{
		{"abc\x00def", true},
		{"abc", false}, // a C string comparison would stop at the NUL
		{"abc\x00deg", false},
		{"abc\x00defg", false},
		{"", false},
		{"ABC\x00DEF", false},
	} {
		if got := s.passwordMatches([]byte(tc.pass)); got != tc.ok {
			t.Errorf("passwordMatches(%q) = %v, want %v", tc.pass, got, tc.ok)
		}
	}
}
