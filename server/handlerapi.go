package server

import (
	"math"
	"strconv"
	"strings"

	"github.com/celld/celld/store"
)

// The handler API: how commands implemented outside package server (the
// value kinds' handlers, the window commands, ...) join the dispatch table.
// A package registers its commands from an init function with Register;
// main imports it for that effect. Registered commands get everything
// built-in ones get: arity and auth checks, MULTI queueing, scripts,
// commandstats, COMMAND INFO/DOCS, cluster routing by their key positions,
// client-side-caching invalidation of the keys a write command names, and
// WATCH (through the store's per-key versions).

// Handler runs one command. It reads its arguments from x.Args and appends
// exactly one reply through x's reply methods. It runs on the connection's
// goroutine (or inside EXEC or a script), so it may block nothing; it must
// not keep x, x.Args or the arguments' bytes after it returns.
type Handler func(x *Ctx)

// Command describes a registered command in Redis 7.2's terms (the fields
// of COMMAND INFO and COMMAND DOCS).
type Command struct {
	Name     string // lower case
	Arity    int    // Redis convention: n exact, -n at least n, name included
	Flags    string // space-separated Redis command flags, e.g. "write denyoom fast"
	FirstKey int    // key positions, 0 when the command has no keys
	LastKey  int
	Step     int
	ACL      string // space-separated categories without '@', e.g. "write string fast"
	Group    string // "string", "hash", ...
	Since    string
	Summary  string
	Run      Handler
	// KeySpecs are Redis 7's key specifications for COMMAND INFO, when
	// they are not the one range spec the key positions and the write
	// flag imply (cmdinfo.go's keySpecsOf).
	KeySpecs []KeySpec
	// Tips are Redis's command tips ("request_policy:multi_shard", ...).
	Tips []string
	// Subcommands make the command a container (OBJECT): Run is unused and
	// the second word picks the subcommand, with its own arity, flags and
	// key positions (counted from the container's name).
	Subcommands []Command
	// IntIsValue says the command's integer reply is a value (INCR's new
	// count, APPEND's length), not a count of keys changed: a :0 reply
	// still wrote its key, for WATCH and client-side caching.
	IntIsValue bool
	// Modified, when set, tells WATCH and client-side caching whether a
	// call (its arguments, the command name first, and its reply) wrote
	// its keys (a denied limiter call does not); without it every reply
	// but an error or :0 counts as a write.
	Modified func(args [][]byte, reply []byte) bool
	// PrefetchWindow, when set, says which calls of the command decide a
	// CL.WINDOW key (its first key) whose state lives in a window block:
	// for a call (its arguments, the name first) it reports true, a
	// pipelined batch prefetches that key's block along with its entry
	// (store.Store.PrefetchWith), at the cost of one shard lock per such
	// key (the hash and index probe are the batch prefetch's own). It runs in the parser for every such command
	// read, so it must be cheap, not allocate, and keep nothing.
	PrefetchWindow func(args [][]byte) bool
}

// KeySpec is one key specification of COMMAND INFO: the key found at
// Index, then LastKey/KeyStep/Limit as Redis's find_keys range, or, with
// KeyNum, Redis's find_keys keynum: the number of keys at
// Index+KeyNumIdx, the first key at Index+FirstKey, then every KeyStep.
// A command with a keynum spec finds its keys from its specs (COMMAND
// GETKEYS, cluster routing, tracking, WATCH), as Redis's getkeys_proc
// does; its COMMAND INFO first/last/step are the legacy range its range
// specs imply (0 0 0 when it has none), as Redis 7 reports them.
type KeySpec struct {
	Flags                   string // space-separated, Redis's spelling: "RW access update"
	Notes                   string
	Index                   int
	LastKey, KeyStep, Limit int
	KeyNum                  bool
	KeyNumIdx, FirstKey     int
}

// registeredSpecs are the key specs of registered commands, by full name
// ("object|encoding"); read by keySpecsOf.
var registeredSpecs = map[string][]keySpec{}

// Register adds commands to the dispatch table. Call it only from an init
// function (the table is read without locks once a server runs); it panics
// on a name that is already taken, so two packages can never silently
// replace each other's command.
func Register(cmds ...Command) {
	for _, rc := range cmds {
		if _, dup := commands[rc.Name]; dup {
			panic("server: command registered twice: " + rc.Name)
		}
		cmd := registered(rc, rc.Name, rc.Group, rc.Since)
		if len(rc.Subcommands) > 0 {
			cmd.subs = make(map[string]*command, len(rc.Subcommands))
			for _, sub := range rc.Subcommands {
				built := registered(sub, rc.Name+"|"+sub.Name, rc.Group, rc.Since)
				built.fullname = rc.Name + "|" + sub.Name
				cmd.subs[sub.Name] = built
			}
			parent := cmd
			cmd.run = func(s *Server, c *client, args [][]byte) { s.subcommand(c, parent, args) }
		}
		commands[rc.Name] = cmd
	}
}

// registered builds the dispatch table's entry for rc, recording its key
// specs and tips under fullname.
func registered(rc Command, fullname, group, since string) *command {
	run := rc.Run
	sp := spec{
		name: rc.Name, arity: rc.Arity, flags: rc.Flags,
		first: rc.FirstKey, last: rc.LastKey, step: rc.Step,
		acl: rc.ACL, group: group, since: since, summary: rc.Summary,
		run: func(s *Server, c *client, args [][]byte) {
			// The client's own Ctx: a Ctx on this stack would escape
			// through the indirect call (one allocation per call). A
			// handler never runs another registered handler, so one
			// per client is enough.
			// Set and cleared field by field: *x = Ctx{...} was
			// compiled as the struct built on the stack with 8-byte
			// stores, then copied into x with 16-byte loads, which the
			// CPU cannot forward from those stores (each waited for
			// them to reach the cache), on every registered call.
			x := &c.hctx
			x.s, x.c, x.args = s, c, args
			run(x)
			x.s, x.c, x.args = nil, nil, nil // keep no references to the arguments
		},
	}
	if rc.Modified != nil {
		extModified[fullname] = rc.Modified
	}
	for _, k := range rc.KeySpecs {
		registeredSpecs[fullname] = append(registeredSpecs[fullname], keySpec{
			notes: k.Notes, flags: strings.Fields(k.Flags), index: k.Index,
			lastKey: k.LastKey, keyStep: k.KeyStep, lim: k.Limit,
			keynum: k.KeyNum, keynumIdx: k.KeyNumIdx, firstKey: k.FirstKey,
		})
	}
	if len(rc.Tips) > 0 {
		commandTips[fullname] = rc.Tips
	}
	cmd := sp.build()
	cmd.meta.intIsValue = rc.IntIsValue
	cmd.meta.prefetchWindow = rc.PrefetchWindow
	cmd.keynum = keynumOf(registeredSpecs[fullname]) // keyspecs.go
	return cmd
}

// Ctx is one call of a registered command: its arguments, the caller's
// keyspace and clock, and the reply writer. It lives in the caller's
// client, reused by every call (Handler must not keep it), so a call
// allocates nothing for it.
type Ctx struct {
	s    *Server
	c    *client
	args [][]byte
}

// Args are the command's arguments, the command name first. The bytes are
// the connection's read buffer: copy what must outlive the call.
func (x *Ctx) Args() [][]byte { return x.args }

// Store is the keyspace of the caller's selected database.
func (x *Ctx) Store() *store.Store { return x.s.keyspace(x.c) }

// DB is the caller's selected database number (SELECT; 0 in cluster mode).
func (x *Ctx) DB() int { return x.c.db }

// Database returns the keyspace of database n (COPY ... DB n), or false
// when n is not one of the --databases. It creates the database's store
// on first use. Cluster mode has database 0 only: callers answer Redis's
// "... is not allowed in cluster mode" themselves (Cluster).
func (x *Ctx) Database(n int64) (*store.Store, bool) {
	if !x.s.validDB(n) {
		return nil, false
	}
	return x.s.dbs.DB(int(n)), true
}

// Cluster reports whether the server runs in Redis Cluster mode.
func (x *Ctx) Cluster() bool { return x.s.clusterOn() }

// TouchWatched marks the clients that WATCH key in database db as having
// seen it change, for a command that writes a key of another database
// than the caller's (COPY ... DB n). The caller's own keys, named by the
// command's key positions, are touched by the dispatcher.
func (x *Ctx) TouchWatched(db int, key []byte) { x.s.watch.touch(db, key) }

// NowMs is the command's time in Unix milliseconds (read once per call;
// tests inject the clock).
func (x *Ctx) NowMs() int64 { return x.s.nowMs() }

// NowNs is the command's time in Unix nanoseconds.
func (x *Ctx) NowNs() int64 { return x.s.now() }

// RESP3 reports whether the caller switched to RESP3 with HELLO 3.
func (x *Ctx) RESP3() bool { return x.c.resp3 }

// Reply writers. Each appends one RESP value to the caller's output; an
// aggregate header (Array, Map, Set) is followed by its elements. Each
// first passes the output's check point (client.replyFull, obuf.go): one
// length comparison while the output is under 64 KiB; past it the output
// is handed to the connection (and its limit checked) before the value is
// appended, and once the connection is closed for its limit nothing more
// is appended, so that one large reply never grows past the limit.

// OK replies +OK.
func (x *Ctx) OK() {
	if x.c.replyFull() {
		return
	}
	x.c.out = append(x.c.out, replyOK...)
}

// Status replies a simple string; s must not contain CR or LF.
func (x *Ctx) Status(s string) {
	if x.c.replyFull() {
		return
	}
	x.c.out = appendSimple(x.c.out, s)
}

// Error replies an error; msg is the whole text after '-', with its code
// ("ERR ...", "WRONGTYPE ..."). CR and LF are made harmless.
func (x *Ctx) Error(msg string) {
	if x.c.replyFull() {
		return
	}
	x.c.out = appendError(x.c.out, msg)
}

// Int replies an integer.
func (x *Ctx) Int(n int64) {
	if x.c.replyFull() {
		return
	}
	x.c.out = appendInt(x.c.out, n)
}

// Bulk replies a bulk string.
func (x *Ctx) Bulk(b []byte) {
	if x.c.replyFull() {
		return
	}
	x.c.out = appendBulk(x.c.out, b)
}

// BulkString replies a bulk string.
func (x *Ctx) BulkString(s string) {
	if x.c.replyFull() {
		return
	}
	x.c.out = appendBulkString(x.c.out, s)
}

// Null replies the null bulk string ($-1 in RESP2, _ in RESP3).
func (x *Ctx) Null() {
	if x.c.replyFull() {
		return
	}
	x.c.out = x.c.appendNull(x.c.out)
}

// NullArray replies the null array (*-1 in RESP2, _ in RESP3).
func (x *Ctx) NullArray() {
	if x.c.replyFull() {
		return
	}
	x.c.out = x.c.appendNullArray(x.c.out)
}

// Array starts an array of n elements.
func (x *Ctx) Array(n int) {
	if x.c.replyFull() {
		return
	}
	x.c.out = appendArray(x.c.out, n)
}

// Map starts a map of n pairs (RESP3 '%', a flat array of 2n in RESP2).
func (x *Ctx) Map(n int) {
	if x.c.replyFull() {
		return
	}
	if x.c.resp3 {
		x.c.out = appendHeader(x.c.out, '%', n)
		return
	}
	x.c.out = appendArray(x.c.out, 2*n)
}

// Set starts a set of n elements (RESP3 '~', an array in RESP2).
func (x *Ctx) Set(n int) {
	if x.c.replyFull() {
		return
	}
	if x.c.resp3 {
		x.c.out = appendHeader(x.c.out, '~', n)
		return
	}
	x.c.out = appendArray(x.c.out, n)
}

// Double replies a floating-point number: RESP3 ',' or, in RESP2, a bulk
// string in Redis's shortest round-trip format ("inf", "-inf", "nan" as
// Redis spells them).
func (x *Ctx) Double(f float64) {
	if x.c.replyFull() {
		return
	}
	var buf [32]byte
	text := appendRedisDouble(buf[:0], f)
	if x.c.resp3 {
		x.c.out = append(x.c.out, ',')
		x.c.out = append(x.c.out, text...)
		x.c.out = append(x.c.out, '\r', '\n')
		return
	}
	x.c.out = appendBulk(x.c.out, text)
}

// AppendScore appends f as Redis writes a score in text (ZSCAN, RESP2
// replies): appendRedisDouble.
func AppendScore(b []byte, f float64) []byte { return appendRedisDouble(b, f) }

// appendRedisDouble formats f as Redis 7.0 does for scores: %.17g.
func appendRedisDouble(b []byte, f float64) []byte {
	switch {
	case math.IsInf(f, 1):
		return append(b, "inf"...)
	case math.IsInf(f, -1):
		return append(b, "-inf"...)
	case math.IsNaN(f):
		return append(b, "nan"...)
	}
	// An integral score below 2^53 in magnitude (counters, Unix times in
	// ms: most scores) is exact and has at most 16 digits, which %.17g
	// prints as the integer itself: AppendInt writes it several times
	// faster than AppendFloat. -0 keeps its sign ("-0"), as printf does.
	if f >= -(1<<53) && f <= 1<<53 && f == math.Trunc(f) && (f != 0 || !math.Signbit(f)) {
		return strconv.AppendInt(b, int64(f), 10)
	}
	// Redis 7.0's addReplyDouble: printf's %.17g, which strconv's 'g'
	// with precision 17 reproduces (0.1 is "0.10000000000000001",
	// 1700000000000 stays "1700000000000", 1e20 is "1e+20").
	return strconv.AppendFloat(b, f, 'g', 17, 64)
}

// ErrWrongTypeText is Redis's reply to a command on a key of another kind
// (store.ErrWrongType), for every command of every kind.
const ErrWrongTypeText = "WRONGTYPE Operation against a key holding the wrong kind of value"

// WrongType replies ErrWrongTypeText.
func (x *Ctx) WrongType() { x.Error(ErrWrongTypeText) }

// Raw appends bytes that are already RESP. The caller answers for framing.
func (x *Ctx) Raw(resp []byte) {
	if x.c.replyFull() {
		return
	}
	x.c.out = append(x.c.out, resp...)
}

// Decide counts one decision of a throttling command registered from
// outside package server (dc from RegisterDecisionCommand) on key — per
// limiter, allowed / denied / near the limit (remaining < 20% of limit) —
// and applies shadow mode (decisions.go). It returns the verdict to
// answer: on VerdictShadowDenied the handler must answer as allowed
// (limited 0, the limit, remaining 0, retry_after -1, its reset) and must
// not have written anything for the denial. A multi-key call decides which
// key labels it (celld's own count the key of the group that bound the
// verdict). Cost: as CL.THROTTLE's counting, no allocation.
func (x *Ctx) Decide(dc DecisionCmd, key []byte, limited bool, limit, remaining int64) Verdict {
	return x.s.decide(x.c, dc, key, limited, limit, remaining)
}

// Shadowed reports whether key matches a shadow-mode pattern, for a
// multi-key handler that applies shadow mode itself; it then counts the
// call with Count.
func (x *Ctx) Shadowed(key []byte) bool { return x.s.dec.shadowed(key) }

// Count counts one decision with verdict v on key's limiter without
// applying shadow mode (see Decide). A handler that answers
// VerdictShadowDenied and wrote nothing must also call NoWrite.
func (x *Ctx) Count(dc DecisionCmd, key []byte, v Verdict, limit, remaining int64) {
	x.s.dec.lookup(key).count(x.c.id, dc, v, limit, remaining)
}

// NoWrite tells WATCH and client tracking that this call, though its reply
// may look like a write's, changed nothing (a shadow-mode answer).
func (x *Ctx) NoWrite() { x.c.shadowed = true }

// StoreError replies the RESP error for an error of the store: ErrOOM as
// Redis's OOM text, ErrWrongType as WRONGTYPE, anything else as "ERR" and
// the error's text.
func (x *Ctx) StoreError(err error) {
	switch err {
	case store.ErrOOM:
		x.Error(errOOM)
	case store.ErrWrongType:
		x.WrongType()
	default:
		x.Error("ERR " + err.Error())
	}
}

// MaxBulk is the largest string a command may build (APPEND, SETRANGE):
// Config.MaxBulk, Redis's proto-max-bulk-len.
func (x *Ctx) MaxBulk() int64 { return x.s.cfg.MaxBulk }

// BulkText replies a store value's text as a bulk string without
// allocating (GET's reply).
func (x *Ctx) BulkText(v store.Value) {
	if x.c.replyFull() {
		return
	}
	x.c.out = appendHeader(x.c.out, '$', v.TextLen())
	x.c.out = v.AppendText(x.c.out)
	x.c.out = append(x.c.out, '\r', '\n')
}
