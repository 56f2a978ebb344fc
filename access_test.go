package main

import (
	"bufio"
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
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/celld/celld/config"
	"github.com/celld/celld/server"
	"github.com/celld/celld/store"
	"github.com/redis/go-redis/v9"
)

// access.go: the flags and environment that configure authentication,
// protected mode, the guard's limits and TLS, and their wiring.

func defaultAccess(t *testing.T) *config.Config {
	t.Helper()
	c, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestAccessFlagDefaults(t *testing.T) {
	for _, name := range []string{"CELLD_REQUIREPASS", "CELLD_REQUIREPASS_FILE", "CELLD_PROTECTED_MODE",
		"CELLD_MAXCLIENTS", "CELLD_PROTO_MAX_BULK_LEN", "CELLD_TLS_PORT"} {
		t.Setenv(name, "")
		os.Unsetenv(name)
	}
	a := defaultAccess(t)
	if a.MaxClients != 10000 || a.MaxBulk != 512<<10 || !a.ProtectedMode || a.TLSPort != 0 || a.RequirePassFile != "" {
		t.Fatalf("defaults: %+v", a)
	}
	var sc server.Config
	lim, err := applyAccess(a, &sc, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	if sc.RequirePass != "" || !sc.ProtectedMode || sc.TLSConfig != nil || sc.WrapListener == nil {
		t.Fatalf("server config: pass %q, protected %v, tls %v, wrap %v", sc.RequirePass, sc.ProtectedMode, sc.TLSConfig, sc.WrapListener != nil)
	}
	if lim.MaxArgs != 1<<20 || lim.MaxBulk != 512<<10 || lim.MaxInline != 64<<10 {
		t.Fatalf("guard limits: %+v", lim)
	}
	// The password is never a plain flag (ps would show it).
	if _, err := parseFlags([]string{"--requirepass", "x"}); err == nil {
		t.Fatal("--requirepass is accepted as a flag")
	}
}

func TestAccessPasswordSources(t *testing.T) {
	t.Setenv("CELLD_REQUIREPASS", "from-env")
	a := defaultAccess(t)
	var sc server.Config
	if _, err := applyAccess(a, &sc, quietLog()); err != nil {
		t.Fatal(err)
	}
	if sc.RequirePass != "from-env" {
		t.Fatalf("env: RequirePass = %q", sc.RequirePass)
	}
	// The file wins over the environment; its trailing newline is not part
	// of the password.
	f := filepath.Join(t.TempDir(), "pass")
	os.WriteFile(f, []byte("from file\n"), 0o600)
	c, err := parseFlags([]string{"--requirepass-file", f})
	if err != nil {
		t.Fatal(err)
	}
	sc = server.Config{}
	if _, err := applyAccess(c, &sc, quietLog()); err != nil {
		t.Fatal(err)
	}
	if sc.RequirePass != "from file" {
		t.Fatalf("file: RequirePass = %q", sc.RequirePass)
	}
	c.RequirePassFile = filepath.Join(t.TempDir(), "missing")
	if _, err := applyAccess(c, &sc, quietLog()); err == nil {
		t.Fatal("a missing --requirepass-file was accepted")
	}
}

func TestAccessRejectsBadSettings(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, caFile := writeTestCert(t, dir)
	notPEM := filepath.Join(dir, "garbage")
	os.WriteFile(notPEM, []byte("not a certificate"), 0o600)
	for _, tc := range []struct {
		name string
		mod  func(*config.Config)
	}{
		{"tls-port without cert", func(a *config.Config) { a.TLSPort = 6380 }},
		{"tls-port without key", func(a *config.Config) { a.TLSPort, a.TLSCert = 6380, certFile }},
		{"bad key pair", func(a *config.Config) { a.TLSPort, a.TLSCert, a.TLSKey = 6380, certFile, notPEM }},
		{"missing tls-ca", func(a *config.Config) {
			a.TLSPort, a.TLSCert, a.TLSKey, a.TLSCA = 6380, certFile, keyFile, filepath.Join(dir, "nope")
		}},
		{"tls-ca without certificates", func(a *config.Config) {
			a.TLSPort, a.TLSCert, a.TLSKey, a.TLSCA = 6380, certFile, keyFile, notPEM
		}},
		{"proto-max-bulk-len over 512 MB", func(a *config.Config) { a.MaxBulk = 512<<20 + 1 }},
		{"negative proto-max-bulk-len", func(a *config.Config) { a.MaxBulk = -1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := defaultAccess(t)
			tc.mod(a)
			var sc server.Config
			if _, err := applyAccess(a, &sc, quietLog()); err == nil {
				t.Fatal("accepted")
			}
		})
	}
	a := defaultAccess(t)
	a.TLSPort, a.TLSCert, a.TLSKey, a.TLSCA = 6380, certFile, keyFile, caFile
	var sc server.Config
	if _, err := applyAccess(a, &sc, quietLog()); err != nil {
		t.Fatal(err)
	}
	if sc.TLSConfig == nil || sc.TLSConfig.ClientAuth != tls.RequireAndVerifyClientCert || sc.TLSConfig.MinVersion != tls.VersionTLS12 {
		t.Fatalf("TLS config: %+v", sc.TLSConfig)
	}
}

// --proto-max-bulk-len above the default works end to end: the query
// buffer limit follows it, so a bulk of exactly that size is accepted.
func TestProtoMaxBulkLenRaised(t *testing.T) {
	a := defaultAccess(t)
	a.MaxBulk = 4 << 20
	lns := serveAccess(t, a, freeAddr(t), io.Discard)
	rdb := redis.NewClient(&redis.Options{Addr: lns[0].ln.Addr().String(), MaxRetries: -1})
	defer rdb.Close()
	big := strings.Repeat("v", 4<<20)
	if got, err := rdb.Echo(context.Background(), big).Result(); err != nil || got != big {
		t.Fatalf("ECHO of --proto-max-bulk-len bytes: %d bytes, %v", len(got), err)
	}
	if err := rdb.Echo(context.Background(), big+"v").Err(); err == nil {
		t.Fatal("a bulk over --proto-max-bulk-len was accepted")
	}
}

// --proto-max-bulk-len below Redis's 16 KiB unauthenticated bulk limit
// (which config accepts: any size from 1 byte) starts: the unauthenticated
// limit follows it down instead of failing start-up with the guard's
// "UnauthMaxBulk 16384 not in [1, MaxBulk=1000]".
func TestProtoMaxBulkLenBelowUnauthLimit(t *testing.T) {
	c, err := parseFlags([]string{"--proto-max-bulk-len", "1k"})
	if err != nil {
		t.Fatal(err)
	}
	var sc server.Config
	if _, err := applyAccess(c, &sc, quietLog()); err != nil {
		t.Fatalf("--proto-max-bulk-len 1k refused at start-up: %v", err)
	}
	lns := serveAccess(t, c, freeAddr(t), io.Discard)
	rdb := redis.NewClient(&redis.Options{Addr: lns[0].ln.Addr().String(), MaxRetries: -1})
	defer rdb.Close()
	v := strings.Repeat("v", 1000)
	if got, err := rdb.Echo(context.Background(), v).Result(); err != nil || got != v {
		t.Fatalf("ECHO of --proto-max-bulk-len bytes: %d bytes, %v", len(got), err)
	}
	if err := rdb.Echo(context.Background(), v+"v").Err(); err == nil {
		t.Fatal("a bulk over --proto-max-bulk-len was accepted")
	}
}

// writeTestCert writes a CA and a server certificate for 127.0.0.1 signed by
// it; it returns the server's cert and key files and the CA file.
func writeTestCert(t *testing.T, dir string) (certFile, keyFile, caFile string) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "celld"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(key)
	write := func(name, typ string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("server.crt", "CERTIFICATE", der), write("server.key", "EC PRIVATE KEY", keyDER), write("ca.crt", "CERTIFICATE", caDER)
}

// serveAccess runs a server configured by applyAccess on the listeners
// openListeners opens, the way run does, until the test ends.
func serveAccess(t *testing.T, a *config.Config, addr string, logw io.Writer) []listener {
	t.Helper()
	a.Addr = addr
	log := slog.New(slog.NewTextHandler(logw, nil))
	sc := server.Config{Addr: addr, Logger: log}
	if _, err := applyAccess(a, &sc, log); err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(sc, store.New(store.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	lns, err := openListeners(a)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, len(lns))
	for _, l := range lns {
		go func() { served <- l.serve(srv) }()
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		for range lns {
			if err := <-served; err != nil {
				t.Errorf("serve: %v", err)
			}
		}
	})
	return lns
}

// --maxclients bounds the server, not each port: with a plain and a TLS
// port, the clients of both count against one limit, as in Redis.
func TestMaxClientsAcrossPlainAndTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, caFile := writeTestCert(t, dir)
	a := defaultAccess(t)
	a.MaxClients = 2
	a.TLSCert, a.TLSKey = certFile, keyFile
	_, port, _ := net.SplitHostPort(freeAddr(t))
	a.TLSPort = atoi(t, port)
	lns := serveAccess(t, a, freeAddr(t), io.Discard)
	if len(lns) != 2 || lns[0].tls || !lns[1].tls {
		t.Fatalf("listeners: %+v", lns)
	}
	plainAddr, tlsAddr := lns[0].ln.Addr().String(), lns[1].ln.Addr().String()
	pool := x509.NewCertPool()
	pemCA, _ := os.ReadFile(caFile)
	pool.AppendCertsFromPEM(pemCA)
	tc := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}

	ping := func(conn net.Conn) string {
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(conn, "PING\r\n")
		line, _ := bufio.NewReader(conn).ReadString('\n')
		return line
	}
	p1, err := net.Dial("tcp", plainAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer p1.Close()
	if got := ping(p1); got != "+PONG\r\n" {
		t.Fatalf("plain client: %q", got)
	}
	t1, err := tls.Dial("tcp", tlsAddr, tc)
	if err != nil {
		t.Fatal(err)
	}
	defer t1.Close()
	if got := ping(t1); got != "+PONG\r\n" {
		t.Fatalf("TLS client: %q", got)
	}
	// A third client, on either port, is over the limit of 2.
	p2, err := net.Dial("tcp", plainAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	p2.SetDeadline(time.Now().Add(10 * time.Second))
	got, _ := io.ReadAll(p2)
	if string(got) != "-ERR max number of clients reached\r\n" {
		t.Fatalf("third client (plain, with one plain and one TLS open): %q", got)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

// A cross-protocol attempt is logged, at most once a minute like Redis, with
// a count of those not logged.
func TestSecurityLogRateLimited(t *testing.T) {
	var buf testutil.Buffer
	now := time.Unix(1_700_000_000, 0)
	sl := &securityLog{log: slog.New(slog.NewTextHandler(&buf, nil)), now: func() time.Time { return now }}
	sl.warn("10.0.0.1:1")
	sl.warn("10.0.0.1:2")
	now = now.Add(59 * time.Second)
	sl.warn("10.0.0.1:3")
	if n := strings.Count(buf.String(), "SECURITY ATTACK"); n != 1 {
		t.Fatalf("%d log lines within a minute, want 1:\n%s", n, buf.String())
	}
	now = now.Add(2 * time.Second)
	sl.warn("10.0.0.1:4")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], "not_logged_since_last=2") || !strings.Contains(lines[1], "remote=10.0.0.1:4") {
		t.Fatalf("after a minute:\n%s", buf.String())
	}
}

// Through the real wiring: HTTP requests are closed without a reply, and
// several in a row log one line.
func TestSecurityWarningWiring(t *testing.T) {
	var buf testutil.Buffer
	lns := serveAccess(t, defaultAccess(t), freeAddr(t), &buf)
	addr := lns[0].ln.Addr().String()
	for range 3 {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(conn, "POST / HTTP/1.1\r\nHost: "+addr+"\r\n\r\n")
		got, _ := io.ReadAll(conn)
		conn.Close()
		if len(got) != 0 {
			t.Fatalf("an HTTP request was answered %q", got)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(buf.String(), "SECURITY ATTACK") && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := strings.Count(buf.String(), "SECURITY ATTACK"); n != 1 {
		t.Fatalf("%d log lines for 3 attempts, want 1:\n%s", n, buf.String())
	}
}

// The real binary: the password from CELLD_REQUIREPASS and from
// --requirepass-file, TLS on --tls-port with --tls-ca, redis-cli --tls.
func TestProcessAuthAndTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, caFile := writeTestCert(t, dir)
	passFile := filepath.Join(dir, "pass")
	os.WriteFile(passFile, []byte("s3cret\n"), 0o600)
	_, tlsPort, _ := net.SplitHostPort(freeAddr(t))
	t.Setenv("CELLD_REQUIREPASS", "ignored-the-file-wins")
	c := mustLaunch(t, t.TempDir(), "--persist=false", "--requirepass-file", passFile,
		"--tls-port", tlsPort, "--tls-cert", certFile, "--tls-key", keyFile, "--tls-ca", caFile)
	plain := redis.NewClient(&redis.Options{Addr: c.addr, Password: "s3cret", MaxRetries: -1})
	defer plain.Close()
	if err := plain.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("plain port with the file's password: %v", err)
	}
	none := redis.NewClient(&redis.Options{Addr: c.addr, MaxRetries: -1})
	defer none.Close()
	if err := none.Ping(context.Background()).Err(); err == nil || err.Error() != "NOAUTH Authentication required." {
		t.Fatalf("no password: %v", err)
	}

	pair, _ := tls.LoadX509KeyPair(certFile, keyFile) // also a client certificate
	pool := x509.NewCertPool()
	pemCA, _ := os.ReadFile(caFile)
	pool.AppendCertsFromPEM(pemCA)
	host, _, _ := net.SplitHostPort(c.addr)
	tlsAddr := net.JoinHostPort(host, tlsPort)
	rdb := redis.NewClient(&redis.Options{Addr: tlsAddr, Password: "s3cret", MaxRetries: -1,
		TLSConfig: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", Certificates: []tls.Certificate{pair}}})
	defer rdb.Close()
	got, err := rdb.Do(context.Background(), "CL.THROTTLE", "k", 15, 30, 60).Int64Slice()
	if err != nil || len(got) != 5 {
		t.Fatalf("TLS port: %v, %v", got, err)
	}

	// CI installs redis-tools (.ci/run sets CI); a developer's fresh
	// machine may lack redis-cli, and then only this step is left out.
	if cli, err := exec.LookPath("redis-cli"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-cli not found on PATH: .ci/run installs redis-tools")
		}
		t.Log("redis-cli not installed: the redis-cli --tls step is left out (apt-get install redis-tools; CI always runs it)")
	} else {
		out, err := exec.Command(cli, "--tls", "--cacert", caFile, "--cert", certFile, "--key", keyFile,
			"-h", host, "-p", tlsPort, "--no-auth-warning", "-a", "s3cret", "CL.THROTTLE", "k", "15", "30", "60").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "0\n16\n14\n-1\n4" {
			t.Fatalf("redis-cli --tls: %q, %v", out, err)
		}
	}
	c.termOK()

	// The environment variable, when there is no file.
	t.Setenv("CELLD_REQUIREPASS", "from-env")
	c = mustLaunch(t, t.TempDir(), "--persist=false")
	envc := redis.NewClient(&redis.Options{Addr: c.addr, Password: "from-env", MaxRetries: -1})
	defer envc.Close()
	if err := envc.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("CELLD_REQUIREPASS: %v", err)
	}
	c.termOK()
}
