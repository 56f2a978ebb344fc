package server

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// serverExt is the Server's observability and client-side-caching state:
// the tracking table, error counters, the run id, and what INFO and Stats
// read from the listeners. Its zero value is ready; Server embeds it as ext.
type serverExt struct {
	trk trackingTable // CLIENT TRACKING (tracking.go)

	errors [len(errorKinds)]atomic.Int64 // error replies by kind
	custom customErrors                  // other error codes (errorstats.go)
	cmds   []cmdStats                    // per command, by cmdMeta.idx (cmdstats.go)

	idOnce sync.Once
	runID  string // 40 hex digits, random per process start

	mu       sync.Mutex // guards the fields below
	counters []listenerCounters
	// rejectedBase is the listeners' rejected connections at the last
	// CONFIG RESETSTAT, subtracted from their count.
	rejectedBase int64
	peakMem      uint64
	opsSample    struct {
		at       time.Time
		commands int64
		rate     float64
	}
}

// listenerCounters is what a wrapping listener (the protocol guard) may
// report: connections refused over maxclients, and the limit.
type listenerCounters struct {
	rejected   func() int64
	maxClients func() int
}

// init allocates the per-command counters (New).
func (x *serverExt) init() { x.cmds = make([]cmdStats, numCommands) }

// id returns the run id: a random 40-hex-digit string fixed for this
// process's Server, as Redis's run_id.
func (x *serverExt) id() string {
	x.idOnce.Do(func() {
		var b [20]byte
		rand.Read(b[:])
		x.runID = hex.EncodeToString(b[:])
	})
	return x.runID
}

// wrapListener is called by Serve on the listener it will accept from:
// it remembers the listener's counters (if it is the guard's) and wraps it
// so that every connection can receive invalidation pushes (tracking.go).
func (s *Server) wrapListener(ln net.Listener) net.Listener {
	var lc listenerCounters
	if r, ok := ln.(interface{ Rejected() int64 }); ok {
		lc.rejected = r.Rejected
	}
	if m, ok := ln.(interface{ MaxClients() int }); ok {
		lc.maxClients = m.MaxClients
	}
	if lc.rejected != nil || lc.maxClients != nil {
		s.ext.mu.Lock()
		s.ext.counters = append(s.ext.counters, lc)
		s.ext.mu.Unlock()
	}
	return pushListener{ln, s}
}

// listenerTotals sums the wrapped listeners' rejected connections and
// returns the smallest configured maxclients (0 if unknown or unlimited).
func (x *serverExt) listenerTotals() (rejected int64, maxClients int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, lc := range x.counters {
		if lc.rejected != nil {
			rejected += lc.rejected()
		}
		if lc.maxClients != nil {
			if m := lc.maxClients(); m > 0 && (maxClients == 0 || m < maxClients) {
				maxClients = m
			}
		}
	}
	return rejected - x.rejectedBase, maxClients
}

// opsPerSec estimates instantaneous_ops_per_sec: the command rate since the
// last estimate at least 100 ms old (INFO and Stats calls take the samples).
func (x *serverExt) opsPerSec(commands int64, now time.Time) float64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	o := &x.opsSample
	if o.at.IsZero() {
		o.at, o.commands = now, commands
		return 0
	}
	if dt := now.Sub(o.at); dt >= 100*time.Millisecond {
		o.rate = float64(commands-o.commands) / dt.Seconds()
		o.at, o.commands = now, commands
	}
	return o.rate
}

// notePeak records a memory reading and returns the highest seen.
func (x *serverExt) notePeak(used uint64) uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	if used > x.peakMem {
		x.peakMem = used
	}
	return x.peakMem
}

// Stats is a point-in-time copy of the server's counters, for exporters
// (package metrics). Counters only grow; gauges are as of the call.
//
// CONFIG RESETSTAT zeroes the counters (Redis's rule), as a restart does.
type Stats struct {
	Start               time.Time // when the Server was created
	ConnectionsReceived int64     // connections accepted, ever
	ConnectedClients    int       // connections open now
	RejectedConnections int64     // refused over maxclients by the guard
	MaxClients          int       // 0 when unknown or unlimited
	TrackingClients     int       // clients with CLIENT TRACKING on
	TrackedKeys         int       // keys in the tracking table
	CommandsProcessed   int64     // commands read (total_commands_processed); a connection's are added once per pipeline
	ThrottleAllowed     int64     // CL.THROTTLE decisions
	ThrottleDenied      int64
	Decisions           []Decision // the other throttling commands', per command (decisions.go)
	KeyspaceHits        int64
	KeyspaceMisses      int64
	HandlerPanics       int64
	ExpiredKeys         int64 // keys removed because their TTL passed (expired_keys)
	NetInputBytes       int64 // bytes read from clients (total_net_input_bytes)
	NetOutputBytes      int64 // bytes written to clients (total_net_output_bytes)
	// Limiters are the decisions per limiter and command, every
	// throttling command (decisions.go).
	Limiters []LimiterDecisions
	// OutputBufferLimitDisconnections counts clients closed for their
	// output buffer (client_output_buffer_limit_disconnections).
	OutputBufferLimitDisconnections int64
	Keys                            int  // keys in the store (DBSIZE)
	Loading                         bool // a restore is in progress
	// The memory bound (store/memory.go): used_memory, maxmemory (0 =
	// none), maxmemory-policy, evicted_keys.
	UsedMemory, MaxMemory int64
	MaxMemoryPolicy       string
	EvictedKeys           int64
	// Errors counts error replies by code, as Redis's errorstats do (the
	// reply's first word, "Cell" for CL.THROTTLE's "Cell error: ...";
	// "OTHER" also holds codes past errorstats.go's maxErrorCodes).
	Errors map[string]int64
	// Commands holds every command called or rejected at least once,
	// sorted by name; subcommands are "client|tracking" and so on.
	Commands []CommandStats
}

// CommandStats are one command's counters.
type CommandStats struct {
	Name     string
	Calls    int64 // executed
	Failed   int64 // executed, replied with an error
	Rejected int64 // refused before running
	// Sampled calls were timed (see cmdstats.go: a sample, not every call);
	// SampledTime is their total duration and Latency their histogram,
	// Latency[i] counting durations <= LatencyBuckets[i] (and above the
	// previous bound), the last element those above every bound.
	Sampled     int64
	SampledTime time.Duration
	Latency     [numLatencyBuckets]int64
	Hits        int64
	Misses      int64
}

// EstimatedTime scales the sampled time up to all calls.
func (cs *CommandStats) EstimatedTime() time.Duration {
	if cs.Sampled == 0 {
		return 0
	}
	if cs.Sampled == cs.Calls {
		return cs.SampledTime
	}
	return time.Duration(float64(cs.SampledTime) / float64(cs.Sampled) * float64(cs.Calls))
}

// sum adds up a command's shards.
func (s *Server) sum(cmd *command, name string) CommandStats {
	out := CommandStats{Name: name}
	cs := s.statsOf(cmd)
	for i := range cs.shards {
		sh := &cs.shards[i]
		out.Calls += sh.calls.Load()
		out.Failed += sh.failed.Load()
		out.Rejected += sh.rejected.Load()
		out.Sampled += sh.sampled.Load()
		out.SampledTime += time.Duration(sh.sampledNs.Load())
		out.Hits += sh.hits.Load()
		out.Misses += sh.misses.Load()
		for j := range sh.buckets {
			out.Latency[j] += sh.buckets[j].Load()
		}
	}
	return out
}

// commandStats returns the stats of every command (and subcommand, named
// "parent|sub") that was called or rejected, sorted by name. A container
// with subcommands is reported through its subcommands only, as Redis does.
func (s *Server) commandStats() []CommandStats {
	var out []CommandStats
	for _, name := range sortedNames() {
		cmd := commands[name]
		if cmd.subs == nil {
			if cs := s.sum(cmd, name); cs.Calls+cs.Rejected > 0 {
				out = append(out, cs)
			}
			continue
		}
		subs := make([]string, 0, len(cmd.subs))
		for n := range cmd.subs {
			subs = append(subs, n)
		}
		sort.Strings(subs)
		for _, n := range subs {
			if cs := s.sum(cmd.subs[n], name+"|"+n); cs.Calls+cs.Rejected > 0 {
				out = append(out, cs)
			}
		}
	}
	return out
}

// Stats returns a snapshot of the server's counters. Safe for concurrent
// use; it takes a few locks briefly (the client table, each store shard to
// count keys) and allocates the result.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	connected := len(s.clients)
	s.mu.Unlock()
	rejected, maxClients := s.ext.listenerTotals()
	st := Stats{
		Start:                           s.start,
		ConnectionsReceived:             s.stats.connections.Load(),
		ConnectedClients:                connected,
		RejectedConnections:             rejected,
		MaxClients:                      maxClients,
		TrackingClients:                 int(s.ext.trk.active.Load()),
		TrackedKeys:                     s.ext.trk.numKeys(),
		CommandsProcessed:               s.commandsProcessed(),
		Limiters:                        s.dec.limiterDecisions(), // decisions.go
		HandlerPanics:                   s.stats.panics.Load(),
		ExpiredKeys:                     s.dbs.ExpiredKeys(),
		OutputBufferLimitDisconnections: s.stats.obufDisconnects.Load(),
		Keys:                            s.dbs.Keys(),
		Loading:                         s.loading(),
		UsedMemory:                      s.store.UsedMemory(),
		MaxMemory:                       s.store.MaxMemory(),
		MaxMemoryPolicy:                 s.store.Policy().String(),
		EvictedKeys:                     s.store.EvictedKeys(),
		Errors:                          make(map[string]int64, len(errorKinds)),
		Commands:                        s.commandStats(),
	}
	st.NetInputBytes, st.NetOutputBytes = s.netBytes()
	for _, e := range s.ext.errorCounts() {
		st.Errors[e.code] = e.count
	}
	st.ThrottleAllowed, st.ThrottleDenied, st.Decisions = splitDecisions(st.Limiters) // decisions.go
	for i := range st.Commands {
		st.KeyspaceHits += st.Commands[i].Hits
		st.KeyspaceMisses += st.Commands[i].Misses
	}
	return st
}
