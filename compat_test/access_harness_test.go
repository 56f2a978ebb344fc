package compat_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"github.com/celld/celld/internal/testutil"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/celld/celld/guard"
	"github.com/celld/celld/server"
	"github.com/celld/celld/store"
)

// Harness additions for the access-control and protocol-guard tests: the
// guard wrapped around the listener the way main's access.go does it, a
// password, a captured log, and TLS.

// withConfig lets a test change any server.Config field.
func withConfig(f func(*server.Config)) option {
	return func(c *server.Config, _ *testServer) { f(c) }
}

// withPassword sets requirepass. Combine with withGuard so that the guard
// also starts connections unauthenticated, as main does.
func withPassword(pass string) option {
	return withConfig(func(c *server.Config) { c.RequirePass = pass })
}

// withGuard wraps every listener with guard.NewListener(ln, lim, opts...),
// adding guard.RequireAuth when the server has a password: the wiring of
// main's applyAccess. The RequirePass test is made when Serve wraps the
// listener, so withGuard may come before or after withPassword. When ref is
// not nil it receives the guard listener (the last one, with several
// listeners).
func withGuard(ref *guardRef, lim guard.Limits, opts ...guard.Option) option {
	return func(c *server.Config, _ *testServer) {
		c.WrapListener = func(ln net.Listener) net.Listener {
			all := append([]guard.Option{guard.RequireAuth(c.RequirePass != "")}, opts...)
			gl := guard.NewListener(ln, lim, all...)
			if ref != nil {
				ref.p.Store(gl)
			}
			return gl
		}
	}
}

// guardRef receives the guard listener, which Serve creates on its own
// goroutine.
type guardRef struct {
	p atomic.Pointer[guard.Listener]
}

// get waits for Serve to have wrapped its listener.
func (r *guardRef) get(t testing.TB) *guard.Listener {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if gl := r.p.Load(); gl != nil {
			return gl
		}
		if time.Now().After(deadline) {
			t.Fatal("Serve never wrapped its listener")
		}
		time.Sleep(time.Millisecond)
	}
}

// guarded is the common case: the guard with its default limits.
func guarded() option { return withGuard(nil, guard.Limits{}) }

// logBuffer collects a server's log lines for assertions.
type logBuffer struct{ testutil.Buffer }

func (l *logBuffer) count(s string) int { return strings.Count(l.String(), s) }

// withLog sends the server's log to lb.
func withLog(lb *logBuffer) option {
	return withConfig(func(c *server.Config) {
		c.Logger = slog.New(slog.NewTextHandler(lb, nil))
	})
}

// quietLog discards the server's log (tests that provoke warnings on
// purpose, by the hundred).
func quietLog() option {
	return withConfig(func(c *server.Config) { c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil)) })
}

// ---------------------------------------------------------------------------
// TLS.

// tlsServer is a server with a TLS port and, optionally, a plain port beside
// it: Addr is the plain one ("" when there is none), TLSAddr the TLS one.
type tlsServer struct {
	*testServer
	TLSAddr string
}

// startTLSServer starts an in-process celld serving TLS with tc through
// Server.ServeTLS, and plain TCP too when plain is set, both on 127.0.0.1:0
// and sharing one server, as main does with --tls-port beside --addr.
func startTLSServer(t testing.TB, tc *tls.Config, plain bool, opts ...option) *tlsServer {
	t.Helper()
	ts := &testServer{Store: store.New(store.Options{})}
	cfg := server.Config{Addr: "127.0.0.1:0", TLSConfig: tc}
	for _, o := range opts {
		o(&cfg, ts)
	}
	srv, err := server.New(cfg, ts.Store)
	if err != nil {
		t.Fatal(err)
	}
	ts.Srv = srv
	out := &tlsServer{testServer: ts}
	tln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	out.TLSAddr = tln.Addr().String()
	var serves []chan error
	serve := func(f func() error) {
		ch := make(chan error, 1)
		serves = append(serves, ch)
		go func() { ch <- f() }()
	}
	serve(func() error { return srv.ServeTLS(tln) })
	if plain {
		pln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ts.Addr = pln.Addr().String()
		serve(func() error { return srv.Serve(pln) })
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		for _, ch := range serves {
			if err := <-ch; err != nil {
				t.Errorf("serve: %v", err)
			}
		}
	})
	return out
}

// pki is a throwaway CA with a server certificate for 127.0.0.1/localhost
// and a client certificate, all written as PEM files into a t.TempDir().
type pki struct {
	Dir                             string
	CAFile, CertFile, KeyFile       string // the server's
	ClientCert, ClientKey           string
	CAPool                          *x509.CertPool
	ServerPair, ClientPair          tls.Certificate
	OtherClientPair                 tls.Certificate // signed by a different CA
	OtherClientCert, OtherClientKey string
}

func newPKI(t testing.TB) *pki {
	t.Helper()
	dir := t.TempDir()
	p := &pki{Dir: dir, CAPool: x509.NewCertPool()}
	caKey, caCert, caDER := makeCA(t, "celld test CA")
	p.CAPool.AddCert(caCert)
	p.CAFile = writePEM(t, dir, "ca.crt", "CERTIFICATE", caDER)

	srvDER, srvKey := makeLeaf(t, caCert, caKey, "celld test server", x509.ExtKeyUsageServerAuth,
		[]string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback})
	p.CertFile = writePEM(t, dir, "server.crt", "CERTIFICATE", srvDER)
	p.KeyFile = writePEM(t, dir, "server.key", "EC PRIVATE KEY", srvKey)
	p.ServerPair = loadPair(t, p.CertFile, p.KeyFile)

	cliDER, cliKey := makeLeaf(t, caCert, caKey, "celld test client", x509.ExtKeyUsageClientAuth, nil, nil)
	p.ClientCert = writePEM(t, dir, "client.crt", "CERTIFICATE", cliDER)
	p.ClientKey = writePEM(t, dir, "client.key", "EC PRIVATE KEY", cliKey)
	p.ClientPair = loadPair(t, p.ClientCert, p.ClientKey)

	otherKey, otherCA, _ := makeCA(t, "some other CA")
	oDER, oKey := makeLeaf(t, otherCA, otherKey, "stranger", x509.ExtKeyUsageClientAuth, nil, nil)
	p.OtherClientCert = writePEM(t, dir, "other.crt", "CERTIFICATE", oDER)
	p.OtherClientKey = writePEM(t, dir, "other.key", "EC PRIVATE KEY", oKey)
	p.OtherClientPair = loadPair(t, p.OtherClientCert, p.OtherClientKey)
	return p
}

// serverConfig is what main's applyAccess builds: the key pair, TLS 1.2+,
// and with requireClient the CA as the only accepted client issuer.
func (p *pki) serverConfig(requireClient bool) *tls.Config {
	tc := &tls.Config{Certificates: []tls.Certificate{p.ServerPair}, MinVersion: tls.VersionTLS12}
	if requireClient {
		tc.ClientCAs, tc.ClientAuth = p.CAPool, tls.RequireAndVerifyClientCert
	}
	return tc
}

// clientConfig trusts the test CA and presents the client certificate when
// withCert is set.
func (p *pki) clientConfig(withCert bool) *tls.Config {
	tc := &tls.Config{RootCAs: p.CAPool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}
	if withCert {
		tc.Certificates = []tls.Certificate{p.ClientPair}
	}
	return tc
}

var serial struct {
	sync.Mutex
	n int64
}

func nextSerial() *big.Int {
	serial.Lock()
	defer serial.Unlock()
	serial.n++
	return big.NewInt(serial.n)
}

func makeCA(t testing.TB, cn string) (*ecdsa.PrivateKey, *x509.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          nextSerial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return key, cert, der
}

// makeLeaf returns a certificate signed by ca and its private key, DER.
func makeLeaf(t testing.TB, ca *x509.Certificate, caKey *ecdsa.PrivateKey, cn string, usage x509.ExtKeyUsage,
	dns []string, ips []net.IP) (certDER, keyDER []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: nextSerial(),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     dns,
		IPAddresses:  ips,
	}
	certDER, err = x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err = x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return certDER, keyDER
}

func writePEM(t testing.TB, dir, name, typ string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func loadPair(t testing.TB, certFile, keyFile string) tls.Certificate {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

// readReply reads one whole RESP2/RESP3 reply and returns its bytes.
func (rc *rawConn) readReply() string {
	rc.t.Helper()
	line := rc.readLine()
	if len(line) < 3 {
		rc.t.Fatalf("bad reply line %q", line)
	}
	n := func() int {
		v, err := strconv.Atoi(strings.TrimSuffix(line[1:], "\r\n"))
		if err != nil {
			rc.t.Fatalf("bad length in %q", line)
		}
		return v
	}
	switch line[0] {
	case '$', '=', '!':
		if k := n(); k >= 0 {
			return line + rc.read(k+2)
		}
	case '*', '~', '>':
		var b strings.Builder
		b.WriteString(line)
		for k := n(); k > 0; k-- {
			b.WriteString(rc.readReply())
		}
		return b.String()
	case '%', '|':
		var b strings.Builder
		b.WriteString(line)
		for k := 2 * n(); k > 0; k-- {
			b.WriteString(rc.readReply())
		}
		return b.String()
	}
	return line
}

// runRawOnly is runRaw without its closing PING, for transcripts that end
// unauthenticated (PING would be answered NOAUTH).
func runRawOnly(t *testing.T, rc *rawConn, steps []rawStep) {
	t.Helper()
	for i, st := range steps {
		rc.write(st.send)
		if got := rc.read(len(st.want)); got != st.want {
			t.Fatalf("step %d: sent %q\n got: %q\nwant: %q", i, st.send, got, st.want)
		}
	}
}
