// Command celld is a Redis-protocol server that answers redis-cell's
// CL.THROTTLE bit-for-bit. See README.md.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/celld/celld/config"
	_ "github.com/celld/celld/data" // strings, counters and key commands register themselves
	"github.com/celld/celld/server"
	"github.com/celld/celld/store"
)

// version is celld's release, reported by --version and INFO.
const version = "0.1.0"

// parseFlags reads the command line and the environment (config.Parse).
func parseFlags(args []string) (*config.Config, error) {
	return config.Parse(args, os.LookupEnv)
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if code, ok := haSubcommand(args); ok { // main_ha.go: celld cluster ...
		return code
	}
	// Signals are caught from the start: one that arrives during start-up
	// or the restore ends the process cleanly (exit 0, like Redis while it
	// loads) instead of by the default action (143, without a word).
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sig)
	// SIGHUP (a closed terminal, logrotate's "reopen your logs") is
	// ignored, as Redis ignores it: its default action would end the
	// process at once, without the final flush.
	signal.Ignore(syscall.SIGHUP)
	cfg, err := parseFlags(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "celld:", err)
		return 2
	}
	switch {
	case cfg.Help:
		config.Usage(os.Stdout)
		return 0
	case cfg.Version:
		fmt.Println("celld", version)
		return 0
	case cfg.Healthcheck:
		return healthcheck(cfg)
	}
	log := newLogger(cfg)
	slog.SetDefault(log)
	restored := make(chan struct{})
	go exitOnSignalDuringRestore(sig, restored, cfg, log)
	tuneRuntime()

	// Everything that can be refused without the data directory is
	// checked first: the cluster list (exit 2, like a bad flag), then the
	// password and TLS files, then every port is bound, so that a port in
	// use fails start-up before a restore that may take seconds.
	topo, err := clusterOrHATopology(cfg) // main_ha.go
	if err != nil {
		fmt.Fprintln(os.Stderr, "celld:", err)
		return 2
	}
	srvCfg := server.Config{Addr: cfg.Addr, Logger: log, Version: version, IOLoops: cfg.IOLoops, Cluster: topo, Databases: cfg.Databases}
	if cfg.IOLoops == 0 {
		srvCfg.IOLoops = -1 // the flag's 0: no loop
	}
	srvCfg.BusyPoll = cfg.BusyPoll
	sc, err := newSidecar(cfg, log) // main_sidecar.go: --upstream
	if err != nil {
		fmt.Fprintln(os.Stderr, "celld:", err)
		return 2
	}
	wireSidecar(sc, cfg, &srvCfg)
	srvCfg.MaxBulk = cfg.MaxBulk
	srvCfg.OutputBufferLimit = server.OutputBufferLimit(cfg.OutputBufferLimit)
	srvCfg.LimiterSeparator, srvCfg.MetricsMaxLimiters, srvCfg.Shadow = cfg.LimiterSeparator, cfg.MetricsMaxLimiters, cfg.Shadow
	if cfg.MetricsMaxLimiters == 0 {
		srvCfg.MetricsMaxLimiters = -1 // the flag's 0: every decision is "other"
	}
	if cfg.BusyPoll == 0 {
		srvCfg.BusyPoll = -1 // the flag's 0: never
	}
	if _, err := applyAccess(cfg, &srvCfg, log); err != nil {
		log.Error("cannot start", "err", err)
		return 1
	}
	// Metrics start before the restore, so that /readyz answers 503
	// "loading" while it runs and /livez answers at once.
	mx, err := startMetrics(cfg.MetricsAddr, log)
	if err != nil {
		log.Error("cannot start", "err", err)
		return 1
	}
	defer mx.stop()
	if pl, err := startPprof(cfg.PprofAddr, log); err != nil {
		log.Error("cannot start", "err", fmt.Errorf("--pprof-addr: %w", err))
		return 1
	} else if pl != nil {
		defer pl.Close()
	}
	// Bound now, served after the restore: a client that connects during
	// it waits in the accept queue, as for Redis while it loads.
	lns, err := openListeners(cfg)
	if err != nil {
		log.Error("cannot start", "err", err)
		return 1
	}
	closeListeners := func() {
		for _, l := range lns {
			l.ln.Close()
		}
	}

	st := store.New(store.Options{TrackDirty: cfg.Persist})
	p, err := openPersistence(cfg, st, log)
	if err != nil {
		log.Error("cannot start", "err", err)
		closeListeners()
		return 1
	}
	if topo != nil {
		if err := recordClusterID(cfg, topo, log); err != nil {
			log.Error("cannot start", "err", err)
			closeListeners()
			if p != nil {
				p.Close()
			}
			return 1
		}
	}
	if err := applyMemory(cfg, st, log); err != nil { // main_memory.go
		log.Error("cannot start", "err", err)
		closeListeners()
		if p != nil {
			p.Close()
		}
		return 2
	}
	if p != nil {
		srvCfg.Persister = p
		backlogStop := make(chan struct{})
		defer close(backlogStop)
		go followBacklog(st, func() int64 { return p.fl.Status().PendingBytes }, 100*time.Millisecond, backlogStop) // main_backlog.go
	}
	rn, err := newReplication(cfg, st, &srvCfg, log) // main_repl.go
	if err != nil {
		log.Error("cannot start", "err", err)
		closeListeners()
		if p != nil {
			p.Close()
		}
		return 2
	}
	if rn != nil {
		defer rn.Close()
	}
	// SHUTDOWN asks for the same ordered stop as SIGTERM; the signal channel
	// exists only later, so the hook reaches it through shutdownCmd.
	shutdownCmd := make(chan chan os.Signal, 1)
	srvCfg.OnShutdown = func() {
		ch := <-shutdownCmd
		shutdownCmd <- ch
		select {
		case ch <- syscall.SIGTERM:
		default:
		}
	}
	srv, err := server.New(srvCfg, st)
	if err != nil {
		log.Error("cannot start", "err", err)
		closeListeners()
		if p != nil {
			p.Close()
		}
		return 1
	}
	mx.attach(srv, p)
	if p != nil {
		// The window's drain runs on the event loop (persistence.encodePiece).
		run := func(fn func()) bool { return srv.RunOnLoop(fn, loopDrainWait) }
		p.onLoop.Store(&run)
	}
	haNode, err := startHA(cfg, srv, log) // main_ha.go
	if err != nil {
		log.Error("cannot start", "err", err)
		closeListeners()
		if p != nil {
			p.Close()
		}
		return 1
	}
	if sc != nil {
		for _, l := range lns { // before the first topology read (Serve says it again)
			sc.ListeningOn(l.ln.Addr())
		}
		sc.Start()
		defer sc.Close()
		mx.attachUpstream(sc, cfg.UpstreamFallback == "closed")
		log.Info("sidecar mode", "upstream", cfg.Upstream, "fallback", cfg.UpstreamFallback, "timeout", cfg.UpstreamTimeout)
	}
	close(restored) // from here a signal is main's: an ordered shutdown
	// The binary's pages start-up touched leave the resident set.
	if n, err := releaseTextPages(); err != nil { // main_text_linux.go
		log.Warn("could not release the binary's start-up pages", "err", err)
	} else if n > 0 {
		log.Debug("released the binary's start-up pages", "bytes", n)
	}
	for _, l := range lns {
		log.Info("celld listening", "addr", l.ln.Addr().String(), "tls", l.tls, "version", version,
			"persist", cfg.Persist, "dir", cfg.Dir, "auth", srvCfg.RequirePass != "")
	}

	shutdownCmd <- sig
	served := make(chan error, len(lns))
	for _, l := range lns {
		go func() { served <- l.serve(srv) }()
	}

	code := 0
	select {
	case s := <-sig:
		log.Info("shutting down", "signal", s.String())
	case err := <-served:
		log.Error("server stopped", "err", err)
		code = 1
	}
	mx.shuttingDown()
	// The grace counts from the signal: stepping down from HA leadership
	// (fence, resign, revoke) gets at most its first quarter, before the
	// drain.
	deadline := time.Now().Add(cfg.ShutdownGrace)
	stopHA(haNode, time.Now().Add(cfg.ShutdownGrace/4), log)
	drainConnections(srv, deadline, cfg.ShutdownGrace, log)
	if p != nil {
		if err := p.CloseBy(deadline); err != nil {
			log.Error("final flush failed", "err", err)
			code = 1
		}
	}
	log.Info("stopped")
	return code
}

// exitOnSignalDuringRestore ends the process with exit code 0 if SIGTERM
// or SIGINT arrives before restored is closed (the data directory is being
// opened and replayed: nothing is served yet and nothing in memory needs
// flushing; what Open may have written is crash-safe by design). Once
// restored is closed it returns without touching sig, which main then
// owns.
func exitOnSignalDuringRestore(sig chan os.Signal, restored <-chan struct{}, cfg *config.Config, log *slog.Logger) {
	select {
	case s := <-sig:
		select {
		case <-restored:
			// Restored meanwhile: hand the signal back to main.
			select {
			case sig <- s:
			default:
			}
			return
		default:
		}
		log.Info("shutting down before serving (during start-up or the restore): nothing was served and nothing is lost; the data directory is left for the next start to restore",
			"signal", s.String(), "dir", cfg.Dir)
		os.Exit(0)
	case <-restored:
	}
}

// drainConnections stops the server and waits for its connections until
// three quarters of the shutdown grace have passed, leaving the rest to the
// final flush. A connection still running a command then (a long EVAL or
// script, which Redis cannot interrupt either) is not waited for: the
// command's changes up to the final flush are flushed, later ones are not.
func drainConnections(srv *server.Server, deadline time.Time, grace time.Duration, log *slog.Logger) {
	drainBy := deadline.Add(-grace / 4)
	ctx, cancel := context.WithDeadline(context.Background(), drainBy)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(ctx) }()
	t := time.NewTimer(max(time.Until(drainBy), 0) + grace/20)
	defer t.Stop()
	select {
	case err := <-done:
		if err != nil {
			log.Warn("connections did not drain in time; closed them", "err", err)
		}
	case <-t.C:
		log.Warn("a command was still running when the connections' share of --shutdown-grace ran out (a long EVAL or script?): "+
			"not waiting for it; the final flush takes what it changed so far, its later changes are not durable",
			"grace", grace)
	}
}

// newLogger is the process's logger: --log-format, --log-level, stderr.
func newLogger(cfg *config.Config) *slog.Logger {
	var lvl slog.Level
	lvl.UnmarshalText([]byte(cfg.LogLevel)) // config admits only debug, info, warn, error
	opts := &slog.HandlerOptions{Level: lvl}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}

// tuneRuntime sets a garbage-collection target that suits a sidecar: the
// keyspace holds no Go pointers (store's slab, arena and index), so a
// collection costs little (nothing to scan but the transport's short-lived
// buffers), and running one at 25% heap growth (without a bound, at
// least 16 MiB of it: gcLeanMinGrowth) instead of Go's 100% keeps
// RSS close to the live data: 99 instead of 124 bytes per key for 1M keys,
// memory-only, in bench/run.sh's shape. Hashes, lists and sorted sets do
// hold pointers: while they are a large share of the heap the target is
// Go's 100% (main_gc.go). An explicit GOGC wins.
func tuneRuntime() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercentLean)
		adaptGCPercent(time.Second) // main_gc.go
	}
}
