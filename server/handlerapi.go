package server

import (
	"math"
	"strconv"

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
}

// Register adds commands to the dispatch table. Call it only from an init
// function (the table is read without locks once a server runs); it panics
// on a name that is already taken, so two packages can never silently
// replace each other's command.
func Register(cmds ...Command) {
	for _, rc := range cmds {
		if _, dup := commands[rc.Name]; dup {
			panic("server: command registered twice: " + rc.Name)
		}
		run := rc.Run
		sp := spec{
			name: rc.Name, arity: rc.Arity, flags: rc.Flags,
			first: rc.FirstKey, last: rc.LastKey, step: rc.Step,
			acl: rc.ACL, group: rc.Group, since: rc.Since, summary: rc.Summary,
			run: func(s *Server, c *client, args [][]byte) {
				x := Ctx{s: s, c: c, args: args}
				run(&x)
			},
		}
		commands[rc.Name] = sp.build()
	}
}

// Ctx is one call of a registered command: its arguments, the caller's
// keyspace and clock, and the reply writer. It lives on the caller's stack
// (Handler must not keep it), so a call allocates nothing for it.
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
func (x *Ctx) Cluster() bool { return x.s.cfg.Cluster != nil }

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
// aggregate header (Array, Map, Set) is followed by its elements.

// OK replies +OK.
func (x *Ctx) OK() { x.c.out = append(x.c.out, replyOK...) }

// Status replies a simple string; s must not contain CR or LF.
func (x *Ctx) Status(s string) { x.c.out = appendSimple(x.c.out, s) }

// Error replies an error; msg is the whole text after '-', with its code
// ("ERR ...", "WRONGTYPE ..."). CR and LF are made harmless.
func (x *Ctx) Error(msg string) { x.c.out = appendError(x.c.out, msg) }

// Int replies an integer.
func (x *Ctx) Int(n int64) { x.c.out = appendInt(x.c.out, n) }

// Bulk replies a bulk string.
func (x *Ctx) Bulk(b []byte) { x.c.out = appendBulk(x.c.out, b) }

// BulkString replies a bulk string.
func (x *Ctx) BulkString(s string) { x.c.out = appendBulkString(x.c.out, s) }

// Null replies the null bulk string ($-1 in RESP2, _ in RESP3).
func (x *Ctx) Null() { x.c.out = x.c.appendNull(x.c.out) }

// NullArray replies the null array (*-1 in RESP2, _ in RESP3).
func (x *Ctx) NullArray() { x.c.out = x.c.appendNullArray(x.c.out) }

// Array starts an array of n elements.
func (x *Ctx) Array(n int) { x.c.out = appendArray(x.c.out, n) }

// Map starts a map of n pairs (RESP3 '%', a flat array of 2n in RESP2).
func (x *Ctx) Map(n int) {
	if x.c.resp3 {
		x.c.out = appendHeader(x.c.out, '%', n)
		return
	}
	x.c.out = appendArray(x.c.out, 2*n)
}

// Set starts a set of n elements (RESP3 '~', an array in RESP2).
func (x *Ctx) Set(n int) {
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

// appendRedisDouble formats f as Redis 7 does for scores and
// INCRBYFLOAT-style replies: %.17g's shortest round-trip form.
func appendRedisDouble(b []byte, f float64) []byte {
	switch {
	case math.IsInf(f, 1):
		return append(b, "inf"...)
	case math.IsInf(f, -1):
		return append(b, "-inf"...)
	case math.IsNaN(f):
		return append(b, "nan"...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}

// ErrWrongTypeText is Redis's reply to a command on a key of another kind
// (store.ErrWrongType), for every command of every kind.
const ErrWrongTypeText = "WRONGTYPE Operation against a key holding the wrong kind of value"

// WrongType replies ErrWrongTypeText.
func (x *Ctx) WrongType() { x.Error(ErrWrongTypeText) }

// Raw appends bytes that are already RESP. The caller answers for framing.
func (x *Ctx) Raw(resp []byte) { x.c.out = append(x.c.out, resp...) }
