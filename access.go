package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/celld/celld/config"
	"github.com/celld/celld/guard"
	"github.com/celld/celld/server"
)

// applyAccess fills the server config's access settings and returns the
// guard limits to wrap listeners with.
func applyAccess(a *config.Config, sc *server.Config, log *slog.Logger) (guard.Limits, error) {
	pass := a.RequirePass
	if a.RequirePassFile != "" {
		b, err := os.ReadFile(a.RequirePassFile)
		if err != nil {
			return guard.Limits{}, fmt.Errorf("--requirepass-file: %w", err)
		}
		pass = strings.TrimRight(string(b), "\r\n")
	}
	sc.RequirePass = pass
	sc.ProtectedMode = a.ProtectedMode
	if a.TLSPort != 0 {
		if a.TLSCert == "" || a.TLSKey == "" {
			return guard.Limits{}, errors.New("--tls-port needs --tls-cert and --tls-key")
		}
		cert, err := tls.LoadX509KeyPair(a.TLSCert, a.TLSKey)
		if err != nil {
			return guard.Limits{}, fmt.Errorf("TLS key pair: %w", err)
		}
		tc := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		if a.TLSCA != "" {
			pem, err := os.ReadFile(a.TLSCA)
			if err != nil {
				return guard.Limits{}, fmt.Errorf("--tls-ca: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return guard.Limits{}, fmt.Errorf("--tls-ca %s: no certificates found", a.TLSCA)
			}
			tc.ClientCAs, tc.ClientAuth = pool, tls.RequireAndVerifyClientCert
		}
		sc.TLSConfig = tc
	}
	lim := guard.DefaultLimits()
	lim.MaxBulk = a.MaxBulk
	lim.MaxArgs = a.MaxMultibulk
	// --client-query-buffer-limit, or zero: the guard derives it from
	// MaxBulk (twice it, at least 1 MiB). DefaultLimits' fixed value would
	// refuse any --proto-max-bulk-len above it at start-up, and a bulk of
	// exactly that size at run time.
	lim.MaxQueryBuffer = a.QueryBufferLimit
	// Zero too: Redis's 16 KiB before AUTH, or MaxBulk when that is less
	// (a fixed 16 KiB would refuse any --proto-max-bulk-len below it);
	// the unauthenticated argument count is derived again from MaxArgs.
	lim.UnauthMaxBulk = 0
	lim.UnauthMaxArgs = 0
	if err := lim.Validate(); err != nil {
		return lim, err
	}
	sec := &securityLog{log: log, now: time.Now}
	opts := []guard.Option{
		guard.RequireAuth(pass != ""),
		guard.MaxClients(a.MaxClients),
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

// openListeners binds the plain port (unless cfg serves none: --addr ”
// or port 0) and the TLS port (when --tls-port is set, on --addr's host,
// 127.0.0.1 when --addr is ”).
func openListeners(cfg *config.Config) ([]listener, error) {
	var out []listener
	closeAll := func() {
		for _, l := range out {
			l.ln.Close()
		}
	}
	if cfg.PlainEnabled() {
		ln, err := net.Listen("tcp", cfg.Addr)
		if err != nil {
			return nil, fmt.Errorf("listen %s: %w", cfg.Addr, err)
		}
		out = append(out, listener{ln: ln})
	}
	if taddr := cfg.TLSAddr(); taddr != "" {
		ln, err := net.Listen("tcp", taddr)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("listen %s (--tls-port): %w", taddr, err)
		}
		out = append(out, listener{ln: ln, tls: true})
	}
	if len(out) == 0 {
		return nil, errors.New("nothing to listen on: no plain port (--addr) and --tls-port is 0")
	}
	return out, nil
}
