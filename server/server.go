// Package server is celld's RESP front end: it accepts connections, reads
// and parses their requests (conn.go; redcon is the protocol parser only),
// keeps per-client state, dispatches commands through a table built once,
// and turns the store's results and errors into Redis's exact replies.
//
// Concurrency: a Server is used by its event loops (plain TCP connections,
// loop_linux.go), one goroutine per other connection (TLS), one accept loop
// per listener and the background expiry sweep; its exported methods are
// safe for concurrent use. A client's own state is touched only by whoever
// serves its connection (its loop or its goroutine), except the fields
// under client.mu and the atomic ones, which CLIENT LIST, INFO and the
// tracking table read.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/celld/celld/cluster"
	"github.com/celld/celld/store"
)

// Persister is what the server needs from the persistence layer (SAVE,
// BGSAVE, LASTSAVE, INFO persistence). main supplies it; nil means
// memory-only.
type Persister interface {
	// Save makes every change so far durable before returning.
	Save() error
	// BackgroundSave starts a flush and returns at once.
	BackgroundSave()
	// LastSave is the time of the last successful flush.
	LastSave() time.Time
	// InfoPersistence returns "key:value" lines for INFO persistence.
	InfoPersistence() []string
}

// Config holds the server's settings. The zero value of each field means its
// documented default; Validate reports impossible combinations.
type Config struct {
	// Addr is the TCP address to listen on. Default "127.0.0.1:6379".
	Addr string
	// Clock returns wall time in ns since the Unix epoch, read once per
	// command. Default: time.Now().UnixNano(), as wallClock (clock.go) reads
	// it for one clock read instead of two. Tests inject their own.
	Clock func() int64
	// Logger receives lifecycle events and recovered panics. Default
	// slog.Default().
	Logger *slog.Logger
	// SweepInterval is how often the active expiry cycle runs. Default 100ms.
	SweepInterval time.Duration
	// Persister, when set, backs SAVE/BGSAVE/LASTSAVE and INFO persistence.
	Persister Persister
	// TLSConfig is used by ServeTLS.
	TLSConfig *tls.Config
	// RequirePass, when not empty, is the default user's password: clients
	// must AUTH (or HELLO ... AUTH) before anything else.
	RequirePass string
	// ProtectedMode refuses clients from non-loopback addresses while no
	// password is set, with Redis's -DENIED text.
	ProtectedMode bool
	// OnShutdown, when set, is called by the SHUTDOWN command to start the
	// same ordered shutdown as SIGTERM (main wires it). nil: SHUTDOWN
	// answers an error.
	OnShutdown func()
	// WrapListener, when set, wraps the listener before the server accepts
	// from it: the hook for the protocol guard.
	WrapListener func(net.Listener) net.Listener
	// Version is celld's version string for INFO and HELLO-adjacent replies.
	Version string
	// Cluster, when set, turns on Redis Cluster mode: commands whose keys
	// hash to another node's slots answer -MOVED, multi-key commands across
	// slots -CROSSSLOT, and CLUSTER SLOTS/SHARDS/NODES/... describe it.
	// nil (the default) is a standalone server. Server.SetTopology replaces
	// it at runtime (the HA mode).
	Cluster *cluster.Topology
	// ScriptTimeLimit stops a Lua script (EVAL, EVALSHA) that runs longer
	// with "ERR script timed out after <limit>", so that no script holds
	// the server forever. Default 5s.
	ScriptTimeLimit time.Duration
	// IOLoops is how many event loops serve the plain TCP connections
	// (loop_linux.go): each is one goroutine over epoll, as Redis's one
	// thread is. 0 means 1. Negative, or a platform without the loop,
	// serves each connection on a goroutine of its own, as TLS
	// connections always are.
	IOLoops int
	// BusyPoll is how long an event loop that has been busy polls for
	// more events before it sleeps in epoll_wait (busypoll.go). 0 means
	// DefaultBusyPoll; negative, never.
	BusyPoll time.Duration
	// OutputBufferLimit bounds each client's output buffer (replies and
	// pushes its socket has not taken yet) as Redis's
	// client-output-buffer-limit for normal clients (obuf.go). The zero
	// value is Redis's default: no limit.
	OutputBufferLimit OutputBufferLimit
	// Forwarder, when set, is sidecar mode (forward.go): commands whose
	// keys live on an upstream owner are forwarded there. nil (the
	// default) serves every key from the local keyspace.
	Forwarder Forwarder
	// WriteGate and ReplyBarrier are replication's hooks (replgate.go);
	// nil (the default) costs a write one nil check.
	WriteGate    func() error
	ReplyBarrier func() error
	// ReplicationInfo, when set, gives INFO's replication section (the
	// server adds master_replid); called per INFO, from any goroutine.
	ReplicationInfo func() []string
	// LimiterSeparator ends a key's limiter name, the label its decisions
	// are counted under (decisions.go). Default ":".
	LimiterSeparator string
	// MetricsMaxLimiters bounds the distinct limiter names counted; later
	// ones count as "other". 0 means DefaultMaxLimiters; negative, none
	// (every decision is "other").
	MetricsMaxLimiters int
	// Shadow is the shadow-mode patterns, comma-separated Redis globs on
	// the key: a denial on a matching key is answered as allowed and
	// counted shadow_denied. CONFIG SET shadow changes it at run time.
	Shadow string
	// MaxBulk is the largest string a command may build (APPEND, SETRANGE),
	// Redis's proto-max-bulk-len. 0 means 512 MiB.
	MaxBulk int64
	// Databases is how many databases SELECT chooses from (databases.go),
	// when the store given to New is not already database 0 of a
	// store.Databases. 0 means Redis's default, 16.
	Databases int
}

// DefaultMaxLimiters is Config.MetricsMaxLimiters' default.
const DefaultMaxLimiters = 100

// DefaultBusyPoll is Config.BusyPoll's default.
const DefaultBusyPoll = 50 * time.Microsecond

// Validate reports a configuration that cannot work.
func (c Config) Validate() error {
	if c.SweepInterval < 0 {
		return errors.New("server: negative sweep interval")
	}
	if c.ScriptTimeLimit < 0 {
		return errors.New("server: negative script time limit")
	}
	if c.IOLoops > 64 {
		return errors.New("server: more than 64 event loops")
	}
	if l := c.OutputBufferLimit; l.Hard < 0 || l.Soft < 0 || l.SoftSeconds < 0 {
		return errors.New("server: negative output buffer limit")
	}
	if c.Databases < 0 || c.Databases > store.MaxDatabases {
		return store.ErrDatabases
	}
	return nil
}

func (c *Config) setDefaults() {
	if c.Addr == "" {
		c.Addr = "127.0.0.1:6379"
	}
	if c.Clock == nil {
		c.Clock = newWallClock().now // time.Now's wall time for one clock read (clock.go)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.SweepInterval == 0 {
		c.SweepInterval = 100 * time.Millisecond
	}
	if c.Version == "" {
		c.Version = "0.1.0"
	}
	if c.IOLoops == 0 {
		c.IOLoops = 1
	}
	if c.MaxBulk <= 0 {
		c.MaxBulk = 512 << 20
	}
	if c.BusyPoll == 0 {
		c.BusyPoll = DefaultBusyPoll
	}
	if c.Databases == 0 {
		c.Databases = 16
	}
}

// Server serves the Redis protocol over one store.
type Server struct {
	cfg   Config
	store *store.Store     // database 0; its memory account is every database's
	dbs   *store.Databases // every database (databases.go)
	log   *slog.Logger
	start time.Time

	lns []*drainListener // guarded by mu

	mu      sync.Mutex // guards clients and closedCommands
	clients map[int64]*client
	// closedCommands is the commands read by connections already closed
	// (the live ones count their own: client.commands).
	closedCommands int64

	nextID  atomic.Int64
	closing atomic.Bool
	// coarseMs is the wall clock in Unix ms, updated every 100 ms by the
	// sweep goroutine: what connections stamp their reads with (idle=).
	coarseMs atomic.Int64
	// closedNetIn and closedNetOut are the bytes read and written by
	// connections already closed (guarded by mu; the live ones count
	// their own, see client.netBytes).
	closedNetIn, closedNetOut int64
	conns                     sync.WaitGroup
	sweepCtl                  chan struct{}
	sweepWG                   sync.WaitGroup

	watch watchRegistry
	iso   isolation
	stats stats

	clusterStats clusterStats // MOVED/CROSSSLOT counters (cmd_cluster.go)
	// topo is the cluster topology (Config.Cluster, swapped by SetTopology:
	// topology.go); nil in standalone mode, never nil again once set.
	topo atomic.Pointer[cluster.Topology]

	scripts    scripting    // Lua script cache and states (cmd_script.go)
	scriptErrs scriptErrLog // errors of commands scripts called (scripterr.go)

	loops    []*eventLoop // started by the first plain Serve; guarded by mu
	nextLoop atomic.Uint32

	ext serverExt // INFO/Stats counters, CLIENT TRACKING (serverext.go)

	dec *decisionTable // decisions per limiter, shadow mode (decisions.go)
}

// stats are the server's counters, all atomic. (Commands read are counted
// per connection, not here: see Server.commandsProcessed.)
type stats struct {
	connections atomic.Int64
	panics      atomic.Int64
	// obufDisconnects counts clients closed for their output buffer
	// (client_output_buffer_limit_disconnections).
	obufDisconnects atomic.Int64
	// obufLog rate-limits the log lines of those closes (obuf.go).
	obufLog rateLog
}

// New returns a Server over st. It does not listen until Serve.
func New(cfg Config, st *store.Store) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.setDefaults()
	dbs, err := store.Group(st, cfg.Databases)
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:      cfg,
		store:    st,
		dbs:      dbs,
		log:      cfg.Logger,
		start:    time.Now(),
		clients:  make(map[int64]*client),
		sweepCtl: make(chan struct{}),
	}
	s.topo.Store(cfg.Cluster) // nil: standalone
	s.watch.init()
	s.ext.init() // serverext.go
	s.dec = newDecisionTable(cfg.LimiterSeparator, cfg.MetricsMaxLimiters)
	s.dec.setShadow(cfg.Shadow)
	s.coarseMs.Store(time.Now().UnixMilli())
	// Evicted keys are signalled like written ones (tracking.go).
	st.OnEvict(s.evicted)
	return s, nil
}

// Listen opens the configured address. Call Serve with the result.
func (s *Server) Listen() (net.Listener, error) {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("server: listen %s: %w", s.cfg.Addr, err)
	}
	return ln, nil
}

// Serve accepts connections on ln until Shutdown and serves each on a
// goroutine of its own (conn.go). It returns nil after a Shutdown or once
// the listener is closed. It may be called for several listeners (a plain
// and a TLS port); all share the server's state.
func (s *Server) Serve(ln net.Listener) error {
	if fl, ok := s.cfg.Forwarder.(ForwardListener); ok {
		fl.ListeningOn(ln.Addr())
	}
	if s.startLoops(ln) {
		ln = wrapLoopListener(ln)
	} else {
		ln = outListener{ln, s} // outconn.go
	}
	if s.cfg.WrapListener != nil {
		ln = s.cfg.WrapListener(ln)
	}
	ln = s.wrapListener(ln) // serverext.go: listener counters, tracking pushes
	dl := newDrainListener(ln)
	s.mu.Lock()
	if s.closing.Load() {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.lns = append(s.lns, dl)
	first := len(s.lns) == 1
	if first {
		// Under mu, so a Shutdown that already saw this listener cannot
		// be in sweepWG.Wait while this Add runs.
		s.sweepWG.Add(1)
	}
	s.mu.Unlock()
	if first {
		go s.sweepLoop()
	}
	return s.acceptLoop(dl)
}

// acceptLoop is Serve's loop: it accepts until the listener reports
// net.ErrClosed (after Shutdown: once every connection is gone, see
// drainListener), backing off on other errors (EMFILE, ...) as net/http
// does. If the listener is closed without a Shutdown, the connections it
// accepted are closed too.
func (s *Server) acceptLoop(dl *drainListener) error {
	defer dl.Close()
	var delay time.Duration
	for {
		nc, err := dl.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				s.closeConnsOf(dl)
				return nil
			}
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.log.Warn("accept failed; retrying", "err", err, "delay", delay)
			time.Sleep(delay)
			continue
		}
		delay = 0
		c := s.accept(nc, dl)
		if c == nil {
			nc.Close()
			continue
		}
		if lc := loopConnOf(nc); lc != nil {
			l := s.loops[int(s.nextLoop.Add(1))%len(s.loops)]
			if err := l.add(c, lc); err != nil {
				s.log.Warn("cannot hand a connection to the event loop", "err", err)
				c.netConn.Close()
				s.closed(c)
			}
			continue
		}
		go s.serveConn(c) // conn.go
	}
}

// closeConnsOf closes the connections accepted from dl (a listener closed
// without Shutdown), outside s.mu (a TLS close may block). Their goroutines
// then unregister them.
func (s *Server) closeConnsOf(dl *drainListener) {
	var conns []net.Conn
	s.mu.Lock()
	for _, c := range s.clients {
		if c.ln == dl {
			conns = append(conns, c.netConn)
		}
	}
	s.mu.Unlock()
	for _, nc := range conns {
		nc.Close()
	}
}

// ServeTLS is Serve speaking TLS with Config.TLSConfig.
func (s *Server) ServeTLS(ln net.Listener) error {
	if s.cfg.TLSConfig == nil {
		return errors.New("server: ServeTLS without a TLS config")
	}
	return s.Serve(tls.NewListener(ln, s.cfg.TLSConfig))
}

// Addr returns the listening address once Serve has started, else nil.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.lns) == 0 {
		return nil
	}
	return s.lns[0].Addr()
}

// Shutdown stops accepting, lets every connection finish the commands it
// has read (their replies are flushed), closes the connections and returns
// when all are gone or ctx ends (then the rest are closed abruptly).
func (s *Server) Shutdown(ctx context.Context) error {
	if s.closing.Swap(true) {
		return nil
	}
	defer s.stopLoops()
	s.mu.Lock()
	lns := s.lns
	clients := make([]*client, 0, len(s.clients))
	for _, c := range s.clients {
		clients = append(clients, c)
	}
	s.mu.Unlock()
	close(s.sweepCtl)
	s.sweepWG.Wait()
	if len(lns) == 0 {
		return nil
	}
	for _, dl := range lns {
		dl.stopAccepting()
	}
	// A read deadline in the past wakes each connection's reader once its
	// current pipeline is answered and flushed; serveConn then closes it.
	for _, c := range clients {
		c.netConn.SetReadDeadline(time.Unix(1, 0))
	}
	done := make(chan struct{})
	go func() { s.conns.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		s.mu.Lock()
		for _, c := range s.clients {
			c.netConn.Close()
		}
		s.mu.Unlock()
		<-done
	}
	for _, dl := range lns {
		dl.release() // lets the accept loop return
	}
	return err
}

// busyPollCounts sums the event loops' busy-poll counters (INFO stats).
func (s *Server) busyPollCounts() (polls, hits int64) { return s.sumLoops((*eventLoop).pollCounts) }

// wakeCounts sums the event loops' wakes and the events they served
// (INFO stats).
func (s *Server) wakeCounts() (wakes, events int64) { return s.sumLoops((*eventLoop).wakeCounts) }

// loopYields sums the event loops' yields between turns (INFO stats
// loop_yields, loopYieldEvery).
func (s *Server) loopYields() int64 {
	y, _ := s.sumLoops(func(l *eventLoop) (int64, int64) { return l.yieldCount(), 0 })
	return y
}

// sumLoops sums a pair of counters (f) over the event loops.
func (s *Server) sumLoops(f func(*eventLoop) (int64, int64)) (a, b int64) {
	s.mu.Lock()
	loops := s.loops
	s.mu.Unlock()
	for _, l := range loops {
		x, y := f(l)
		a += x
		b += y
	}
	return a, b
}

// stopLoops stops the event loops, whose connections are gone. Shutdown.
func (s *Server) stopLoops() {
	s.mu.Lock()
	loops := s.loops
	s.mu.Unlock()
	for _, l := range loops {
		l.shutdown()
	}
}

// startLoops reports whether ln's connections go to event loops, starting
// the loops on the first call that says so. Serve only.
func (s *Server) startLoops(ln net.Listener) bool {
	if !loopsSupported || s.cfg.IOLoops < 0 {
		return false
	}
	if _, ok := ln.(*net.TCPListener); !ok {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Load() {
		return false
	}
	if len(s.loops) > 0 {
		return true
	}
	for range s.cfg.IOLoops {
		l, err := newEventLoop(s)
		if err != nil {
			s.log.Warn("no event loop; a goroutine per connection instead", "err", err)
			for _, l := range s.loops {
				l.shutdownIdle()
			}
			s.loops = nil
			return false
		}
		s.loops = append(s.loops, l)
	}
	for _, l := range s.loops {
		go l.run()
	}
	return true
}

// accept registers a new connection and returns its client, or nil when
// the connection is refused (shutting down, protected mode). Runs on the
// accept loop.
func (s *Server) accept(nc net.Conn, dl *drainListener) *client {
	if s.closing.Load() || !s.allowedPeer(nc) {
		return nil
	}
	c := newClient(s, nc)
	c.ln = dl
	if o, ok := unwrapConn[*outConn](nc); ok {
		o.setClient(c)
	}
	s.mu.Lock()
	if s.closing.Load() {
		// Shutdown has taken its list of clients: this one would never
		// get its read deadline.
		s.mu.Unlock()
		return nil
	}
	s.clients[c.id] = c
	s.conns.Add(1)
	s.mu.Unlock()
	s.stats.connections.Add(1)
	return c
}

// closed unregisters a connection. Runs on the connection's goroutine, after
// the connection is closed.
func (s *Server) closed(c *client) {
	if c.fwd != nil {
		c.fwd.sess.Close()
	}
	c.discardMulti() // releases a queue's held memory
	s.watch.unwatchAll(c)
	s.trackingClosed(c)
	c.publishCommands()
	in, out := c.netBytes()
	s.mu.Lock()
	delete(s.clients, c.id)
	s.closedCommands += c.commands.Load()
	s.closedNetIn += in
	s.closedNetOut += out
	s.mu.Unlock()
	s.conns.Done()
}

// commandsProcessed is total_commands_processed: every command read from a
// connection (executed, queued in MULTI or rejected), live connections
// and closed ones. Each connection counts its own (client.commands, added
// once per pipeline), so the hot path shares no counter across cores; this
// sum costs one atomic load per connected client, under s.mu.
func (s *Server) commandsProcessed() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.closedCommands
	for _, c := range s.clients {
		n += c.commands.Load()
	}
	return n
}

// netBytes is total_net_input_bytes and total_net_output_bytes: bytes
// read from and taken by the sockets of every connection, live and
// closed, counted per read and per write (not per command). It costs two
// atomic loads per connected client, under s.mu.
func (s *Server) netBytes() (in, out int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, out = s.closedNetIn, s.closedNetOut
	for _, c := range s.clients {
		i, o := c.netBytes()
		in += i
		out += o
	}
	return in, out
}

// now reads the clock once for a command.
func (s *Server) now() int64 { return s.cfg.Clock() }

// sweepLoop runs the store's active expiry cycle every SweepInterval, with
// a budget of a quarter of the interval.
func (s *Server) sweepLoop() {
	defer s.sweepWG.Done()
	t := time.NewTicker(s.cfg.SweepInterval)
	defer t.Stop()
	clock := time.NewTicker(100 * time.Millisecond)
	defer clock.Stop()
	for {
		select {
		case <-s.sweepCtl:
			return
		case now := <-clock.C:
			s.coarseMs.Store(now.UnixMilli())
		case <-t.C:
			s.dbs.SweepStep(s.now()/1e6, s.cfg.SweepInterval/4)
		}
	}
}

// drainListener lets Shutdown stop accepting while the connections drain:
// after stopAccepting, the real listener is closed but Accept blocks until
// release, so the accept loop (which, on a closed listener, closes the
// connections it accepted) returns only after the drain.
type drainListener struct {
	net.Listener
	stopped  chan struct{}
	released chan struct{}
	once     sync.Once
	rel      sync.Once
}

func newDrainListener(ln net.Listener) *drainListener {
	return &drainListener{Listener: ln, stopped: make(chan struct{}), released: make(chan struct{})}
}

func (d *drainListener) Accept() (net.Conn, error) {
	conn, err := d.Listener.Accept()
	if err != nil {
		select {
		case <-d.stopped:
			<-d.released
			return nil, net.ErrClosed
		default:
			return nil, err
		}
	}
	return conn, nil
}

func (d *drainListener) stopAccepting() {
	d.once.Do(func() {
		close(d.stopped)
		d.Listener.Close()
	})
}

func (d *drainListener) release() { d.rel.Do(func() { close(d.released) }) }

// Close is stop-and-release (the accept loop calls it on the way out).
func (d *drainListener) Close() error {
	d.stopAccepting()
	d.release()
	return nil
}

// keyspace is the keyspace c's commands read and write: the store of c's
// selected database (databases.go). Every command handler reaches keys
// through it, never through s.store directly (which is database 0's
// store only until a SWAPDB). Hot path: a bounds check and one atomic load.
func (s *Server) keyspace(c *client) *store.Store { return s.dbs.DB(c.db) }
