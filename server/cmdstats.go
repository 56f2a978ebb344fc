package server

import (
	"sync/atomic"
	"time"
)

// Per-command statistics (INFO commandstats, errorstats, latencystats and
// the metrics exporter's command counters and latency histograms).
//
// Hot-path cost. Every executed command adds one to its call counter and,
// if the reply is an error, to its failed counter and to one error-kind
// counter. The counters of a command are split into statShards padded
// shards chosen by the connection id, so connections on different cores do
// not bounce one cache line. Latency needs two clock reads, which cost more
// than the whole of a CL.THROTTLE on some virtual machines (kvm-clock), so
// only a sample of calls is timed: the first sampleAll calls of a command in
// each shard, then one call in sampleEvery. usec in INFO commandstats is
// scaled up from the sample; the latency histogram holds the sampled calls
// only (its count is the number of samples, not of calls).

// statShards is how many padded counter sets each command has.
const statShards = 8

// sampleEvery and sampleAll choose which calls are timed (see above).
// sampleEvery must be a power of two.
const (
	sampleEvery = 64
	sampleAll   = 1024
)

// LatencyBuckets are the upper bounds of the command latency histogram
// buckets; a last, unbounded bucket follows them. They are what Stats
// reports in CommandStats.Latency.
var LatencyBuckets = [...]time.Duration{
	1 * time.Microsecond,
	2500 * time.Nanosecond,
	5 * time.Microsecond,
	10 * time.Microsecond,
	25 * time.Microsecond,
	50 * time.Microsecond,
	100 * time.Microsecond,
	250 * time.Microsecond,
	500 * time.Microsecond,
	1 * time.Millisecond,
	2500 * time.Microsecond,
	10 * time.Millisecond,
	50 * time.Millisecond,
	250 * time.Millisecond,
	1 * time.Second,
}

// numLatencyBuckets counts the bounded buckets plus the unbounded one.
const numLatencyBuckets = len(LatencyBuckets) + 1

// statShard is one shard of a command's counters. All fields are atomic.
type statShard struct {
	calls     atomic.Int64
	failed    atomic.Int64 // ran and replied with an error
	rejected  atomic.Int64 // refused before running (arity, NOAUTH, MOVED, LOADING)
	sampled   atomic.Int64 // timed calls
	sampledNs atomic.Int64 // their total duration
	hits      atomic.Int64 // keyspace hits of read commands
	misses    atomic.Int64
	buckets   [numLatencyBuckets]atomic.Int64
	_         [64 - (7*8+numLatencyBuckets*8)%64]byte
}

// cmdStats are a command's counters in one Server. The zero value is
// ready.
type cmdStats struct {
	shards [statShards]statShard
}

func (cs *cmdStats) shard(id int64) *statShard { return &cs.shards[uint64(id)%statShards] }

// numCommands counts the commands and subcommands built so far; each gets
// the next index (init time only, single goroutine).
var numCommands int

// statsOf returns cmd's counters in s.
func (s *Server) statsOf(cmd *command) *cmdStats { return &s.ext.cmds[cmd.meta.idx] }

// cmdMeta is what the hot path needs to know about a command without
// looking at its flag list: set once by spec.build.
type cmdMeta struct {
	idx      int  // index of the command's counters in serverExt.cmds
	write    bool // flagged write: a successful call may modify its keys
	readonly bool // flagged readonly with key arguments: tracked reads
	flush    bool // FLUSHDB/FLUSHALL
	noMulti  bool // flagged no_multi (SAVE, SHUTDOWN): refused inside MULTI
	exec     bool // EXEC: a refused EXEC aborts the transaction
	denyOOM  bool // flagged denyoom: refused over the memory bound (dispatch, scripts)
	keyRead  replyKind
	// intIsValue: an integer reply is a value, not a count of changes
	// (Command.IntIsValue), so :0 does not mean "nothing written".
	intIsValue bool
	// prefetchWindow: which calls' first key is a CL.WINDOW key whose
	// window block a batch prefetches (Command.PrefetchWindow), or nil.
	prefetchWindow func(args [][]byte) bool
}

// replyKind tells how a read command's reply shows a keyspace hit or miss.
type replyKind uint8

const (
	replyNone   replyKind = iota // not counted
	replyNull                    // null = miss (GET)
	replyMinus2                  // :-2 = miss (TTL, PTTL, EXPIRETIME, PEXPIRETIME)
	replyCount                   // :n = n hits out of the key count (EXISTS)
	replyNone0                   // +none = miss (TYPE)
	replyZero                    // :0 = miss (STRLEN)
)

// initMeta fills cmd.meta from its name and flags (called by spec.build).
func (cmd *command) initMeta() {
	cmd.meta.idx = numCommands
	numCommands++
	cmd.meta.write = has(cmd.flags, "write")
	cmd.meta.readonly = has(cmd.flags, "readonly") && cmd.firstKey > 0
	cmd.meta.flush = cmd.name == "flushdb" || cmd.name == "flushall"
	cmd.meta.noMulti = has(cmd.flags, "no_multi")
	cmd.meta.exec = cmd.name == "exec"
	cmd.meta.denyOOM = has(cmd.flags, "denyoom")
	switch cmd.name {
	case "get":
		cmd.meta.keyRead = replyNull
	case "ttl", "pttl", "expiretime", "pexpiretime":
		cmd.meta.keyRead = replyMinus2
	case "exists":
		cmd.meta.keyRead = replyCount
	case "type":
		cmd.meta.keyRead = replyNone0
	case "strlen":
		cmd.meta.keyRead = replyZero
	}
}

// call runs one command that has passed dispatch's checks: it remembers the
// keys a tracking client reads, runs the command, counts it (and times a
// sample), and sends client-side-caching invalidations for the keys a
// write command changed. Every path that executes a command (dispatch, EXEC,
// scripts, subcommands) goes through here.
func (s *Server) call(c *client, cmd *command, args [][]byte) {
	if cmd.meta.write && s.cfg.WriteGate != nil && !s.replGate(c) {
		return // replgate.go: refused by replication
	}
	if c.trk != nil && cmd.meta.readonly {
		s.trackRead(c, cmd, args) // before the read: see tracking.go
	}
	st := s.statsOf(cmd).shard(c.id)
	n := st.calls.Add(1)
	c.ncalls++
	start := c.outMark()
	if n <= sampleAll || n&(sampleEvery-1) == 0 {
		t0 := time.Now()
		cmd.run(s, c, args)
		st.observe(time.Since(t0))
	} else {
		cmd.run(s, c, args)
	}
	reply := c.replyFrom(start)
	if len(reply) > 0 {
		switch reply[0] {
		case '-':
			st.failed.Add(1)
			if c.errCounted {
				c.errCounted = false // scripterr.go
			} else {
				s.ext.countError(reply[1:])
			}
		default:
			if cmd.meta.keyRead != replyNone {
				st.countKeyRead(cmd, args, reply)
			}
		}
	}
	if c.shadowed { // a shadow-mode answer (decisions.go): looks allowed, wrote nothing
		c.shadowed = false
		return
	}
	if cmd.meta.write && s.ext.trk.active.Load() != 0 {
		s.trackWrite(c, cmd, args, reply)
	}
	if cmd.meta.write && s.watch.n.Load() != 0 && modified(cmd, args, reply) {
		// WATCH: a write marks its keys' watchers dirty, as Redis's
		// touchWatchedKey does, even when the key is gone again by EXEC
		// (created and expired, or a 0 ms CL.THROTTLE peek). FLUSHDB and
		// FLUSHALL touch the watchers of the keys they removed themselves
		// (cmdFlush), before the keys are gone.
		if !cmd.meta.flush {
			s.watch.touchKeys(cmd, args, c.db)
		}
	}
}

func (st *statShard) observe(d time.Duration) {
	st.sampled.Add(1)
	st.sampledNs.Add(int64(d))
	i := 0
	for i < len(LatencyBuckets) && d > LatencyBuckets[i] {
		i++
	}
	st.buckets[i].Add(1)
}

// countKeyRead classifies a read command's reply as keyspace hits and
// misses, as Redis counts lookups.
func (st *statShard) countKeyRead(cmd *command, args [][]byte, reply []byte) {
	miss := false
	switch cmd.meta.keyRead {
	case replyNull:
		miss = reply[0] == '_' || (len(reply) > 2 && reply[0] == '$' && reply[1] == '-')
	case replyMinus2:
		miss = len(reply) > 2 && reply[1] == '-' && reply[2] == '2'
	case replyNone0:
		miss = len(reply) > 1 && reply[1] == 'n'
	case replyZero:
		miss = len(reply) > 1 && reply[1] == '0'
	case replyCount:
		hits, ok := parseInt64(trimReplyLine(reply[1:]))
		if !ok {
			return
		}
		keys := int64(len(args) - 1)
		st.hits.Add(hits)
		st.misses.Add(keys - hits)
		return
	}
	if miss {
		st.misses.Add(1)
	} else {
		st.hits.Add(1)
	}
}

// trimReplyLine returns b up to its first CR.
func trimReplyLine(b []byte) []byte {
	for i, ch := range b {
		if ch == '\r' {
			return b[:i]
		}
	}
	return b
}

// afterDispatch runs after every top-level command of a connection
// (execute calls it); the command's reply is c.replyFrom(start). A command that
// produced an error without being executed was rejected (unknown, wrong
// arity, NOAUTH, MOVED, LOADING, ...); and a tracking client's CLIENT
// CACHING flag expires here (tracking.go).
func (s *Server) afterDispatch(c *client, args [][]byte, start int) {
	called := c.ncalls
	c.ncalls = 0
	if called == 0 && len(args) > 0 {
		if reply := c.replyFrom(start); len(reply) > 0 && reply[0] == '-' {
			s.ext.countError(reply[1:])
			if cmd := lookup(commands, args[0]); cmd != nil {
				if cmd.subs != nil && len(args) > 1 {
					if sub := lookup(cmd.subs, args[1]); sub != nil {
						cmd = sub
					}
				}
				s.statsOf(cmd).shard(c.id).rejected.Add(1)
			}
		}
	}
	if c.trk != nil && len(args) > 0 {
		c.trk.afterCommand(c, args)
	}
}

// Error kinds, Redis's errorstats: the first word of an error reply.
var errorKinds = [...]string{
	"ERR", "WRONGTYPE", "NOSCRIPT", "NOAUTH", "WRONGPASS", "NOPERM",
	"MOVED", "ASK", "CROSSSLOT", "CLUSTERDOWN", "TRYAGAIN", "LOADING",
	"EXECABORT", "NOPROTO", "BUSY", "NOTBUSY", "READONLY", "OOM",
	"DENIED", "Cell", "OTHER",
}

const errKindOther = len(errorKinds) - 1

// errorKind returns the index in errorKinds of an error reply's text
// (after the '-') or of its code (errorCode, errorstats.go), without
// allocating; errKindOther for a code not in errorKinds.
func errorKind(msg []byte) int { return codeKind(errorCode(msg)) }

// codeKind returns the index in errorKinds of an error code.
func codeKind(code []byte) int {
	switch string(code) {
	case "ERR":
		return 0
	case "WRONGTYPE":
		return 1
	case "NOSCRIPT":
		return 2
	case "NOAUTH":
		return 3
	case "WRONGPASS":
		return 4
	case "NOPERM":
		return 5
	case "MOVED":
		return 6
	case "ASK":
		return 7
	case "CROSSSLOT":
		return 8
	case "CLUSTERDOWN":
		return 9
	case "TRYAGAIN":
		return 10
	case "LOADING":
		return 11
	case "EXECABORT":
		return 12
	case "NOPROTO":
		return 13
	case "BUSY":
		return 14
	case "NOTBUSY":
		return 15
	case "READONLY":
		return 16
	case "OOM":
		return 17
	case "DENIED":
		return 18
	case "Cell":
		return 19
	}
	return errKindOther
}
