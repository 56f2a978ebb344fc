package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/celld/celld/config"
	"github.com/celld/celld/metrics"
	"github.com/celld/celld/server"
	"github.com/celld/celld/sidecar"
)

// newSidecar builds sidecar mode from --upstream and its companions (nil,
// nil when --upstream is empty). It reads the password and TLS files, so
// a missing one fails start-up; it dials nothing (Start does).
func newSidecar(cfg *config.Config, log *slog.Logger) (*sidecar.Sidecar, error) {
	if cfg.Upstream == "" {
		return nil, nil
	}
	mode, err := sidecar.ParseMode(cfg.UpstreamFallback)
	if err != nil {
		return nil, err
	}
	sc := sidecar.Config{Seeds: cfg.UpstreamSeeds(), Fallback: mode, Timeout: cfg.UpstreamTimeout, BulkTimeout: cfg.UpstreamBulkTimeout, Logger: log,
		// A reply past the clients' hard output limit closes the client:
		// the sidecar need not collect it (sidecar.Config.ReplyLimit).
		ReplyLimit: cfg.OutputBufferLimit.Hard}
	if cfg.UpstreamPasswordFile != "" {
		b, err := os.ReadFile(cfg.UpstreamPasswordFile)
		if err != nil {
			return nil, fmt.Errorf("--upstream-password-file: %w", err)
		}
		sc.Password = strings.TrimRight(string(b), "\r\n")
	}
	if cfg.UpstreamTLS {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if cfg.UpstreamTLSCA != "" {
			pem, err := os.ReadFile(cfg.UpstreamTLSCA)
			if err != nil {
				return nil, fmt.Errorf("--upstream-tls-ca: %w", err)
			}
			tc.RootCAs = x509.NewCertPool()
			if !tc.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("--upstream-tls-ca %s: no certificate in it", cfg.UpstreamTLSCA)
			}
		}
		if cfg.UpstreamTLSCert != "" {
			cert, err := tls.LoadX509KeyPair(cfg.UpstreamTLSCert, cfg.UpstreamTLSKey)
			if err != nil {
				return nil, fmt.Errorf("--upstream-tls-cert: %w", err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		sc.TLS = tc
	}
	return sidecar.New(sc)
}

// wireSidecar makes srvCfg forward through sc. The event loops serve the
// sidecar's clients as any others (--io-loops): a connection whose
// commands are upstream is parked, not blocked (sidecar/loop.go).
//
// A sidecar's loops do not busy-poll unless --busy-poll is given: what a
// sidecar's loop waits for is mostly an owner's reply, a network round
// trip away (rarely within the 50 µs a poll lasts), and a sidecar shares
// its CPU with the application beside it. Measured with bench/sidecar.sh
// (docs/sidecar.md): polling raised the sidecar's CPU per request and
// lowered the throughput at pipeline 16.
func wireSidecar(sc *sidecar.Sidecar, cfg *config.Config, srvCfg *server.Config) {
	if sc == nil {
		return
	}
	srvCfg.Forwarder = sc
	if !cfg.Given("busy-poll") {
		srvCfg.BusyPoll = -1 // never
	}
}

// attachUpstream exports the sidecar's figures and its /readyz verdict.
func (ms *metricsService) attachUpstream(sc *sidecar.Sidecar, closed bool) {
	if ms == nil || sc == nil {
		return
	}
	ms.e.SetUpstream(func() metrics.Upstream { return upstreamSnapshot(sc, closed) })
}

func upstreamSnapshot(sc *sidecar.Sidecar, closed bool) metrics.Upstream {
	st := sc.StatsRef()
	u := metrics.Upstream{
		State:     sc.State(),
		Forwarded: st.Forwarded.Load(),
		Errors:    st.UpstreamErrors.Load(),
		Redirects: st.Redirects.Load(),
		Fallback: map[string]int64{
			"local":  st.FallbackByMode[sidecar.Local].Load(),
			"open":   st.FallbackByMode[sidecar.Open].Load(),
			"closed": st.FallbackByMode[sidecar.Closed].Load(),
		},
	}
	u.Ready = !(closed && u.State == "down")
	for _, o := range sc.Owners() {
		uo := metrics.UpstreamOwner{Addr: o.Addr, Up: o.Up, Buckets: map[float64]uint64{}, Sum: o.Latency.Sum.Seconds()}
		var cum uint64
		for i, n := range o.Latency.Counts {
			cum += uint64(n)
			if i < len(o.Latency.Bounds) {
				uo.Buckets[o.Latency.Bounds[i].Seconds()] = cum
			}
		}
		uo.Count = cum
		u.Owners = append(u.Owners, uo)
	}
	return u
}
