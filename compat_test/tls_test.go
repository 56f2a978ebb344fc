package compat_test

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/celld/celld/guard"
	"github.com/redis/go-redis/v9"
)

// TLS: Server.ServeTLS with the protocol guard over the tls.Listener (as main
// wires --tls-port), a plain port beside it sharing the state, client
// certificates with a CA, go-redis and redis-cli --tls as clients. The CA,
// server and client certificates are made for each test in t.TempDir().

func goRedisTLS(t *testing.T, addr string, tc *tls.Config, mods ...func(*redis.Options)) *redis.Client {
	t.Helper()
	opt := &redis.Options{Addr: addr, TLSConfig: tc, MaxRetries: -1}
	for _, m := range mods {
		m(opt)
	}
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

func throttleOnce(rdb *redis.Client, key string) ([]int64, error) {
	return rdb.Do(ctx, "CL.THROTTLE", key, 15, 30, 60).Int64Slice()
}

// TLS port beside the plain one: both serve the same limiter state.
func TestTLSGoRedisBesidePlain(t *testing.T) {
	p := newPKI(t)
	ts := startTLSServer(t, p.serverConfig(false), true, guarded())
	for _, proto := range []int{3, 2} {
		rdb := goRedisTLS(t, ts.TLSAddr, p.clientConfig(false), func(o *redis.Options) { o.Protocol = proto })
		if err := rdb.Ping(ctx).Err(); err != nil {
			t.Fatalf("RESP%d over TLS: PING: %v", proto, err)
		}
	}
	tlsClient := goRedisTLS(t, ts.TLSAddr, p.clientConfig(false))
	plainClient := newGoRedis(t, ts.testServer)
	for i, c := range []*redis.Client{tlsClient, plainClient, tlsClient} {
		got, err := throttleOnce(c, "shared")
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if want := int64(15 - i); len(got) != 5 || got[2] != want {
			t.Fatalf("call %d: %v, want remaining %d (one limiter for both ports)", i, got, want)
		}
	}
	// The TLS port speaks only TLS: plaintext RESP gets no answer, and the
	// server carries on.
	conn, err := net.Dial("tcp", ts.TLSAddr)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(conn, "PING\r\n")
	got, _ := io.ReadAll(conn)
	conn.Close()
	if strings.Contains(string(got), "PONG") {
		t.Fatalf("plaintext on the TLS port was answered: %q", got)
	}
	if err := tlsClient.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
}

// TLS only (--addr ”): no plain port at all.
func TestTLSOnly(t *testing.T) {
	p := newPKI(t)
	ts := startTLSServer(t, p.serverConfig(false), false, guarded())
	if ts.Addr != "" {
		t.Fatalf("a plain port is open: %s", ts.Addr)
	}
	if _, err := throttleOnce(goRedisTLS(t, ts.TLSAddr, p.clientConfig(false)), "k"); err != nil {
		t.Fatal(err)
	}
}

// --tls-ca: clients must present a certificate the CA signed.
func TestTLSClientCertificates(t *testing.T) {
	p := newPKI(t)
	ts := startTLSServer(t, p.serverConfig(true), false, guarded())
	if _, err := throttleOnce(goRedisTLS(t, ts.TLSAddr, p.clientConfig(true)), "k"); err != nil {
		t.Fatalf("with the CA's client certificate: %v", err)
	}
	if err := goRedisTLS(t, ts.TLSAddr, p.clientConfig(false)).Ping(ctx).Err(); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	stranger := p.clientConfig(false)
	stranger.Certificates = []tls.Certificate{p.OtherClientPair}
	if err := goRedisTLS(t, ts.TLSAddr, stranger).Ping(ctx).Err(); err == nil {
		t.Fatal("a client with a certificate from another CA was served")
	}
}

// requirepass over TLS: go-redis's Password (HELLO 3 AUTH), and the guard's
// pre-authentication limits apply on the TLS port too.
func TestTLSWithPassword(t *testing.T) {
	p := newPKI(t)
	ts := startTLSServer(t, p.serverConfig(false), false, withPassword(testPass), guarded())
	rdb := goRedisTLS(t, ts.TLSAddr, p.clientConfig(false), func(o *redis.Options) { o.Password = testPass })
	if _, err := throttleOnce(rdb, "k"); err != nil {
		t.Fatal(err)
	}
	noPass := goRedisTLS(t, ts.TLSAddr, p.clientConfig(false))
	if err := noPass.Get(ctx, "k").Err(); err == nil || err.Error() != "NOAUTH Authentication required." {
		t.Fatalf("no password: %v", err)
	}
	conn, err := tls.Dial("tcp", ts.TLSAddr, p.clientConfig(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(conn, "*11\r\n")
	got, _ := io.ReadAll(conn)
	if string(got) != unauthMultibulk {
		t.Fatalf("11 arguments before AUTH over TLS: got %q", got)
	}
}

// The protocol guard sits above TLS: a bad length over TLS gets Redis's
// error and the connection ends; the server carries on.
func TestTLSGuarded(t *testing.T) {
	p := newPKI(t)
	ts := startTLSServer(t, p.serverConfig(false), false, guarded())
	conn, err := tls.Dial("tcp", ts.TLSAddr, p.clientConfig(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(conn, "PING\r\n*1\r\n$9223372036854775807\r\n")
	got, _ := io.ReadAll(conn)
	if string(got) != "+PONG\r\n-ERR Protocol error: invalid bulk length\r\n" {
		t.Fatalf("got %q", got)
	}
	if err := goRedisTLS(t, ts.TLSAddr, p.clientConfig(false)).Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
}

// Over maxclients on the TLS port, the refusal needs a TLS handshake, which
// waits for the client. A client that connects and says nothing must not
// stop the accept loop: the next client is served as soon as a slot frees.
func TestTLSMaxClientsSilentClient(t *testing.T) {
	p := newPKI(t)
	var ref guardRef
	ts := startTLSServer(t, p.serverConfig(false), false, withGuard(&ref, guard.Limits{}, guard.MaxClients(1)))
	holder, err := tls.Dial("tcp", ts.TLSAddr, p.clientConfig(false))
	if err != nil {
		t.Fatal(err)
	}
	holder.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(holder, "PING\r\n")
	if line, err := bufio.NewReader(holder).ReadString('\n'); line != "+PONG\r\n" {
		t.Fatalf("first client: %q, %v", line, err)
	}
	gl := ref.get(t)
	silent, err := net.Dial("tcp", ts.TLSAddr) // no ClientHello, ever
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	waitFor(t, "the silent client to be refused", func() bool { return gl.Rejected() == 1 })

	// A TLS client over the limit gets Redis's text after the handshake.
	over, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", ts.TLSAddr, p.clientConfig(false))
	if err == nil {
		over.SetDeadline(time.Now().Add(10 * time.Second))
		got, _ := io.ReadAll(over)
		over.Close()
		if string(got) != maxClientsReply {
			t.Fatalf("TLS client over the limit got %q", got)
		}
	}
	holder.Close()
	waitFor(t, "the slot to be freed", func() bool { return gl.Clients() == 0 })
	start := time.Now()
	rdb := goRedisTLS(t, ts.TLSAddr, p.clientConfig(false), func(o *redis.Options) { o.DialTimeout = 10 * time.Second })
	if err := rdb.Ping(ctx).Err(); err != nil {
		t.Fatalf("after the slot freed: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the next client waited %v: the accept loop was held by the silent client", d)
	}
}

// redis-cli --tls, as users run it. Debian's redis-tools is built with TLS.
func TestTLSRedisCli(t *testing.T) {
	cli := needRedisCli(t)
	if out, _ := exec.Command(cli, "--help").CombinedOutput(); !strings.Contains(string(out), "--tls") {
		t.Fatalf("%s has no TLS support (--tls missing from --help); install a redis-tools built with TLS", cli)
	}
	p := newPKI(t)
	run := func(t *testing.T, addr string, extra []string, args ...string) string {
		t.Helper()
		host, port, _ := net.SplitHostPort(addr)
		argv := append([]string{"--tls", "--cacert", p.CAFile, "-h", host, "-p", port}, extra...)
		argv = append(argv, args...)
		cmd := exec.Command(cli, argv...)
		cmd.Env = []string{"HOME=" + t.TempDir(), "REDISCLI_HISTFILE=/dev/null"}
		done := make(chan struct{})
		var out []byte
		var err error
		go func() { out, err = cmd.CombinedOutput(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Fatalf("redis-cli %v hung", argv)
		}
		if err != nil {
			t.Logf("redis-cli %v: %v", argv, err)
		}
		return strings.TrimSpace(string(out))
	}

	t.Run("server certificate", func(t *testing.T) {
		ts := startTLSServer(t, p.serverConfig(false), true, guarded())
		if got := run(t, ts.TLSAddr, nil, "PING"); got != "PONG" {
			t.Fatalf("PING: %q", got)
		}
		if got := run(t, ts.TLSAddr, nil, "CL.THROTTLE", "cli", "15", "30", "60"); got != "0\n16\n15\n-1\n2" {
			t.Fatalf("CL.THROTTLE: %q", got)
		}
		// The same limiter through the plain port.
		host, port, _ := net.SplitHostPort(ts.Addr)
		out, err := exec.Command(cli, "-h", host, "-p", port, "CL.THROTTLE", "cli", "15", "30", "60").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "0\n16\n14\n-1\n4" {
			t.Fatalf("plain port: %q, %v", out, err)
		}
	})

	t.Run("client certificate", func(t *testing.T) {
		ts := startTLSServer(t, p.serverConfig(true), false, guarded())
		if got := run(t, ts.TLSAddr, []string{"--cert", p.ClientCert, "--key", p.ClientKey}, "PING"); got != "PONG" {
			t.Fatalf("with the client certificate: %q", got)
		}
		if got := run(t, ts.TLSAddr, nil, "PING"); got == "PONG" {
			t.Fatal("served without a client certificate")
		}
		if got := run(t, ts.TLSAddr, []string{"--cert", p.OtherClientCert, "--key", p.OtherClientKey}, "PING"); got == "PONG" {
			t.Fatal("served with another CA's client certificate")
		}
	})

	t.Run("password", func(t *testing.T) {
		ts := startTLSServer(t, p.serverConfig(false), false, withPassword(testPass), guarded())
		if got := run(t, ts.TLSAddr, []string{"--no-auth-warning", "-a", testPass}, "CL.THROTTLE", "k", "1", "1", "1"); got != "0\n2\n1\n-1\n1" {
			t.Fatalf("with -a: %q", got)
		}
		if got := run(t, ts.TLSAddr, nil, "GET", "k"); !strings.Contains(got, "NOAUTH Authentication required.") {
			t.Fatalf("without -a: %q", got)
		}
		if got := run(t, ts.TLSAddr, []string{"--no-auth-warning", "-a", "wrong"}, "PING"); !strings.Contains(got, "WRONGPASS") && !strings.Contains(got, "NOAUTH") {
			t.Fatalf("wrong -a: %q", got)
		}
	})
}
