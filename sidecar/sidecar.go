// Package sidecar is celld's sidecar mode (--upstream): a window onto one
// shared limiter. Beside each application replica, it forwards every keyed
// command to the node that owns the key (a celld cluster, or a Redis with
// redis-cell), so that N replicas share one limit, and decides alone, by
// its fallback mode, only while that owner cannot be reached.
//
// The server hands it pipelines through server.AsyncForwarder (one
// loopSession per client served by an event loop: loop.go, the fast path)
// or server.Forwarder (one blocking Session per client with a goroutine of
// its own: session.go); it routes each command by hash slot (topology from
// CLUSTER SLOTS of any seed, refreshed periodically and on MOVED/ASK; a
// non-cluster upstream owns every slot), sends each owner's share of the
// pipeline on one of a few multiplexed connections to it, and returns the
// owners' replies untouched, in the client's order.
package sidecar

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/celld/celld/cluster"
	"github.com/celld/celld/server"
)

// Mode is what a command meets while its owner cannot be reached.
type Mode int

const (
	// Local decides with the sidecar's own keyspace (same algorithm, its
	// own state and persistence): each sidecar then grants up to the
	// whole limit on its own while the owner is away.
	Local Mode = iota
	// Open answers CL.THROTTLE "allowed" (0 limit limit-quantity -1 0)
	// and every other command the Closed error: no limit at all while
	// the owner is away.
	Open
	// Closed answers an error that names the owner: no request passes
	// while the owner is away.
	Closed
)

var modeNames = [...]string{"local", "open", "closed"}

func (m Mode) String() string { return modeNames[m] }

// ParseMode reads "local", "open" or "closed".
func ParseMode(s string) (Mode, error) {
	for i, n := range modeNames {
		if s == n {
			return Mode(i), nil
		}
	}
	return 0, fmt.Errorf("sidecar: unknown fallback mode %q", s)
}

// Config is a sidecar's settings; zero fields take the documented default.
type Config struct {
	// Seeds are upstream addresses (host:port); any one that answers
	// gives the topology. Required.
	Seeds []string
	// Fallback is the mode while an owner cannot be reached. Default Local.
	Fallback Mode
	// Timeout bounds how long a command waits for its owner (dial,
	// send and reply) before the owner is taken as down. Default 250ms.
	Timeout time.Duration
	// BulkTimeout is the same bound for a bulk read (HGETALL, LRANGE,
	// KEYS, ...: bulk.go), whose owner may compute for longer than
	// Timeout before the first byte of its reply. Default 10s, and never
	// below Timeout.
	BulkTimeout time.Duration
	// User and Password authenticate to the upstream ("" = none).
	User, Password string
	// TLS, when set, reaches the upstream over TLS.
	TLS *tls.Config
	// PoolSize is how many multiplexed connections each owner gets per
	// protocol version. Default 2.
	PoolSize int
	// RefreshInterval is how often the topology is read again. Default 10s.
	RefreshInterval time.Duration
	// MaxInFlight bounds the replies awaited on one upstream connection;
	// a session that finds every connection of its owner that busy waits
	// (at most Timeout). Default 8192.
	MaxInFlight int
	// Logger, default slog.Default().
	Logger *slog.Logger
	// ReplyLimit, when above 0, bounds how much of one owner reply the
	// sidecar collects: a reply that passes it is read on and discarded
	// as it comes, and its request answered ForwardReq.Dropped, which
	// makes the server close the client for its output limit. Set it to
	// the hard output limit of the server the sidecar forwards for
	// (--client-output-buffer-limit): a reply past it closes the client
	// anyway, as Redis closes one. 0: replies are collected whole.
	ReplyLimit int64
}

// Sidecar forwards commands to their owners; it implements
// server.Forwarder and server.AsyncForwarder (loop.go: clients served by
// the event loops). Safe for concurrent use.
type Sidecar struct {
	cfg  Config
	log  *slog.Logger
	topo atomic.Pointer[topology]

	// mu guards owners, nextID, redirected and loops; the topology is
	// stored under it too (install), so that an owner dropped under mu
	// is never one a topology being installed lists.
	mu     sync.Mutex
	owners map[string]*owner // by address, kept across refreshes while listed or up (forget)
	nextID int               // the next owner's id: never reused (loopState.plain is by id)
	// redirected are the owners known only from MOVED/ASK replies (no
	// topology lists them), with when a redirect last named each: at
	// most redirectMax, each dropped redirectTTL after its last use
	// (redirectOwner). Before, every redirect to a new address added an
	// owner, its connections and its pool for the sidecar's life.
	redirected  map[*owner]time.Time
	redirectTTL time.Duration // redirectKeep; tests shorten it
	ownerLinger time.Duration // unlistedKeep; tests shorten it
	// self is where the server listens (ListeningOn, self.go): an
	// owner there is this sidecar, never forwarded to. Stored under mu.
	self atomic.Pointer[selfInfo]
	// loops are the event loops that serve clients (loop.go), each
	// with its own upstream connections.
	loops map[server.ForwardLoop]*loopState

	refreshing atomic.Bool
	// refreshMu serialises topology reads (refresh): the periodic one
	// and those requests and probes trigger could overlap, and an older
	// read installed after a newer one would bring back the owners the
	// newer one had left out.
	refreshMu sync.Mutex
	// soonAt is when a request last asked for a refresh (UnixNano: its
	// slot had no owner, or its owner answered MOVED): at most one such
	// refresh per soonGap, so a topology that stays partial, or an owner
	// that keeps answering MOVED, costs a CLUSTER SLOTS read every
	// soonGap, not one per request.
	soonAt    atomic.Int64
	closed    chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
	goMu      sync.Mutex // goTracked: orders wg.Add before Close's Wait

	stats Stats
}

// Stats are the sidecar's counters (metrics, INFO).
type Stats struct {
	Forwarded      atomic.Int64    // commands (transactions count one) answered by their owner
	FallbackByMode [3]atomic.Int64 // commands decided by the fallback, by Mode
	UpstreamErrors atomic.Int64    // sends, dials or replies that failed or timed out
	// WritesUnknown counts writes sent to an owner whose reply did not
	// come: answered an error, not the fallback (session.failed).
	WritesUnknown atomic.Int64
	Redirects     atomic.Int64 // MOVED/ASK replies followed
	Refreshes     atomic.Int64 // topology reads that succeeded
	// Unowned counts commands whose slot had no owner in the topology (a
	// CLUSTER SLOTS read during a failover): decided by the fallback.
	Unowned atomic.Int64
	// Refused counts commands their owner refused unrun (-TRYAGAIN: a
	// fenced HA leader, as while etcd is down; -CLUSTERDOWN) after
	// refusing everything for longer than Timeout: decided by the
	// fallback, but in the closed mode (session.refusedByOwner).
	Refused atomic.Int64
}

// topology maps every slot to its owner.
type topology struct {
	cluster bool
	slots   [cluster.SlotCount]*owner
	owners  []*owner // distinct, sorted by address
	// idx is slots as indexes into owners (set by index, when there
	// are at most 255 owners): 16 KiB instead of 128 KiB, so that the
	// lookup of a random slot on the forwarding path stays in cache.
	idx   [cluster.SlotCount]uint8
	small bool
	set   map[*owner]bool // owners as a set, when there are many (has)
}

// index fills idx from slots and owners (and set, for has).
func (t *topology) index() *topology {
	if len(t.owners) > 16 {
		t.set = make(map[*owner]bool, len(t.owners))
		for _, o := range t.owners {
			t.set[o] = true
		}
	}
	if len(t.owners) > 255 {
		return t
	}
	at := make(map[*owner]uint8, len(t.owners))
	for i, o := range t.owners {
		at[o] = uint8(i)
	}
	for i, o := range t.slots {
		k, ok := at[o]
		if !ok {
			return t // a slot without an owner (nil): keep the pointer table
		}
		t.idx[i] = k
	}
	t.small = true
	return t
}

// has reports whether o owns slots in t: a scan of a few owners, a map
// of many (set by index, so that a probe of each of 10,000 owners does
// not scan 10,000 every 100 ms).
func (t *topology) has(o *owner) bool {
	if t.set != nil {
		return t.set[o]
	}
	for _, x := range t.owners {
		if x == o {
			return true
		}
	}
	return false
}

// owner returns slot's owner (nil when none).
func (t *topology) owner(slot int) *owner {
	if t.small {
		return t.owners[t.idx[slot]]
	}
	return t.slots[slot]
}

// New returns a Sidecar; Start begins the topology reads.
func New(cfg Config) (*Sidecar, error) {
	if len(cfg.Seeds) == 0 {
		return nil, errors.New("sidecar: no upstream address")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 250 * time.Millisecond
	}
	if cfg.Timeout < 0 {
		return nil, errors.New("sidecar: negative timeout")
	}
	if cfg.BulkTimeout < 0 {
		return nil, errors.New("sidecar: negative bulk timeout")
	}
	if cfg.BulkTimeout == 0 {
		cfg.BulkTimeout = 10 * time.Second
	}
	cfg.BulkTimeout = max(cfg.BulkTimeout, cfg.Timeout)
	if cfg.PoolSize <= 0 {
		cfg.PoolSize = 2
	}
	if cfg.RefreshInterval <= 0 {
		cfg.RefreshInterval = 10 * time.Second
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 8192
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Sidecar{cfg: cfg, log: cfg.Logger, owners: map[string]*owner{}, closed: make(chan struct{}),
		redirected: map[*owner]time.Time{}, redirectTTL: redirectKeep, ownerLinger: unlistedKeep}
	// Until the first read, the first seed owns every slot (a plain
	// upstream; a cluster node answers MOVED, which reads the topology).
	t := &topology{}
	o := s.ownerFor(cfg.Seeds[0])
	for i := range t.slots {
		t.slots[i] = o
	}
	t.owners = []*owner{o}
	s.topo.Store(t.index())
	return s, nil
}

// Start reads the topology once (errors are logged: the fallback answers
// meanwhile) and then every RefreshInterval until Close.
func (s *Sidecar) Start() {
	if err := s.refresh(); err != nil {
		s.log.Warn("upstream topology not read yet", "err", err)
	}
	s.wg.Add(2)
	go s.timeoutTicks() // loop.go
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(s.cfg.RefreshInterval)
		defer t.Stop()
		for {
			select {
			case <-s.closed:
				return
			case <-t.C:
				if err := s.refresh(); err != nil {
					s.log.Debug("upstream topology refresh failed", "err", err)
				}
			}
		}
	}()
}

// Close stops the refreshes and probes and closes every upstream connection.
func (s *Sidecar) Close() {
	s.goMu.Lock()
	s.closeOnce.Do(func() { close(s.closed) })
	s.goMu.Unlock()
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.owners {
		o.closeConns(true)
	}
	for _, ls := range s.loops {
		if !ls.l.Post(ls.closeAll) {
			ls.closeAll() // the loop has stopped: nothing else uses them
		}
	}
}

// StatsRef returns the live counters.
func (s *Sidecar) StatsRef() *Stats { return &s.stats }

// ownerFor returns the owner at addr, creating it.
func (s *Sidecar) ownerFor(addr string) *owner {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ownerForLocked(addr)
}

// ownerForLocked is ownerFor with s.mu held.
func (s *Sidecar) ownerForLocked(addr string) *owner {
	o := s.owners[addr]
	if o == nil {
		o = &owner{addr: addr, sc: s, id: s.nextID}
		s.nextID++
		for p := range o.conns {
			o.conns[p] = make([]*muxConn, s.cfg.PoolSize)
		}
		s.owners[addr] = o
		if s.isSelf(addr) {
			s.markSelf(o)
		}
	}
	return o
}

// Bounds on the owners known only from redirects (Sidecar.redirected).
const (
	// redirectMax is how many are kept; a redirect to one more drops
	// the one least recently named.
	redirectMax = 64
	// redirectKeep is how long one is kept after the last redirect that
	// named it (dropped at the next redirect or topology read after
	// that): a follow-up redirect within it finds the owner, its
	// connection and its breaker (a dead target is not dialled again).
	redirectKeep = 10 * time.Second
)

// redirectOwner returns the owner at addr, named by a MOVED or ASK
// reply, creating it. One no topology lists is remembered as a redirect
// target (Sidecar.redirected), and the targets past their bounds are
// dropped. Any goroutine; takes s.mu (a redirect already costs a round
// trip and a follow on the blocking path).
func (s *Sidecar) redirectOwner(addr string) *owner {
	now := time.Now()
	s.mu.Lock()
	o := s.ownerForLocked(addr)
	if !s.topo.Load().has(o) {
		s.redirected[o] = now
	}
	drop := s.trimRedirectsLocked(now)
	s.mu.Unlock()
	s.release(drop)
	return o
}

// listed reports whether o is in the topology or a redirect target still
// kept: an owner whose probe should go on while it is down.
func (s *Sidecar) listed(o *owner) bool {
	if s.topo.Load().has(o) {
		return true
	}
	s.mu.Lock()
	_, ok := s.redirected[o]
	s.mu.Unlock()
	return ok
}

// trimRedirectsLocked drops the redirect targets unused for redirectTTL,
// then the least recently used ones past redirectMax; an owner the
// topology lists meanwhile leaves the set but is kept. It returns the
// owners dropped, for release (outside s.mu).
func (s *Sidecar) trimRedirectsLocked(now time.Time) []*owner {
	var drop []*owner
	t := s.topo.Load()
	for o, at := range s.redirected {
		if t.has(o) {
			delete(s.redirected, o)
		} else if now.Sub(at) >= s.redirectTTL {
			drop = append(drop, s.dropLocked(o))
		}
	}
	for len(s.redirected) > redirectMax {
		var oldest *owner
		var at time.Time
		for o, a := range s.redirected {
			if oldest == nil || a.Before(at) {
				oldest, at = o, a
			}
		}
		drop = append(drop, s.dropLocked(oldest))
	}
	return drop
}

// dropLocked removes o from the owners kept and from the redirect
// targets, and takes it down for good (its breaker: a session still
// holding it, from a topology loaded before, falls back rather than dial
// a connection nobody would close). Its id is not reused (a loop's table
// by id may still hold a dead connection of it). release closes its
// connections.
func (s *Sidecar) dropLocked(o *owner) *owner {
	if s.owners[o.addr] == o {
		delete(s.owners, o.addr)
	}
	delete(s.redirected, o)
	o.br.fail(time.Now(), errDropped)
	return o
}

// sweepUnlistedLocked drops the owners that topology t, just installed,
// does not list, and no redirect keeps, once they have been out of every
// read for ownerLinger, and appends them to drop. Before, an owner stayed
// for the sidecar's life once a topology had named it (with its pools
// and its connections on every event loop): after 60 reads each naming
// a new address for one shard, 61 owners and 60 loop connections stayed
// where 2 and 1 are in use (TestSidecarUnlistedOwnersDropped). A down
// one is forgotten by its probe before that (owner.probe). One pass
// over the owners per read, under s.mu.
func (s *Sidecar) sweepUnlistedLocked(now time.Time, t *topology, drop []*owner) []*owner {
	for _, o := range s.owners {
		if _, kept := s.redirected[o]; kept || t.has(o) {
			o.unlistedAt = time.Time{}
			continue
		}
		if o.unlistedAt.IsZero() {
			o.unlistedAt = now
		}
		if now.Sub(o.unlistedAt) >= s.ownerLinger {
			drop = append(drop, s.dropLocked(o))
		}
	}
	return drop
}

// errDropped is the breaker's last error of an owner the sidecar no
// longer keeps.
var errDropped = errors.New("sidecar: owner no longer listed")

// release closes the connections of the owners dropped (dropLocked):
// their pools, and on every event loop theirs (posted to the loop).
func (s *Sidecar) release(drop []*owner) {
	if len(drop) == 0 {
		return
	}
	for _, o := range drop {
		o.closeConns(true)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ls := range s.loops {
		ls.l.Post(func() { ls.dropOwners(drop) }) // refused once the loop has stopped: Close closed them
	}
}

// forget drops o, down and out of the topology and no redirect target
// (its probe has ended: owner.probe), and closes its connections: a
// topology or redirect that names its address again gets a fresh owner.
func (s *Sidecar) forget(o *owner) {
	s.mu.Lock()
	s.dropLocked(o)
	s.mu.Unlock()
	s.release([]*owner{o})
}

func (s *Sidecar) dialOpts(resp3 bool) dialOptions {
	return dialOptions{timeout: s.cfg.Timeout, user: s.cfg.User, password: s.cfg.Password, tls: s.cfg.TLS, resp3: resp3,
		replyLimit: s.cfg.ReplyLimit}
}

// refresh reads CLUSTER SLOTS from the current owners, then the seeds,
// until one answers, and installs the topology it describes. An -ERR
// reply ("cluster support disabled") makes that node the owner of every
// slot; any other error is a failed read.
//
// Reads are serialised (refreshMu). After a read is installed, the owners
// it does not list (nor any redirect) for ownerLinger are dropped with
// their connections (sweepUnlistedLocked).
func (s *Sidecar) refresh() error {
	s.refreshMu.Lock()
	defer s.refreshMu.Unlock()
	var tried []string
	seen := map[string]bool{}
	for _, o := range s.topo.Load().owners {
		if o.br.isUp() && !seen[o.addr] && !o.self.Load() {
			seen[o.addr] = true
			tried = append(tried, o.addr)
		}
	}
	for _, a := range s.cfg.Seeds {
		if !seen[a] && !s.isSelf(a) { // a seed that is this sidecar would answer for itself
			seen[a] = true
			tried = append(tried, a)
		}
	}
	if len(tried) == 0 {
		return errors.New("sidecar: every upstream seed is this sidecar's own address (--upstream names its --addr?)")
	}
	var errs []error
	for _, addr := range tried {
		reply, err := s.query(addr, "CLUSTER", "SLOTS")
		if err != nil {
			errs = append(errs, err)
			s.queryFailed(addr, err)
			continue
		}
		s.mu.Lock()
		t, err := s.parseSlots(addr, reply)
		if err != nil {
			s.mu.Unlock()
			errs = append(errs, err)
			continue
		}
		s.topo.Store(t)
		now := time.Now()
		drop := s.trimRedirectsLocked(now)
		drop = s.sweepUnlistedLocked(now, t, drop)
		s.mu.Unlock()
		s.release(drop)
		s.stats.Refreshes.Add(1)
		for _, o := range t.owners {
			if !o.br.isUp() {
				o.startProbe() // its probe may have ended before this read listed it again
			}
		}
		return nil
	}
	return errors.Join(errs...)
}

// queryFailed takes down the owner at addr of the current cluster
// topology whose topology read failed (no connection, no reply within the
// timeout), as a failed request would: the next reads skip it (they try
// the owners up first, then the seeds) and its probe watches it. Not for
// a plain upstream's single owner: there is no other node to ask first,
// and its requests keep their own timeout (TestSidecarLoopNotBlocked). Before, an owner blackholed while no
// request went to it stayed up, and every read waited the whole timeout
// on it before asking the next node: 250 ms per read and per such owner
// at the default timeout, while a failover's new topology waited
// (TestSidecarRefreshSkipsDeadOwner). Called by refresh, off the hot path.
func (s *Sidecar) queryFailed(addr string, err error) {
	s.mu.Lock()
	o := s.owners[addr]
	s.mu.Unlock()
	if t := s.topo.Load(); o != nil && t.cluster && !o.self.Load() && t.has(o) {
		o.failed(err)
	}
}

// query sends one command to addr on a connection of its own and returns
// the reply.
func (s *Sidecar) query(addr string, args ...string) ([]byte, error) {
	m, err := dial(addr, s.dialOpts(false), nil)
	if err != nil {
		return nil, err
	}
	defer m.close()
	b := newBatch(1)
	r := &request{done: b}
	if err := m.send(appendStrings(nil, args...), []*request{r}); err != nil {
		return nil, err
	}
	select {
	case <-b.ch:
	case <-time.After(s.cfg.Timeout):
		m.close()
		<-b.ch
	}
	return r.reply, r.err
}

// parseSlots builds a topology from a CLUSTER SLOTS reply read from addr.
// s.mu is held (the owners it names are resolved and installed under it).
func (s *Sidecar) parseSlots(addr string, reply []byte) (*topology, error) {
	t := &topology{}
	if len(reply) > 0 && reply[0] == '-' && !bytes.HasPrefix(reply, []byte("-ERR ")) {
		// -LOADING (a node loading its data after a restart: it
		// answers PING, so its probe brings it back first),
		// -CLUSTERDOWN, -TRYAGAIN, -BUSY, -MASTERDOWN, ...: a read that
		// failed, not a node without cluster mode. Taken as the owner
		// of every slot, it got every other shard's keys
		// (TestSidecarClusterSlotsErrorNotPlain).
		return nil, fmt.Errorf("sidecar: %s: CLUSTER SLOTS: %s", addr, bytes.TrimRight(reply[1:], "\r\n"))
	}
	if len(reply) > 0 && reply[0] == '-' {
		// Not a cluster ("-ERR This instance has cluster support
		// disabled", "-ERR unknown command"): this node owns every slot.
		o := s.ownerForLocked(addr)
		for i := range t.slots {
			t.slots[i] = o
		}
		t.owners = []*owner{o}
		return t.index(), nil
	}
	v, _, err := parseValue(reply)
	if err != nil {
		return nil, err
	}
	ranges, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("sidecar: %s: CLUSTER SLOTS is not an array", addr)
	}
	seedHost := addr[:strings.LastIndexByte(addr, ':')]
	distinct := map[*owner]bool{}
	assigned := 0
	for _, r := range ranges {
		e, ok := r.([]any)
		if !ok || len(e) < 3 {
			return nil, fmt.Errorf("sidecar: %s: bad CLUSTER SLOTS entry", addr)
		}
		first, ok1 := e[0].(int64)
		last, ok2 := e[1].(int64)
		node, ok3 := e[2].([]any)
		if !ok1 || !ok2 || !ok3 || len(node) < 2 || first < 0 || last >= cluster.SlotCount || first > last {
			return nil, fmt.Errorf("sidecar: %s: bad CLUSTER SLOTS entry", addr)
		}
		host, _ := node[0].(string)
		port, okp := node[1].(int64)
		if !okp {
			return nil, fmt.Errorf("sidecar: %s: bad CLUSTER SLOTS node", addr)
		}
		if host == "" || host == "?" {
			host = seedHost
		}
		o := s.ownerForLocked(joinHostPort(host, port))
		distinct[o] = true
		for i := first; i <= last; i++ {
			if t.slots[i] == nil {
				assigned++
			}
			t.slots[i] = o
		}
	}
	if assigned == 0 {
		return nil, fmt.Errorf("sidecar: %s: no slot assigned", addr)
	}
	t.cluster = true
	for o := range distinct {
		t.owners = append(t.owners, o)
	}
	sort.Slice(t.owners, func(i, j int) bool { return t.owners[i].addr < t.owners[j].addr })
	return t.index(), nil
}

func joinHostPort(host string, port int64) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + strconv.FormatInt(port, 10)
	}
	return host + ":" + strconv.FormatInt(port, 10)
}

// goTracked counts in wg a goroutine about to start and reports true,
// unless Close has begun (then false: start none). A WaitGroup's Add must
// not race its Wait: an owner failing (a connection's reader calls
// owner.failed, which starts a probe) while Close waits raced, and the
// probe could start after Wait returned. The check and the Add are under
// goMu, which Close takes to close s.closed. Any goroutine.
func (s *Sidecar) goTracked() bool {
	s.goMu.Lock()
	defer s.goMu.Unlock()
	select {
	case <-s.closed:
		return false
	default:
	}
	s.wg.Add(1)
	return true
}

// triggerRefresh reads the topology again in the background, unless a
// read is already running.
func (s *Sidecar) triggerRefresh() {
	if !s.refreshing.CompareAndSwap(false, true) {
		return
	}
	if !s.goTracked() {
		s.refreshing.Store(false)
		return
	}
	go func() {
		defer s.wg.Done()
		defer s.refreshing.Store(false)
		if err := s.refresh(); err != nil {
			s.log.Debug("upstream topology refresh failed", "err", err)
		}
	}()
}

// soonGap is the least time between two refreshes asked for by requests
// (refreshSoon).
const soonGap = 100 * time.Millisecond

// refreshSoon is called when a request's slot has no owner in the current
// topology (a CLUSTER SLOTS read taken while a shard had no leader, an HA
// failover, leaves its slots out: the request is decided by the
// fallback), or when its owner answered MOVED (the request is followed
// there). The topology is read again at once rather than at the next
// RefreshInterval, at most once per soonGap: an owner that answers MOVED
// to every request (a node whose MOVED and CLUSTER SLOTS disagree, one
// that redirects to itself) made every MOVED start a read as soon as the
// last ended, 1,400-3,500 CLUSTER SLOTS a second (each on a new
// connection) for one client in a loop; TestSidecarMovedRefreshesBounded. Any
// goroutine; one atomic load when a read was asked for within soonGap.
func (s *Sidecar) refreshSoon() {
	now := time.Now().UnixNano()
	last := s.soonAt.Load()
	if now-last < int64(soonGap) || !s.soonAt.CompareAndSwap(last, now) {
		return
	}
	s.triggerRefresh()
}

// errSelectCluster is Redis Cluster's answer to SELECT of a database
// other than 0.
const errSelectCluster = "ERR SELECT is not allowed in cluster mode"

// SelectError implements server.ForwardSelectChecker: with a cluster
// upstream, SELECT of any database but 0 is refused as a cluster node
// refuses it (a cluster has database 0 only); with a plain upstream every
// database the sidecar has is carried to the owner (each forwarded command
// runs in the client's database there, on connections of that database).
func (s *Sidecar) SelectError(db int) string {
	if db != 0 && s.topo.Load().cluster {
		return errSelectCluster
	}
	return ""
}

// ForwardsKeyless implements server.ForwardKeyless: with a plain upstream
// (one owner holds every key, as the application would see it without a
// sidecar) the keyspace's introspection goes there — DBSIZE, SCAN, KEYS,
// RANDOMKEY — and so do SCRIPT LOAD and SCRIPT EXISTS, so that EVALSHA
// (forwarded by its keys) finds the scripts the application loaded. What
// would change the shared limiter for every application (FLUSHDB,
// FLUSHALL, SCRIPT FLUSH) stays here: it clears only the sidecar's own
// fallback state. With a cluster upstream everything keyless stays here
// (DBSIZE and SCAN would need a fan-out over every owner with merged
// cursors, which this version does not do).
func (s *Sidecar) ForwardsKeyless(name string, args [][]byte) bool {
	if s.topo.Load().cluster {
		return false
	}
	switch name {
	case "dbsize", "scan", "keys", "randomkey":
		return true
	case "script":
		return len(args) > 1 && (strings.EqualFold(string(args[1]), "load") || strings.EqualFold(string(args[1]), "exists"))
	}
	return false
}

// Owner implements server.Forwarder.
func (s *Sidecar) Owner(slot int) string {
	if o := s.topo.Load().slots[slot]; o != nil {
		return o.addr
	}
	return ""
}

// State summarises the upstream: "ok" (every owner answers), "degraded"
// (some do not) or "down" (none does).
func (s *Sidecar) State() string {
	t := s.topo.Load()
	down := 0
	for _, o := range t.owners {
		if !o.br.isUp() {
			down++
		}
	}
	switch {
	case down == 0:
		return "ok"
	case down == len(t.owners):
		return "down"
	}
	return "degraded"
}

// Info implements server.Forwarder: INFO's Upstream section.
func (s *Sidecar) Info() []string {
	t := s.topo.Load()
	mode := "plain"
	if t.cluster {
		mode = "cluster"
	}
	lines := []string{
		"upstream_state:" + s.State(),
		"upstream_mode:" + mode,
		"upstream_seeds:" + strings.Join(s.cfg.Seeds, ","),
		"upstream_fallback:" + s.cfg.Fallback.String(),
		"upstream_timeout_ms:" + strconv.FormatInt(s.cfg.Timeout.Milliseconds(), 10),
		"upstream_bulk_timeout_ms:" + strconv.FormatInt(s.cfg.BulkTimeout.Milliseconds(), 10),
		"upstream_owners:" + strconv.Itoa(len(t.owners)),
		"upstream_forwarded:" + strconv.FormatInt(s.stats.Forwarded.Load(), 10),
		"upstream_fallback_local:" + strconv.FormatInt(s.stats.FallbackByMode[Local].Load(), 10),
		"upstream_fallback_open:" + strconv.FormatInt(s.stats.FallbackByMode[Open].Load(), 10),
		"upstream_fallback_closed:" + strconv.FormatInt(s.stats.FallbackByMode[Closed].Load(), 10),
		"upstream_writes_unknown:" + strconv.FormatInt(s.stats.WritesUnknown.Load(), 10),
		"upstream_errors:" + strconv.FormatInt(s.stats.UpstreamErrors.Load(), 10),
		"upstream_redirects:" + strconv.FormatInt(s.stats.Redirects.Load(), 10),
		"upstream_topology_refreshes:" + strconv.FormatInt(s.stats.Refreshes.Load(), 10),
		"upstream_unowned:" + strconv.FormatInt(s.stats.Unowned.Load(), 10),
		"upstream_refused:" + strconv.FormatInt(s.stats.Refused.Load(), 10),
	}
	now := time.Now()
	counts := t.slotCounts()
	for i, o := range t.owners {
		up, since, failures, _ := o.br.snapshot()
		st := "up"
		downMs := int64(0)
		if !up {
			st = "down"
			downMs = now.Sub(since).Milliseconds()
		}
		if o.self.Load() {
			st = "self"
		}
		lines = append(lines, fmt.Sprintf("owner%d:addr=%s,state=%s,slots=%d,failures=%d,down_ms=%d",
			i, o.addr, st, counts[o], failures, downMs))
	}
	return lines
}

// slotCounts returns how many slots each owner holds, in one pass over
// the slots (INFO upstream: a pass per owner cost 77 ms with 10,000
// owners).
func (t *topology) slotCounts() map[*owner]int {
	n := make(map[*owner]int, len(t.owners))
	for _, x := range t.slots {
		if x != nil {
			n[x]++
		}
	}
	return n
}

// OwnerStats is one owner's figures for metrics.
type OwnerStats struct {
	Addr    string
	Up      bool
	Latency Histogram
}

// Owners returns each current owner's state and latency histogram.
func (s *Sidecar) Owners() []OwnerStats {
	t := s.topo.Load()
	out := make([]OwnerStats, 0, len(t.owners))
	for _, o := range t.owners {
		out = append(out, OwnerStats{Addr: o.addr, Up: o.br.isUp(), Latency: o.lat.snapshot()})
	}
	return out
}

// Session implements server.Forwarder.
func (s *Sidecar) Session() server.ForwardSession {
	return &session{sc: s, timer: stoppedTimer()}
}

func stoppedTimer() *time.Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}

// unlistedKeep is how long an owner no topology lists (nor any redirect)
// is kept, up, with its connections, before it is dropped: a topology
// read during a failover may leave a node out for a moment.
const unlistedKeep = 10 * time.Second
