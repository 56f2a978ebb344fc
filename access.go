package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/celld/celld/guard"
	"github.com/celld/celld/server"
)

// accessConfig is the network-facing part of the configuration: the
// protocol guard's limits, authentication, protected mode and TLS.
type accessConfig struct {
	requirePassFile string
	protectedMode   string
	maxClients      int
	maxBulk         int64
	tlsCert         string
	tlsKey          string
	tlsCA           string
	tlsPort         int
	limits          limitsConfig // main_limits.go
}

func registerAccessFlags(fs *flag.FlagSet, a *accessConfig) {
	maxClients, _ := strconv.Atoi(envOr("CELLD_MAXCLIENTS", "10000"))
	maxBulk, _ := strconv.ParseInt(envOr("CELLD_PROTO_MAX_BULK_LEN", "524288"), 10, 64)
	tlsPort, _ := strconv.Atoi(envOr("CELLD_TLS_PORT", "0"))
	fs.StringVar(&a.requirePassFile, "requirepass-file", envOr("CELLD_REQUIREPASS_FILE", ""), "file holding the default user's password (or set env CELLD_REQUIREPASS; never a plain flag, which ps would show)")
	fs.StringVar(&a.protectedMode, "protected-mode", envOr("CELLD_PROTECTED_MODE", "yes"), "yes: with no password, refuse clients that are not on loopback (env CELLD_PROTECTED_MODE)")
	fs.IntVar(&a.maxClients, "maxclients", maxClients, "maximum simultaneous connections (env CELLD_MAXCLIENTS)")
	fs.Int64Var(&a.maxBulk, "proto-max-bulk-len", maxBulk, "largest bulk string accepted, bytes, up to 512 MB (env CELLD_PROTO_MAX_BULK_LEN)")
	fs.StringVar(&a.tlsCert, "tls-cert", envOr("CELLD_TLS_CERT", ""), "TLS certificate file (PEM) (env CELLD_TLS_CERT)")
	fs.StringVar(&a.tlsKey, "tls-key", envOr("CELLD_TLS_KEY", ""), "TLS private key file (PEM) (env CELLD_TLS_KEY)")
	fs.StringVar(&a.tlsCA, "tls-ca", envOr("CELLD_TLS_CA", ""), "CA file (PEM): when set, clients must present a certificate it signed (env CELLD_TLS_CA)")
	fs.IntVar(&a.tlsPort, "tls-port", tlsPort, "TLS port on --addr's host; 0 = no TLS. With --addr '' only TLS is served (env CELLD_TLS_PORT)")
	registerLimitsFlags(fs, &a.limits)
}

// applyAccess fills the server config's access settings and returns the
// guard limits to wrap listeners with.
func applyAccess(a accessConfig, sc *server.Config, log *slog.Logger) (guard.Limits, error) {
	pass := os.Getenv("CELLD_REQUIREPASS")
	if a.requirePassFile != "" {
		b, err := os.ReadFile(a.requirePassFile)
		if err != nil {
			return guard.Limits{}, fmt.Errorf("--requirepass-file: %w", err)
		}
		pass = strings.TrimRight(string(b), "\r\n")
	}
	sc.RequirePass = pass
	switch a.protectedMode {
	case "yes":
		sc.ProtectedMode = true
	case "no":
	default:
		return guard.Limits{}, fmt.Errorf("--protected-mode must be yes or no, not %q", a.protectedMode)
	}
	if a.tlsPort != 0 {
		if a.tlsCert == "" || a.tlsKey == "" {
			return guard.Limits{}, errors.New("--tls-port needs --tls-cert and --tls-key")
		}
		cert, err := tls.LoadX509KeyPair(a.tlsCert, a.tlsKey)
		if err != nil {
			return guard.Limits{}, fmt.Errorf("TLS key pair: %w", err)
		}
		tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		if a.tlsCA != "" {
			pem, err := os.ReadFile(a.tlsCA)
			if err != nil {
				return guard.Limits{}, fmt.Errorf("--tls-ca: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return guard.Limits{}, fmt.Errorf("--tls-ca %s: no certificates found", a.tlsCA)
			}
			tc.ClientCAs, tc.ClientAuth = pool, tls.RequireAndVerifyClientCert
		}
		sc.TLSConfig = tc
	}
	lim := guard.DefaultLimits()
	lim.MaxBulk = a.maxBulk
	// Zero: the guard derives it from MaxBulk (twice it, at least 1 MiB).
	// DefaultLimits' fixed value would refuse any --proto-max-bulk-len
	// above it at start-up, and a bulk of exactly that size at run time.
	lim.MaxQueryBuffer = 0
	a.limits.apply(&lim) // --max-multibulk-len, --client-query-buffer-limit
	if err := lim.Validate(); err != nil {
		return lim, err
	}
	sec := &securityLog{log: log, now: time.Now}
	opts := []guard.Option{
		guard.RequireAuth(pass != ""),
		guard.MaxClients(a.maxClients),
		// One count for the plain and the TLS port: --maxclients bounds
		// the server, as Redis's maxclients does, not each port.
		guard.ShareClients(new(guard.Clients)),
		guard.OnSecurityWarning(sec.warn),
	}
	sc.WrapListener = func(ln net.Listener) net.Listener { return guard.NewListener(ln, lim, opts...) }
	return lim, nil
}

// securityLogEvery is how often, at most, a cross-protocol attempt is logged:
// Redis's securityWarningCommand logs once a minute at most, so that a
// flood of HTTP requests cannot flood the log.
const securityLogEvery = time.Minute

// securityLog logs the guard's security warnings (a client sent POST or
// Host:), at most once per securityLogEvery, with the number of further
// attempts it did not log. warn runs on connections' reading goroutines.
type securityLog struct {
	log *slog.Logger
	now func() time.Time

	mu         sync.Mutex
	last       time.Time // zero until the first warning
	suppressed int64
}

func (s *securityLog) warn(remote string) {
	s.mu.Lock()
	now := s.now()
	if !s.last.IsZero() && now.Sub(s.last) < securityLogEvery {
		s.suppressed++
		s.mu.Unlock()
		return
	}
	s.last = now
	n := s.suppressed
	s.suppressed = 0
	s.mu.Unlock()
	s.log.Warn("possible SECURITY ATTACK detected: a client sent POST or Host: (cross-protocol scripting); connection closed",
		"remote", remote, "not_logged_since_last", n)
}

// listener is one port to serve: plain or TLS.
type listener struct {
	ln  net.Listener
	tls bool
}

func (l listener) serve(srv *server.Server) error {
	if l.tls {
		return srv.ServeTLS(l.ln)
	}
	return srv.Serve(l.ln)
}

// openListeners opens the plain port (unless --addr is empty) and the TLS
// port (when --tls-port is set).
func openListeners(addr string, a accessConfig) ([]listener, error) {
	var out []listener
	closeAll := func() {
		for _, l := range out {
			l.ln.Close()
		}
	}
	if addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("listen %s: %w", addr, err)
		}
		out = append(out, listener{ln: ln})
	}
	if a.tlsPort != 0 {
		host := "127.0.0.1"
		if addr != "" {
			if h, _, err := net.SplitHostPort(addr); err == nil {
				host = h
			}
		}
		taddr := net.JoinHostPort(host, strconv.Itoa(a.tlsPort))
		ln, err := net.Listen("tcp", taddr)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("listen %s: %w", taddr, err)
		}
		out = append(out, listener{ln: ln, tls: true})
	}
	if len(out) == 0 {
		return nil, errors.New("nothing to listen on: --addr is empty and --tls-port is 0")
	}
	return out, nil
}
