package guard

import (
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of the options.
const (
	DefaultWriteTimeout = 10 * time.Second
	DefaultKeepAlive    = 5 * time.Minute // Redis's tcp-keepalive 300
	DefaultMaxClients   = 10000           // Redis's maxclients
)

// maxClientsReply is what Redis sends to a connection over maxclients.
const maxClientsReply = "-ERR max number of clients reached\r\n"

const (
	// rejectTimeout bounds the answer to a connection over MaxClients,
	// TLS handshake included.
	rejectTimeout = time.Second
	// maxRejecting bounds the TLS connections over MaxClients being
	// answered at once (each in its own goroutine, for at most
	// rejectTimeout); beyond it they are closed without an answer.
	maxRejecting = 64
)

type options struct {
	clients      *Clients
	requireAuth  bool
	onSecurity   func(remote string)
	onViolation  func(remote string, err *Error)
	writeTimeout time.Duration
	keepAlive    time.Duration
	maxClients   int
}

// Option configures NewListener and NewConn.
type Option func(*options)

func newOptions(opts []Option) *options {
	o := &options{
		writeTimeout: DefaultWriteTimeout,
		keepAlive:    DefaultKeepAlive,
		maxClients:   DefaultMaxClients,
	}
	for _, f := range opts {
		f(o)
	}
	return o
}

// RequireAuth makes connections start unauthenticated, under the Unauth*
// limits, until the server calls Conn.SetAuthenticated(true). Use it when a
// password is configured. Default false: connections start authenticated.
func RequireAuth(on bool) Option { return func(o *options) { o.requireAuth = on } }

// OnSecurityWarning sets a function called once for each connection the
// guard closes because a command named POST or Host: arrived (an HTTP client,
// or cross-protocol scripting from a browser). Redis logs "Possible SECURITY
// ATTACK detected"; rate-limiting the log is the caller's business. It runs
// on the connection's reading goroutine and must not block.
func OnSecurityWarning(fn func(remote string)) Option {
	return func(o *options) { o.onSecurity = fn }
}

// OnViolation sets a function called once for each connection the guard ends,
// whatever the reason (protocol error, query buffer limit, security warning),
// with the *Error that Read returns. It runs on the connection's reading
// goroutine and must not block.
func OnViolation(fn func(remote string, err *Error)) Option {
	return func(o *options) { o.onViolation = fn }
}

// WriteTimeout sets how long one Conn.Write may take before it fails with a
// timeout; 0 means no deadline. Default 10 s.
func WriteTimeout(d time.Duration) Option { return func(o *options) { o.writeTimeout = d } }

// KeepAlive sets the TCP keepalive idle time of accepted connections, with
// probes every d/3 and 3 of them, like Redis's tcp-keepalive. 0 leaves the
// connection as the inner listener made it (Go's default is 15 s); a negative
// d turns keepalive off. Default 5 min. Listener only.
func KeepAlive(d time.Duration) Option { return func(o *options) { o.keepAlive = d } }

// MaxClients sets how many accepted connections may be open at once; the
// next one is answered "-ERR max number of clients reached" and closed
// without reaching the server. 0 means no limit. Default 10000. Listener
// only.
func MaxClients(n int) Option { return func(o *options) { o.maxClients = n } }

// Clients counts the open connections of one or more Listeners against
// MaxClients. Redis's maxclients bounds the whole server, so a server with a
// plain and a TLS port gives both Listeners one Clients (see ShareClients).
// The zero value is ready to use.
type Clients struct {
	open      atomic.Int64
	rejected  atomic.Int64
	rejecting atomic.Int64 // TLS rejections in progress
}

// Open returns how many connections are open now.
func (c *Clients) Open() int64 { return c.open.Load() }

// Rejected returns how many connections were refused over MaxClients.
func (c *Clients) Rejected() int64 { return c.rejected.Load() }

// ShareClients makes a Listener count its connections in c, so that
// MaxClients bounds the sum over every Listener given the same c. Default:
// each Listener counts alone. Listener only.
func ShareClients(c *Clients) Option { return func(o *options) { o.clients = c } }

// Listener is a net.Listener whose Accept returns *Conn. It is safe for
// concurrent use, like the listener it wraps. The zero Listener is not
// usable: get one from NewListener.
type Listener struct {
	net.Listener
	lim Limits
	opt *options
	cnt *Clients

	mu        sync.Mutex
	rejecting map[net.Conn]struct{} // TLS connections being answered; nil once closed
}

// NewListener wraps ln: every accepted connection gets TCP keepalive, counts
// against MaxClients until it is closed, and is returned as a *Conn guarded
// by lim. ln must yield plaintext connections: with TLS, wrap the
// tls.Listener, not the TCP listener under it. It panics if lim.Validate
// fails: check Limits where they are configured.
//
// With redcon: srv.Serve(guard.NewListener(ln, lim)); a handler reaches the
// *Conn as conn.NetConn().(*guard.Conn).
func NewListener(ln net.Listener, lim Limits, opts ...Option) *Listener {
	l := &Listener{Listener: ln, lim: checkLimits(lim), opt: newOptions(opts), rejecting: map[net.Conn]struct{}{}}
	l.cnt = l.opt.clients
	if l.cnt == nil {
		l.cnt = new(Clients)
	}
	return l
}

// Accept waits for the next connection within MaxClients and returns it as a
// *Conn. Connections over the limit are answered and closed here, and Accept
// goes on waiting. Errors are the inner listener's.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if n := l.cnt.open.Add(1); l.opt.maxClients > 0 && n > int64(l.opt.maxClients) {
			l.cnt.open.Add(-1)
			l.cnt.rejected.Add(1)
			l.reject(nc)
			continue
		}
		l.setKeepAlive(nc)
		return newConn(nc, l.lim, l.opt, l.release), nil
	}
}

func (l *Listener) release() { l.cnt.open.Add(-1) }

// reject answers a connection over MaxClients, as Redis does, and closes it,
// without holding up Accept for long. A plaintext reply fits in any socket
// buffer, so it is written here, under a deadline as a precaution. A TLS
// connection must first complete its handshake, which waits for the client:
// that is done in a goroutine (at most maxRejecting at once, each for at
// most rejectTimeout), so that a client that connects and sends nothing
// cannot stall the accept loop; beyond maxRejecting the connection is
// closed without an answer.
func (l *Listener) reject(nc net.Conn) {
	if _, isTLS := nc.(*tls.Conn); !isTLS {
		answerAndClose(nc)
		return
	}
	if l.cnt.rejecting.Add(1) > maxRejecting {
		l.cnt.rejecting.Add(-1)
		nc.Close()
		return
	}
	l.mu.Lock()
	if l.rejecting == nil { // closed
		l.mu.Unlock()
		l.cnt.rejecting.Add(-1)
		nc.Close()
		return
	}
	l.rejecting[nc] = struct{}{}
	l.mu.Unlock()
	go func() {
		defer l.cnt.rejecting.Add(-1)
		answerAndClose(nc)
		l.mu.Lock()
		delete(l.rejecting, nc)
		l.mu.Unlock()
	}()
}

// Close closes the listener and the TLS connections over MaxClients still
// being answered, so that nothing of the Listener outlives it for long.
func (l *Listener) Close() error {
	err := l.Listener.Close()
	l.mu.Lock()
	pending := l.rejecting
	l.rejecting = nil
	l.mu.Unlock()
	for nc := range pending {
		nc.Close()
	}
	return err
}

func answerAndClose(nc net.Conn) {
	nc.SetDeadline(time.Now().Add(rejectTimeout))
	nc.Write([]byte(maxClientsReply))
	nc.Close()
}

// setKeepAlive applies the KeepAlive option to nc's TCP connection, found
// through NetConn (as on a *tls.Conn) when nc wraps one.
func (l *Listener) setKeepAlive(nc net.Conn) {
	for range 8 { // a few layers at most; never loop on a self-wrapping conn
		u, ok := nc.(interface{ NetConn() net.Conn })
		if !ok {
			break
		}
		nc = u.NetConn()
	}
	tc, ok := nc.(*net.TCPConn)
	if !ok || l.opt.keepAlive == 0 {
		return
	}
	if d := l.opt.keepAlive; d < 0 {
		tc.SetKeepAlive(false)
	} else {
		tc.SetKeepAliveConfig(net.KeepAliveConfig{
			Enable:   true,
			Idle:     d,
			Interval: max(d/3, time.Second),
			Count:    3,
		})
	}
}

// Clients returns how many accepted connections are open now (over every
// Listener sharing its count, see ShareClients).
func (l *Listener) Clients() int64 { return l.cnt.Open() }

// Rejected returns how many connections were refused over MaxClients (over
// every Listener sharing its count).
func (l *Listener) Rejected() int64 { return l.cnt.Rejected() }
