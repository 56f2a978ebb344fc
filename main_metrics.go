package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/celld/celld/metrics"
	"github.com/celld/celld/server"
)

// metricsService is the running exporter. A nil *metricsService (metrics
// off) accepts every method and does nothing.
type metricsService struct {
	e      *metrics.Exporter
	ln     net.Listener
	served chan error
	log    *slog.Logger
}

// startMetrics listens on addr and starts serving, before the restore:
// /livez answers at once, and until attach /readyz answers 503 "loading".
// It returns nil, nil when
// metrics are off.
func startMetrics(addr string, log *slog.Logger) (*metricsService, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	ms := &metricsService{
		e:      metrics.New(metrics.Config{Version: version, Logger: log}),
		ln:     ln,
		served: make(chan error, 1),
		log:    log,
	}
	ms.e.SetLoading(true)
	go func() { ms.served <- ms.e.Serve(ln) }()
	log.Info("metrics listening", "addr", ln.Addr().String(), "paths", "/metrics /livez /readyz /healthz /healthz/persistence")
	return ms, nil
}

// attach points the exporter at the server and the persistence layer (p
// may be nil: memory-only) and ends the loading state: /readyz answers ok.
// /healthz/persistence then fails while the flusher's last attempt failed.
func (ms *metricsService) attach(srv *server.Server, p *persistence) {
	if ms == nil {
		return
	}
	ms.e.SetStats(srv.Stats)
	ms.attachRepl() // main_repl.go
	if p != nil {
		ms.e.SetPersistence(p.metricsSnapshot)
		ms.e.SetHealth(p.healthy)
	}
	ms.e.SetLoading(false)
}

// shuttingDown turns /readyz to 503 for the ordered stop.
func (ms *metricsService) shuttingDown() {
	if ms != nil {
		ms.e.SetShuttingDown()
	}
}

// stop shuts the exporter down, waiting briefly for in-flight scrapes.
func (ms *metricsService) stop() {
	if ms == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := ms.e.Shutdown(ctx); err != nil {
		ms.log.Warn("metrics server did not stop cleanly", "err", err)
	}
	ms.ln.Close() // in case Serve had not started yet
	if err := <-ms.served; err != nil && !errors.Is(err, net.ErrClosed) {
		ms.log.Warn("metrics server", "err", err)
	}
}

// metricsSnapshot is the persistence figures the exporter reports.
func (p *persistence) metricsSnapshot() metrics.Persistence {
	s := p.fl.Status()
	return metrics.Persistence{
		LastFlushOK:       s.LastFlushOK,
		LastFlushDuration: s.LastFlushDuration,
		LastSuccessAt:     s.LastSuccessAt,
		Flushes:           s.Flushes,
		FlushErrors:       s.FlushErrors,
		DirtyKeys:         p.databases().DirtyKeys() + s.PendingKeys,
		RestoreDuration:   p.restore.Duration,
		RestoreKeys:       p.restoredKeys,
		BaseRewrites:      s.Bases,
		BaseErrors:        s.BaseErrors,
		LogBytes:          p.db.LogBytes(),
		PendingKeys:       int64(s.PendingKeys),
		PendingBytes:      s.PendingBytes,
		DamagedRecords:    p.db.Damage().Records,
	}
}

// healthy reports an error while flushes fail (state is not being made
// durable), for /healthz/persistence.
func (p *persistence) healthy() error {
	if s := p.fl.Status(); !s.LastFlushOK {
		return fmt.Errorf("persistence failing: %s", s.LastFlushErr)
	}
	return nil
}
