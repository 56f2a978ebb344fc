// Package metrics serves celld's Prometheus metrics (/metrics) and its
// health over HTTP:
//
//	/livez                 200 while the process runs and answers HTTP (liveness)
//	/readyz                200 once the restore is done and the ports serve;
//	                       503 "loading" before, 503 "shutting down" after SIGTERM
//	/healthz               the same as /readyz (the name earlier versions served)
//	/healthz/persistence   200, or 503 with the reason while state is not being
//	                       made durable: for alerts and dashboards, never a probe
//
// A persistence failure is not a readiness failure: celld keeps deciding
// from memory (README, Durability), and pulling the pod would take the
// application beside it out of service too.
//
// It reads the server through the Stats snapshot the server package
// exports (the server does not import this package and pays nothing per
// command for it): every scrape takes one snapshot and turns it into
// constant metrics, so the numbers of one scrape are consistent with each
// other. Persistence figures and the health verdict come from functions
// main supplies.
//
// Metrics (all prefixed celld_):
//
//	decisions_total{command,decision,limiter}  CL.THROTTLE and its family (cl.pthrottle, cl.mthrottle, ...;
//	                                        peeks count what they report) allowed / denied / shadow_denied,
//	                                        per limiter (limiters.go, docs/limiter-metrics.md)
//	near_limit_total{command,limiter}       allowed decisions that left < 20% of the limit
//	errors_total{kind}                      error replies by first word (ERR, WRONGTYPE, Cell, ...)
//	commands_total{command}                 executed calls
//	command_failed_total{command}           calls that replied with an error
//	command_rejected_total{command}         refused before running (arity, NOAUTH, MOVED, LOADING)
//	command_duration_seconds{command}       latency histogram of a sample of calls (see server/cmdstats.go)
//	commands_processed_total                commands read (INFO total_commands_processed)
//	keys                                    keys held
//	connected_clients                       open connections
//	connections_received_total              accepted connections
//	rejected_connections_total              refused over maxclients
//	tracking_clients, tracking_keys         client-side caching
//	keyspace_hits_total, keyspace_misses_total
//	handler_panics_total
//	memory_used_bytes, memory_max_bytes     the keyspace's accounted memory and its bound (memory.go)
//	evicted_keys_total, maxmemory_policy_info{policy}
//	loading                                 1 while a restore runs
//	persist_last_flush_duration_seconds     duration of the most recent flush attempt
//	persist_last_flush_age_seconds          time since the last successful flush
//	persist_last_flush_ok                   0 while flushes fail
//	persist_flushes_total, persist_flush_errors_total,
//	persist_base_rewrites_total, persist_base_rewrite_errors_total, persist_log_bytes
//	persist_dirty_keys                      changes not yet durable
//	persist_restore_duration_seconds        how long the start-up restore took
//	persist_restore_keys                    records it loaded
//	persist_pending_keys, persist_pending_bytes  changes a failing disk has not taken, their heap
//	persist_damaged_records                 change-log records skipped as damaged at start-up
//	build_info{version}                     1
//
// plus the Go runtime and process collectors.
package metrics

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/celld/celld/server"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Persistence is a snapshot of the persistence layer for the metrics.
type Persistence struct {
	LastFlushOK       bool
	LastFlushDuration time.Duration
	LastSuccessAt     time.Time // zero if no flush succeeded yet
	Flushes           int64
	FlushErrors       int64
	DirtyKeys         int
	RestoreDuration   time.Duration
	RestoreKeys       int64
	// BaseRewrites and BaseErrors count the log folds (base rewrites)
	// that succeeded and failed; LogBytes is the log's size since the
	// base (what a restart would replay on top of it).
	BaseRewrites, BaseErrors int64
	LogBytes                 int64
	// PendingKeys and PendingBytes are the changes a failing disk has not
	// taken yet (and the heap they hold); DamagedRecords counts change-log
	// records skipped as damaged at start-up.
	PendingKeys, PendingBytes, DamagedRecords int64
}

// Config configures an Exporter. Functions may be nil and may be set later
// with the Set methods (main starts the exporter before the server exists,
// so that /healthz answers 503 during the restore).
type Config struct {
	// Version is reported in celld_build_info.
	Version string
	// Logger receives the HTTP server's errors. Default slog.Default().
	Logger *slog.Logger
}

// Exporter is the metrics HTTP service. Its methods are safe for
// concurrent use.
type Exporter struct {
	reg      *prometheus.Registry
	log      *slog.Logger
	loading  atomic.Bool
	stopping atomic.Bool

	mu      sync.Mutex // guards the functions below
	stats   func() server.Stats
	persist func() Persistence
	health  func() error

	srv *http.Server

	upstream atomic.Pointer[func() Upstream] // sidecar mode (upstream.go)
}

// New builds an exporter with its registry; it does not listen until
// Serve.
func New(cfg Config) *Exporter {
	e := &Exporter{reg: prometheus.NewRegistry(), log: cfg.Logger}
	if e.log == nil {
		e.log = slog.Default()
	}
	e.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "celld_build_info", Help: "celld's version, as a label; always 1.",
			ConstLabels: prometheus.Labels{"version": cfg.Version},
		}, func() float64 { return 1 }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "celld_loading", Help: "1 while the start-up restore runs.",
		}, func() float64 {
			if e.Loading() {
				return 1
			}
			return 0
		}),
		(*serverCollector)(e),
		(*persistCollector)(e),
	)
	return e
}

// SetStats sets the server snapshot source.
func (e *Exporter) SetStats(fn func() server.Stats) { e.mu.Lock(); e.stats = fn; e.mu.Unlock() }

// SetPersistence sets the persistence snapshot source (nil: memory-only).
func (e *Exporter) SetPersistence(fn func() Persistence) {
	e.mu.Lock()
	e.persist = fn
	e.mu.Unlock()
}

// SetHealth sets the persistence status /healthz/persistence reports: a
// non-nil error answers 503 with its text. It does not affect /readyz.
func (e *Exporter) SetHealth(fn func() error) { e.mu.Lock(); e.health = fn; e.mu.Unlock() }

// SetLoading marks a restore in progress (/healthz answers 503 "loading").
func (e *Exporter) SetLoading(on bool) { e.loading.Store(on) }

// Loading reports SetLoading's flag.
func (e *Exporter) Loading() bool { return e.loading.Load() }

// SetShuttingDown marks an ordered stop in progress: /readyz answers 503
// "shutting down" so that no new traffic is sent while connections drain.
func (e *Exporter) SetShuttingDown() { e.stopping.Store(true) }

func (e *Exporter) statsFn() func() server.Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stats
}

// Registry is the exporter's registry, for tests and extra collectors.
func (e *Exporter) Registry() *prometheus.Registry { return e.reg }

// Handler serves /metrics, /livez, /readyz, /healthz and
// /healthz/persistence.
func (e *Exporter) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(e.reg, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(e.log.Handler(), slog.LevelError),
	}))
	mux.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) { plain(w, nil) })
	mux.HandleFunc("/readyz", e.readyz)
	mux.HandleFunc("/healthz", e.readyz) // compatibility: earlier versions' probe path
	mux.HandleFunc("/healthz/persistence", e.persistenceStatus)
	return mux
}

// readyz answers 200 "ok", or 503 "loading" during the restore and
// "shutting down" after SetShuttingDown. Persistence does not count.
func (e *Exporter) readyz(w http.ResponseWriter, _ *http.Request) {
	switch {
	case e.Loading():
		plain(w, errors.New("loading"))
	case e.stopping.Load():
		plain(w, errors.New("shutting down"))
	default:
		plain(w, e.upstreamReady(w)) // upstream.go: sidecar mode only
	}
}

// persistenceStatus answers 200 "ok" (also when persistence is off), or
// 503 with the health function's error.
func (e *Exporter) persistenceStatus(w http.ResponseWriter, _ *http.Request) {
	e.mu.Lock()
	health := e.health
	e.mu.Unlock()
	var err error
	if health != nil {
		err = health()
	}
	plain(w, err)
}

// plain writes "ok" (err nil) or 503 with err's text, uncached.
func plain(w http.ResponseWriter, err error) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(err.Error() + "\n"))
		return
	}
	w.Write([]byte("ok\n"))
}

// Serve answers HTTP on ln until Shutdown; it returns nil after Shutdown.
func (e *Exporter) Serve(ln net.Listener) error {
	srv := &http.Server{
		Handler:           e.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(e.log.Handler(), slog.LevelWarn),
	}
	e.mu.Lock()
	e.srv = srv
	e.mu.Unlock()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Shutdown stops the HTTP server, waiting for in-flight scrapes until ctx
// ends.
func (e *Exporter) Shutdown(ctx context.Context) error {
	e.mu.Lock()
	srv := e.srv
	e.mu.Unlock()
	if srv == nil {
		return nil
	}
	return srv.Shutdown(ctx)
}

// ---------------------------------------------------------------------------
// Collectors: one snapshot per scrape, constant metrics out.

var (
	descDecisions = prometheus.NewDesc("celld_decisions_total",
		"Rate-limit decisions, by command, decision (allowed, denied, shadow_denied) and limiter (the key's first segment before --limiter-separator; \"other\" past --metrics-max-limiters).", []string{"command", "decision", "limiter"}, nil)
	descNearLimit = prometheus.NewDesc("celld_near_limit_total",
		"Allowed decisions that left less than 20% of the limit, by command and limiter.", []string{"command", "limiter"}, nil)
	descErrors = prometheus.NewDesc("celld_errors_total",
		"Error replies, by kind: the reply's first word (ERR, WRONGTYPE, NOAUTH, MOVED, ...; Cell for CL.THROTTLE's Cell error).", []string{"kind"}, nil)
	descCalls = prometheus.NewDesc("celld_commands_total",
		"Commands executed, by command (subcommands as parent|sub).", []string{"command"}, nil)
	descFailed = prometheus.NewDesc("celld_command_failed_total",
		"Commands executed that replied with an error, by command.", []string{"command"}, nil)
	descRejected = prometheus.NewDesc("celld_command_rejected_total",
		"Commands refused before running (wrong arity, NOAUTH, MOVED, LOADING), by command.", []string{"command"}, nil)
	descLatency = prometheus.NewDesc("celld_command_duration_seconds",
		"Command execution time, from a sample of calls (the first 1024 of each command per counter shard, then 1 in 64), by command.", []string{"command"}, nil)
	descProcessed = prometheus.NewDesc("celld_commands_processed_total",
		"Commands read from clients, including unknown and rejected ones.", nil, nil)
	descKeys = prometheus.NewDesc("celld_keys",
		"Keys held (including expired keys not yet swept), as DBSIZE.", nil, nil)
	descClients = prometheus.NewDesc("celld_connected_clients",
		"Client connections open.", nil, nil)
	descConnections = prometheus.NewDesc("celld_connections_received_total",
		"Client connections accepted.", nil, nil)
	descRejectedConns = prometheus.NewDesc("celld_rejected_connections_total",
		"Connections refused because maxclients was reached.", nil, nil)
	descTrackingClients = prometheus.NewDesc("celld_tracking_clients",
		"Clients with CLIENT TRACKING on.", nil, nil)
	descTrackingKeys = prometheus.NewDesc("celld_tracking_keys",
		"Keys remembered for client-side caching invalidation.", nil, nil)
	descHits = prometheus.NewDesc("celld_keyspace_hits_total",
		"Key lookups by read commands that found the key.", nil, nil)
	descMisses = prometheus.NewDesc("celld_keyspace_misses_total",
		"Key lookups by read commands that did not find the key.", nil, nil)
	descPanics = prometheus.NewDesc("celld_handler_panics_total",
		"Command handler panics (each closed its connection).", nil, nil)
	descExpired = prometheus.NewDesc("celld_expired_keys_total",
		"Keys removed because their TTL passed (on access or by the background sweep), as INFO expired_keys.", nil, nil)
	descNetIn = prometheus.NewDesc("celld_net_input_bytes_total",
		"Bytes read from client connections.", nil, nil)
	descNetOut = prometheus.NewDesc("celld_net_output_bytes_total",
		"Bytes written to client connections.", nil, nil)
	descObufDisconnects = prometheus.NewDesc("celld_client_output_buffer_limit_disconnections_total",
		"Clients closed because their unread replies passed --client-output-buffer-limit.", nil, nil)

	descFlushDuration = prometheus.NewDesc("celld_persist_last_flush_duration_seconds",
		"Duration of the most recent flush attempt.", nil, nil)
	descFlushAge = prometheus.NewDesc("celld_persist_last_flush_age_seconds",
		"Time since the last successful flush started (absent before the first).", nil, nil)
	descFlushOK = prometheus.NewDesc("celld_persist_last_flush_ok",
		"1 if the most recent flush attempt succeeded, 0 while flushes fail.", nil, nil)
	descFlushes = prometheus.NewDesc("celld_persist_flushes_total",
		"Flush attempts.", nil, nil)
	descFlushErrors = prometheus.NewDesc("celld_persist_flush_errors_total",
		"Failed flush attempts.", nil, nil)
	descDirty = prometheus.NewDesc("celld_persist_dirty_keys",
		"Changed keys not yet durable.", nil, nil)
	descRestoreDuration = prometheus.NewDesc("celld_persist_restore_duration_seconds",
		"How long the start-up restore took.", nil, nil)
	descRestoreKeys = prometheus.NewDesc("celld_persist_restore_keys",
		"Records the start-up restore loaded.", nil, nil)
	descBases = prometheus.NewDesc("celld_persist_base_rewrites_total",
		"Base rewrites that folded the on-disk log.", nil, nil)
	descBaseErrors = prometheus.NewDesc("celld_persist_base_rewrite_errors_total",
		"Failed base rewrites (the log keeps growing until one succeeds).", nil, nil)
	descLogBytes = prometheus.NewDesc("celld_persist_log_bytes",
		"Size of the on-disk log since the base: what a restart replays on top of it.", nil, nil)
	descPendingKeys = prometheus.NewDesc("celld_persist_pending_keys",
		"Changed keys a failing disk has not taken yet (held in memory, retried).", nil, nil)
	descPendingBytes = prometheus.NewDesc("celld_persist_pending_bytes",
		"Heap held by the pending keys (estimate).", nil, nil)
	descDamaged = prometheus.NewDesc("celld_persist_damaged_records",
		"Change-log records skipped at start-up because they failed their checksum.", nil, nil)
)

// latencyBounds are server.LatencyBuckets in seconds.
var latencyBounds = func() []float64 {
	b := make([]float64, len(server.LatencyBuckets))
	for i, d := range server.LatencyBuckets {
		b[i] = d.Seconds()
	}
	return b
}()

type serverCollector Exporter

func (c *serverCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descDecisions, descNearLimit, descErrors, descCalls, descFailed, descRejected,
		descLatency, descProcessed, descKeys, descClients, descConnections, descRejectedConns,
		descTrackingClients, descTrackingKeys, descHits, descMisses, descPanics,
		descExpired, descNetIn, descNetOut, descObufDisconnects} {
		ch <- d
	}
	describeMemory(ch) // memory.go
}

func (c *serverCollector) Collect(ch chan<- prometheus.Metric) {
	fn := (*Exporter)(c).statsFn()
	if fn == nil {
		return
	}
	st := fn()
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	collectLimiters(ch, st.Limiters) // limiters.go
	for kind, n := range st.Errors {
		counter(descErrors, n, kind)
	}
	for i := range st.Commands {
		cs := &st.Commands[i]
		counter(descCalls, cs.Calls, cs.Name)
		counter(descFailed, cs.Failed, cs.Name)
		counter(descRejected, cs.Rejected, cs.Name)
		if cs.Sampled == 0 {
			continue
		}
		buckets := make(map[float64]uint64, len(latencyBounds))
		var cum uint64
		for j, ub := range latencyBounds {
			cum += uint64(cs.Latency[j])
			buckets[ub] = cum
		}
		ch <- prometheus.MustNewConstHistogram(descLatency, uint64(cs.Sampled), cs.SampledTime.Seconds(), buckets, cs.Name)
	}
	counter(descProcessed, st.CommandsProcessed)
	gauge(descKeys, float64(st.Keys))
	gauge(descClients, float64(st.ConnectedClients))
	counter(descConnections, st.ConnectionsReceived)
	counter(descRejectedConns, st.RejectedConnections)
	gauge(descTrackingClients, float64(st.TrackingClients))
	gauge(descTrackingKeys, float64(st.TrackedKeys))
	counter(descHits, st.KeyspaceHits)
	counter(descMisses, st.KeyspaceMisses)
	counter(descPanics, st.HandlerPanics)
	counter(descExpired, st.ExpiredKeys)
	counter(descNetIn, st.NetInputBytes)
	counter(descNetOut, st.NetOutputBytes)
	counter(descObufDisconnects, st.OutputBufferLimitDisconnections)
	collectMemory(ch, &st) // memory.go
}

type persistCollector Exporter

func (c *persistCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descFlushDuration, descFlushAge, descFlushOK, descFlushes,
		descFlushErrors, descDirty, descRestoreDuration, descRestoreKeys, descBases, descBaseErrors, descLogBytes,
		descPendingKeys, descPendingBytes, descDamaged} {
		ch <- d
	}
}

func (c *persistCollector) Collect(ch chan<- prometheus.Metric) {
	e := (*Exporter)(c)
	e.mu.Lock()
	fn := e.persist
	e.mu.Unlock()
	if fn == nil {
		return
	}
	p := fn()
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	gauge(descFlushDuration, p.LastFlushDuration.Seconds())
	if !p.LastSuccessAt.IsZero() {
		gauge(descFlushAge, time.Since(p.LastSuccessAt).Seconds())
	}
	ok := 0.0
	if p.LastFlushOK {
		ok = 1
	}
	gauge(descFlushOK, ok)
	ch <- prometheus.MustNewConstMetric(descFlushes, prometheus.CounterValue, float64(p.Flushes))
	ch <- prometheus.MustNewConstMetric(descFlushErrors, prometheus.CounterValue, float64(p.FlushErrors))
	gauge(descDirty, float64(p.DirtyKeys))
	gauge(descRestoreDuration, p.RestoreDuration.Seconds())
	gauge(descRestoreKeys, float64(p.RestoreKeys))
	ch <- prometheus.MustNewConstMetric(descBases, prometheus.CounterValue, float64(p.BaseRewrites))
	ch <- prometheus.MustNewConstMetric(descBaseErrors, prometheus.CounterValue, float64(p.BaseErrors))
	gauge(descLogBytes, float64(p.LogBytes))
	gauge(descPendingKeys, float64(p.PendingKeys))
	gauge(descPendingBytes, float64(p.PendingBytes))
	gauge(descDamaged, float64(p.DamagedRecords))
}
