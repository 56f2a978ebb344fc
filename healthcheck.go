package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/celld/celld/config"
)

// healthcheck is --healthcheck: PING the server cfg describes and exit 0
// if it answered, 1 if not. It dials the plain port when one is served,
// else the TLS port, so a TLS-only container's HEALTHCHECK works.
func healthcheck(cfg *config.Config) int {
	if err := ping(cfg, 2*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "celld: healthcheck:", err)
		return 1
	}
	return 0
}

// ping sends PING and reads the first reply line. "+PONG", or "-NOAUTH"
// when a password is set, both mean the server is up and answering.
//
// Over TLS the server's certificate is not verified: the probe checks that
// the process beside it answers, not who it is (it dials loopback, or the
// host celld is bound to). With --tls-ca set the server wants a client
// certificate; ping presents --tls-cert/--tls-key, and a server that
// refuses it with a TLS alert is answering too.
func ping(cfg *config.Config, timeout time.Duration) error {
	addr, useTLS := cfg.Addr, false
	if !cfg.PlainEnabled() {
		addr, useTLS = cfg.TLSAddr(), true
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(host, port), timeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout))
	if useTLS {
		tc := &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}
		if cfg.TLSCA != "" {
			if pair, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey); err == nil {
				tc.Certificates = []tls.Certificate{pair}
			}
		}
		conn = tls.Client(conn, tc)
	}
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return answeredTLS(err)
	}
	buf := make([]byte, 7)
	if _, err := io.ReadFull(conn, buf); err != nil {
		return answeredTLS(err)
	}
	if string(buf) != "+PONG\r\n" && string(buf) != "-NOAUTH" {
		return fmt.Errorf("no PONG from %s: %q", addr, buf)
	}
	return nil
}

// answeredTLS is nil when err is a TLS alert from the server (it is up and
// speaking TLS, and refused our client certificate), else err.
func answeredTLS(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "remote error" {
		fmt.Fprintln(os.Stderr, "celld: healthcheck: the server answered with a TLS alert (it refused the client certificate):", err)
		return nil
	}
	return err
}
