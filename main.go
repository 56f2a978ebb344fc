// Command celld is a Redis-protocol server that answers redis-cell's
// CL.THROTTLE bit-for-bit. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"

	"github.com/celld/celld/persist"
	"github.com/celld/celld/server"
	"github.com/celld/celld/store"
)

// version is celld's release, reported by --version and INFO.
const version = "0.1.0"

// config is everything main reads from flags and the environment.
type config struct {
	addr          string
	dir           string
	persist       bool
	flushInterval time.Duration
	foldMinBytes  int64
	ioLoops       int
	busyPoll      time.Duration
	recoverMode   string
	shutdownGrace time.Duration
	logFormat     string
	healthcheck   bool
	access        accessConfig
	metrics       metricsConfig // main_metrics.go
	memory        memoryConfig  // main_memory.go
	pprofAddr     string        // main_pprof.go
	// Cluster mode (cluster_setup.go).
	clusterNodes    string
	clusterAnnounce string
}

// envOr returns the CELLD_* environment value for name, or def.
func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("celld", flag.ContinueOnError)
	persistDef, _ := strconv.ParseBool(envOr("CELLD_PERSIST", "true"))
	flushDef, err := time.ParseDuration(envOr("CELLD_FLUSH_INTERVAL", "100ms"))
	if err != nil {
		return c, fmt.Errorf("CELLD_FLUSH_INTERVAL: %w", err)
	}
	foldDef, err := strconv.ParseInt(envOr("CELLD_LOG_FOLD_MIN_BYTES", strconv.Itoa(persist.DefaultFoldMinBytes)), 10, 64)
	if err != nil {
		return c, fmt.Errorf("CELLD_LOG_FOLD_MIN_BYTES: %w", err)
	}
	fs.StringVar(&c.addr, "addr", envOr("CELLD_ADDR", "127.0.0.1:6379"), "TCP address to listen on (env CELLD_ADDR)")
	fs.StringVar(&c.dir, "dir", envOr("CELLD_DIR", "./data"), "data directory for persisted state (env CELLD_DIR)")
	fs.BoolVar(&c.persist, "persist", persistDef, "persist limiter state in --dir (env CELLD_PERSIST)")
	fs.DurationVar(&c.flushInterval, "flush-interval", flushDef, "how often changes are synced to disk; at most this much is lost on kill -9 (env CELLD_FLUSH_INTERVAL)")
	fs.Int64Var(&c.foldMinBytes, "log-fold-min-bytes", foldDef, "the on-disk log is folded into a new base once it is as big as the base and at least this many bytes (env CELLD_LOG_FOLD_MIN_BYTES)")
	loopsDef, err := strconv.Atoi(envOr("CELLD_IO_LOOPS", "1"))
	if err != nil {
		return c, fmt.Errorf("CELLD_IO_LOOPS: %w", err)
	}
	fs.IntVar(&c.ioLoops, "io-loops", loopsDef, "event loops (epoll, one goroutine each) serving plain TCP clients; 0 = a goroutine per connection instead (env CELLD_IO_LOOPS)")
	pollDef, err := time.ParseDuration(envOr("CELLD_BUSY_POLL", server.DefaultBusyPoll.String()))
	if err != nil {
		return c, fmt.Errorf("CELLD_BUSY_POLL: %w", err)
	}
	fs.DurationVar(&c.busyPoll, "busy-poll", pollDef, "how long a busy event loop polls for more events before sleeping (more throughput under load, no cost when idle); 0 = never (env CELLD_BUSY_POLL)")
	fs.StringVar(&c.recoverMode, "recover", envOr("CELLD_RECOVER", "fail"), "on an unreadable data directory: fail, or skip (start empty) (env CELLD_RECOVER)")
	fs.DurationVar(&c.shutdownGrace, "shutdown-grace", 10*time.Second, "how long SIGTERM waits for connections to drain")
	fs.StringVar(&c.logFormat, "log-format", envOr("CELLD_LOG_FORMAT", "text"), "log format: text or json (env CELLD_LOG_FORMAT)")
	fs.StringVar(&c.clusterNodes, "cluster-nodes", envOr("CELLD_CLUSTER_NODES", ""), "Redis Cluster mode: the announced host:port of every node, in order, comma-separated; node i of N owns slots [i*16384/N, (i+1)*16384/N) (env CELLD_CLUSTER_NODES)")
	fs.StringVar(&c.clusterAnnounce, "cluster-announce", envOr("CELLD_CLUSTER_ANNOUNCE", ""), "this node's host:port in --cluster-nodes, when --addr is not it (e.g. 0.0.0.0:6379) (env CELLD_CLUSTER_ANNOUNCE)")
	registerAccessFlags(fs, &c.access)
	registerMetricsFlags(fs, &c.metrics)
	registerMemoryFlags(fs, &c.memory)
	registerPprofFlags(fs, &c.pprofAddr)
	showVersion := fs.Bool("version", false, "print the version and exit")
	fs.BoolVar(&c.healthcheck, "healthcheck", false, "PING the server at --addr and exit 0 if it answers PONG (for container health checks)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if *showVersion {
		fmt.Println("celld", version)
		os.Exit(0)
	}
	if c.recoverMode != "fail" && c.recoverMode != "skip" {
		return c, fmt.Errorf("--recover must be fail or skip, not %q", c.recoverMode)
	}
	if c.ioLoops < 0 || c.ioLoops > 64 {
		return c, errors.New("--io-loops must be 0 to 64")
	}
	if c.foldMinBytes <= 0 {
		return c, errors.New("--log-fold-min-bytes must be positive")
	}
	if c.flushInterval <= 0 {
		return c, errors.New("--flush-interval must be positive")
	}
	if c.busyPoll < 0 || c.busyPoll > time.Second {
		return c, errors.New("--busy-poll must be 0 to 1s")
	}
	if err := c.memory.resolve(); err != nil {
		return c, err
	}
	return c, nil
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	cfg, err := parseFlags(args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(os.Stderr, "celld:", err)
		return 2
	}
	if cfg.healthcheck {
		return healthcheck(cfg.addr)
	}
	var h slog.Handler = slog.NewTextHandler(os.Stderr, nil)
	if cfg.logFormat == "json" {
		h = slog.NewJSONHandler(os.Stderr, nil)
	}
	log := slog.New(h)
	slog.SetDefault(log)
	tuneRuntime()

	// Metrics start first, so that /healthz answers 503 during the restore.
	mx, err := startMetrics(cfg.metrics, log)
	if err != nil {
		log.Error("cannot start", "err", err)
		return 1
	}
	defer mx.stop()
	if pl, err := startPprof(cfg.pprofAddr, log); err != nil {
		log.Error("cannot start", "err", fmt.Errorf("--pprof-addr: %w", err))
		return 1
	} else if pl != nil {
		defer pl.Close()
	}

	st := store.New(store.Options{TrackDirty: cfg.persist})
	p, err := openPersistence(cfg, st, log)
	if err != nil {
		log.Error("cannot start", "err", err)
		return 1
	}
	if err := applyMemory(cfg.memory, st, log); err != nil { // main_memory.go
		log.Error("cannot start", "err", err)
		if p != nil {
			p.Close()
		}
		return 2
	}
	srvCfg := server.Config{Addr: cfg.addr, Logger: log, Version: version, IOLoops: cfg.ioLoops}
	if cfg.ioLoops == 0 {
		srvCfg.IOLoops = -1 // the flag's 0: no loop
	}
	srvCfg.BusyPoll = cfg.busyPoll
	if cfg.busyPoll == 0 {
		srvCfg.BusyPoll = -1 // the flag's 0: never
	}
	if srvCfg.Cluster, err = setupCluster(cfg, log); err != nil {
		log.Error("cannot start", "err", err)
		if p != nil {
			p.Close()
		}
		return 1
	}
	if p != nil {
		srvCfg.Persister = p
	}
	if _, err := applyAccess(cfg.access, &srvCfg, log); err != nil {
		log.Error("cannot start", "err", err)
		if p != nil {
			p.Close()
		}
		return 1
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
		return 1
	}
	mx.attach(srv, p)
	lns, err := openListeners(cfg.addr, cfg.access)
	if err != nil {
		log.Error("cannot start", "err", err)
		if p != nil {
			p.Close()
		}
		return 1
	}
	for _, l := range lns {
		log.Info("celld listening", "addr", l.ln.Addr().String(), "tls", l.tls, "version", version,
			"persist", cfg.persist, "dir", cfg.dir, "auth", srvCfg.RequirePass != "")
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
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
	ctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownGrace)
	if err := srv.Shutdown(ctx); err != nil {
		log.Warn("connections did not drain in time", "err", err)
	}
	cancel()
	if p != nil {
		if err := p.Close(); err != nil {
			log.Error("final flush failed", "err", err)
			code = 1
		}
	}
	log.Info("stopped")
	return code
}

// healthcheck sends PING to addr (0.0.0.0 means this host) and reports
// whether PONG came back: exit code 0 healthy, 1 not.
func healthcheck(addr string) int {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "celld: healthcheck:", err)
		return 1
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(host, port), 2*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, "celld: healthcheck:", err)
		return 1
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return 1
	}
	// "+PONG", or "-NOAUTH" when a password is set: either way the server
	// is up and answering.
	buf := make([]byte, 7)
	if _, err := io.ReadFull(conn, buf); err != nil || (string(buf) != "+PONG\r\n" && string(buf) != "-NOAUTH") {
		fmt.Fprintln(os.Stderr, "celld: healthcheck: no PONG")
		return 1
	}
	return 0
}

// tuneRuntime sets a garbage-collection target that suits a sidecar: the
// keyspace holds no Go pointers (store's slab, arena and index), so a
// collection costs little (nothing to scan but the transport's short-lived
// buffers), and running one at 25% heap growth instead of Go's 100% keeps
// RSS close to the live data: 99 instead of 124 bytes per key for 1M keys,
// memory-only, in bench/run.sh's shape. An explicit GOGC wins.
func tuneRuntime() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(25)
	}
}
