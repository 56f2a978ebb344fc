package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"net"
	"net/netip"
	"time"
)

// Access control: requirepass for the default user, and protected mode.

const (
	errNoAuth    = "NOAUTH Authentication required."
	errWrongPass = "WRONGPASS invalid username-password pair or user is disabled."
	errNoPassSet = "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"
	errHelloAuth = "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"

	deniedText = "-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: 1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. 3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. 4) Set up an authentication password for the default user. NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n"
)

// authSetter is implemented by the protocol guard's connection, which
// applies tighter frame limits until the client has authenticated.
type authSetter interface{ SetAuthenticated(bool) }

// allowedPeer applies protected mode to a new connection: with no password
// set, only loopback clients are served; others get Redis's -DENIED text.
// It runs on the accept loop, so it must not wait for the client.
func (s *Server) allowedPeer(nc net.Conn) bool {
	if !s.cfg.ProtectedMode || s.cfg.RequirePass != "" {
		return true
	}
	remote := ""
	if ra := nc.RemoteAddr(); ra != nil {
		remote = ra.String()
	}
	if isLoopbackPeer(nc, remote) {
		return true
	}
	if tc := tlsConnOf(nc); tc != nil && !tc.ConnectionState().HandshakeComplete {
		// Writing would first run the TLS handshake, which reads from the
		// client with no deadline, on the accept loop: one silent client
		// would stop the server accepting. Refuse without the text.
		s.log.Warn("protected mode: refused a non-loopback client (TLS, closed without the DENIED text)", "remote", remote)
		return false
	}
	nc.SetWriteDeadline(time.Now().Add(time.Second)) // the text fits a fresh socket's buffer
	nc.Write([]byte(deniedText))
	s.log.Warn("protected mode: refused a non-loopback client", "remote", remote)
	return false
}

// isLoopbackPeer reports whether the client is on the loopback interface, or
// not on an IP transport at all (a unix socket), which protected mode
// allows. The address comes from the socket when it is a TCP one; the string
// form is parsed otherwise, zone included ("[fe80::1%eth0]:6379" is not
// loopback: net.ParseIP would fail on it and let it through).
func isLoopbackPeer(nc net.Conn, remote string) bool {
	if nc != nil {
		switch a := nc.RemoteAddr().(type) {
		case *net.TCPAddr:
			return a.IP.IsLoopback()
		case *net.UnixAddr:
			return true
		}
	}
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return true // not host:port, so not an IP transport
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false // host:port but not an IP: refuse what we cannot place
	}
	return ip.Unmap().IsLoopback()
}

// tlsConnOf finds the *tls.Conn under nc (the guard wraps it), or nil.
func tlsConnOf(nc net.Conn) *tls.Conn {
	tc, _ := unwrapConn[*tls.Conn](nc)
	return tc
}

// passwordMatches compares in constant time (hashing first so that the
// comparison does not leak the password's length either).
func (s *Server) passwordMatches(pass []byte) bool {
	a := sha256.Sum256(pass)
	b := sha256.Sum256([]byte(s.cfg.RequirePass))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// setAuthed records the client's authentication and tells the guard.
func (c *client) setAuthed(ok bool) {
	c.authed = ok
	c.unauthed.Store(!ok && c.srv.cfg.RequirePass != "")
	if g, isGuard := c.netConn.(authSetter); isGuard {
		g.SetAuthenticated(ok)
	}
}
