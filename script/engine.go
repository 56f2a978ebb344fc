// Package script runs Redis-style Lua scripts (EVAL, EVALSHA, SCRIPT LOAD)
// on an embedded Lua 5.1 (gopher-lua), with Redis 7's API inside the script
// (redis.call, redis.pcall, redis.error_reply, ...), its reply conversion
// rules in both directions and its error texts.
//
// The package knows nothing of the server: scripts reach commands through a
// Host, which runs one command and returns its RESP reply. The server owns
// the command table, the keyspace and atomicity (it runs a whole script under
// its exclusive lock); this package owns the Lua side: the script cache, a
// pool of sandboxed Lua states, the RESP <-> Lua conversions and the time
// limit.
//
// Concurrency: an Engine is safe for concurrent use. Each running script has
// a Lua state of its own, taken from the pool; the script cache has its own
// lock.
package script

import (
	"container/list"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	lua "github.com/yuin/gopher-lua"
)

// CallFlags tell a Host how to run a command for a script.
type CallFlags uint8

const (
	// ReadOnly: the script is read-only (EVAL_RO, EVALSHA_RO, or a script
	// whose shebang says no-writes); the host must refuse write commands
	// with "-ERR Write commands are not allowed from read-only scripts.".
	ReadOnly CallFlags = 1 << iota
	// RESP3: the script switched to RESP3 with redis.setresp(3); the host
	// must encode the reply in RESP3.
	RESP3
	// AllowOOM: the script's shebang says allow-oom (or no-writes, which
	// implies it, as in Redis): the host must not refuse its denyoom
	// commands over the memory bound. Without it (a script without a
	// shebang included) the host refuses a denyoom command over the bound
	// with Redis's OOM error until the script has written something.
	AllowOOM
)

// callFlags are the flags every command of a run of s starts with.
func callFlags(s *compiled, opt Options) CallFlags {
	var f CallFlags
	if opt.ReadOnly || (!s.compat && s.noWrites) {
		f |= ReadOnly
	}
	if !s.compat && (s.allowOOM || s.noWrites) {
		f |= AllowOOM
	}
	return f
}

// Host runs commands for scripts (redis.call and redis.pcall).
//
// Call runs one command; args[0] is its name as the script spelled it. It
// returns exactly one complete RESP reply. A command the host refuses
// (unknown, wrong arity, not allowed from scripts, a write in a read-only
// script) is answered with an error reply carrying Redis's text, e.g.
// "-ERR Unknown Redis command called from script\r\n". The returned bytes
// belong to the host and need stay valid only until the next Call; args
// belong to the caller and are valid only during Call (the host must not
// keep or modify them).
//
// One Host serves one Lua state, so Call is never called concurrently on
// the same Host.
type Host interface {
	Call(args [][]byte, flags CallFlags) []byte
}

// Config holds an Engine's settings. The zero value of each field means its
// documented default.
type Config struct {
	// NewHost returns the Host for a new pooled Lua state. Required.
	NewHost func() Host
	// TimeLimit is how long one script may run before it is stopped with
	// "ERR script timed out after <limit>". Default 5s. (Redis never stops
	// a script by time; see the package README section on scripting.)
	TimeLimit time.Duration
	// MaxEvalScripts bounds how many scripts first seen through EVAL stay
	// cached; past it the least recently used of them is forgotten, as
	// Redis 7.4 does. Scripts added by SCRIPT LOAD are kept until SCRIPT
	// FLUSH. Default 500.
	MaxEvalScripts int
	// Logger receives redis.log output. Default slog.Default().
	Logger *slog.Logger
	// RedisVersion is redis.REDIS_VERSION inside scripts, "major.minor.patch".
	// Default "7.2.4".
	RedisVersion string
	// OnMemory, if set, is called with every change (negative: a release)
	// of the cache's estimated memory (MemStats.ScriptBytes): a script
	// cached, forgotten (EVAL's LRU) or flushed. The server charges it to
	// used_memory, as Redis counts its script cache. It is called with the
	// engine's cache lock held, so it must be quick (an atomic add) and
	// must not call the Engine.
	OnMemory func(delta int64)
}

func (c *Config) setDefaults() {
	if c.TimeLimit <= 0 {
		c.TimeLimit = 5 * time.Second
	}
	if c.MaxEvalScripts <= 0 {
		c.MaxEvalScripts = 500
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.RedisVersion == "" {
		c.RedisVersion = "7.2.4"
	}
}

// Errors returned before a script runs. The caller turns them into replies.
var (
	// ErrNoScript: EVALSHA of a SHA1 not in the cache (Redis's NOSCRIPT).
	ErrNoScript = errors.New("script: no matching script")
	// ErrWriteScriptRO: EVAL_RO/EVALSHA_RO of a script whose shebang does
	// not say no-writes.
	ErrWriteScriptRO = errors.New("script: write script run with a read-only command")
	// ErrOOM: a script whose shebang says neither allow-oom nor no-writes,
	// run while Options.OverMemory reports the memory bound reached (Redis
	// refuses such an EVAL whole, as a denyoom command).
	ErrOOM = errors.New("script: over the memory bound")
)

// LoadError is a script that cannot be created: a compile error or a bad
// shebang. Msg is Redis's text without the "ERR " prefix, e.g.
// "Error compiling script (new function): user_script:1: ...".
type LoadError struct{ Msg string }

func (e *LoadError) Error() string { return "script: " + e.Msg }

// Options are a single run's settings.
type Options struct {
	// ReadOnly: EVAL_RO / EVALSHA_RO.
	ReadOnly bool
	// RESP3: the calling connection speaks RESP3 (HELLO 3); the script's
	// result is encoded for it.
	RESP3 bool
	// Caller is handed to a CallerHost (caller.go) for the run; nil is fine.
	Caller any
	// Flush, when set, is called while a script's result is encoded into
	// dst, between the elements of a table, whenever what was appended
	// passes FlushAt bytes; it returns the buffer to go on appending to
	// (dst handed on and emptied by the server's output, so that a large
	// result never sits whole in memory, or dropped once the caller's
	// connection is gone). It is called on the EVAL's goroutine.
	Flush func(dst []byte) []byte
	// OverMemory, when set, is asked before a script with a shebang that
	// says neither allow-oom nor no-writes runs; true refuses the run with
	// ErrOOM. nil: no memory bound.
	OverMemory func() bool
}

// FlushAt is the output length past which the result's encoder calls
// Options.Flush.
const FlushAt = 64 << 10

// compiled is one cached script. Immutable after creation except the
// cache bookkeeping, which is guarded by Engine.mu.
type compiled struct {
	sha   string // 40 lower-case hex digits
	body  string
	proto *lua.FunctionProto // shared by every pooled state (read-only)
	// Shebang flags. compat is true without a shebang (Redis's "eval
	// compatibility mode": writes are checked per command).
	compat   bool
	noWrites bool
	allowOOM bool // "allow-oom": may write over the memory bound
	// oneCommand: the script runs at most one command (atMostOneCommand).
	oneCommand bool
	// direct: the script is a single redis.call the engine runs without
	// the VM (direct.go); nil otherwise.
	direct *direct

	lru *list.Element // in Engine.evictable; nil once SCRIPT LOAD pinned it
	mem int64         // scriptBytes at caching (the estimate charged for it)
}

// Engine is a script cache plus a pool of Lua states.
type Engine struct {
	cfg Config

	mu        sync.Mutex
	bytes     int64 // the cached scripts' mem, summed
	bySHA     map[string]*compiled
	byBody    map[string]*compiled // EVAL looks scripts up by body: no SHA1 per call
	evictable *list.List           // scripts first seen by EVAL, least recently used first

	noDirect bool // tests: always run the VM

	rand *rand48 // math.random's state, shared by every script as in Redis

	idle   atomic.Pointer[vm] // one idle state, the common case: scripts run one at a time
	poolMu sync.Mutex
	pool   []*vm
}

// maxPooled bounds the idle Lua states kept; more can run at once, the
// extra ones are closed when they finish.
const maxPooled = 16

// New returns an Engine. It panics if cfg.NewHost is nil.
func New(cfg Config) *Engine {
	if cfg.NewHost == nil {
		panic("script: Config.NewHost is required")
	}
	cfg.setDefaults()
	e := &Engine{cfg: cfg, rand: newRand48()}
	e.resetLocked()
	return e
}

func (e *Engine) resetLocked() {
	e.addMemLocked(-e.bytes)
	e.bySHA = make(map[string]*compiled)
	e.byBody = make(map[string]*compiled)
	e.evictable = list.New()
}

// SHA1Hex returns the lower-case hex SHA1 of b, as redis.sha1hex and
// SCRIPT LOAD compute it.
func SHA1Hex(b []byte) string {
	sum := sha1.Sum(b)
	return hex.EncodeToString(sum[:])
}

// Load compiles and caches body (SCRIPT LOAD) and returns its SHA1. A script
// loaded this way stays cached until Flush.
func (e *Engine) Load(body []byte) (string, error) {
	s, err := e.get(body, true)
	if err != nil {
		return "", err
	}
	return s.sha, nil
}

// Exists reports whether a script with this SHA1 (any case) is cached.
func (e *Engine) Exists(sha []byte) bool {
	var buf [40]byte
	if !lowerSHA(&buf, sha) {
		return false
	}
	e.mu.Lock()
	_, found := e.bySHA[string(buf[:])]
	e.mu.Unlock()
	return found
}

// Flush forgets every cached script (SCRIPT FLUSH). Scripts running now
// finish normally.
func (e *Engine) Flush() {
	e.mu.Lock()
	e.resetLocked()
	e.mu.Unlock()
}

// Len returns the number of cached scripts.
func (e *Engine) Len() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.bySHA)
}

// RunsOneCommand reports whether the cached script for body (or, bySHA,
// for the SHA1 in body) is known to run at most one command, so that the
// caller need not exclude other clients to make it atomic. False when the
// script is not cached yet.
func (e *Engine) RunsOneCommand(body []byte, bySHA bool) bool {
	var s *compiled
	if bySHA {
		var buf [40]byte
		if !lowerSHA(&buf, body) {
			return false
		}
		e.mu.Lock()
		s = e.bySHA[string(buf[:])]
		e.mu.Unlock()
	} else {
		e.mu.Lock()
		s = e.byBody[string(body)]
		e.mu.Unlock()
	}
	return s != nil && s.oneCommand
}

// Eval runs body (EVAL), caching it first if needed, and appends the
// script's reply (a RESP value; script errors are error replies) to dst.
// An error is returned, and nothing appended, only when the script cannot
// be created (*LoadError) or may not run (ErrWriteScriptRO).
func (e *Engine) Eval(dst, body []byte, keys, args [][]byte, opt Options) ([]byte, error) {
	s, err := e.get(body, false)
	if err != nil {
		return dst, err
	}
	return e.run(dst, s, keys, args, opt)
}

// EvalSHA runs the cached script with this SHA1 (EVALSHA); it returns
// ErrNoScript when there is none.
func (e *Engine) EvalSHA(dst, sha []byte, keys, args [][]byte, opt Options) ([]byte, error) {
	var buf [40]byte
	if !lowerSHA(&buf, sha) {
		return dst, ErrNoScript
	}
	e.mu.Lock()
	s := e.bySHA[string(buf[:])] // no allocation for the lookup
	if s != nil && s.lru != nil {
		e.evictable.MoveToBack(s.lru)
	}
	e.mu.Unlock()
	if s == nil {
		return dst, ErrNoScript
	}
	return e.run(dst, s, keys, args, opt)
}

// lowerSHA lower-cases a 40-byte SHA1 into buf; false if it is not 40
// bytes long.
func lowerSHA(buf *[40]byte, sha []byte) bool {
	if len(sha) != 40 {
		return false
	}
	for i, ch := range sha {
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		buf[i] = ch
	}
	return true
}

// get returns the cached script for body, compiling it on a miss. pin
// marks it as loaded by SCRIPT LOAD (never evicted).
func (e *Engine) get(body []byte, pin bool) (*compiled, error) {
	e.mu.Lock()
	s := e.byBody[string(body)] // no allocation for the lookup
	if s != nil {
		e.touchLocked(s, pin)
		e.mu.Unlock()
		return s, nil
	}
	e.mu.Unlock()

	s, err := compile(string(body))
	if err != nil {
		return nil, err
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	if old := e.bySHA[s.sha]; old != nil { // compiled concurrently
		e.touchLocked(old, pin)
		return old, nil
	}
	e.bySHA[s.sha] = s
	e.byBody[s.body] = s
	s.mem = scriptBytes(s)
	e.addMemLocked(s.mem)
	if !pin {
		s.lru = e.evictable.PushBack(s)
		for e.evictable.Len() > e.cfg.MaxEvalScripts {
			old := e.evictable.Remove(e.evictable.Front()).(*compiled)
			old.lru = nil
			delete(e.bySHA, old.sha)
			delete(e.byBody, old.body)
			e.addMemLocked(-old.mem)
		}
	}
	return s, nil
}

// addMemLocked adds d to the cache's estimate and tells Config.OnMemory.
// e.mu must be held.
func (e *Engine) addMemLocked(d int64) {
	if d == 0 {
		return
	}
	e.bytes += d
	if e.cfg.OnMemory != nil {
		e.cfg.OnMemory(d)
	}
}

func (e *Engine) touchLocked(s *compiled, pin bool) {
	if s.lru == nil {
		return
	}
	if pin {
		e.evictable.Remove(s.lru)
		s.lru = nil
		return
	}
	e.evictable.MoveToBack(s.lru)
}

// run executes s on a pooled Lua state.
func (e *Engine) run(dst []byte, s *compiled, keys, args [][]byte, opt Options) ([]byte, error) {
	if opt.ReadOnly && !s.compat && !s.noWrites {
		return dst, ErrWriteScriptRO
	}
	if !s.compat && !s.allowOOM && !s.noWrites && opt.OverMemory != nil && opt.OverMemory() {
		return dst, ErrOOM
	}
	v := e.getVM()
	ch, _ := v.host.(CallerHost)
	if ch != nil {
		ch.SetCaller(opt.Caller)
	}
	if s.direct != nil && !e.noDirect && s.direct.usable(keys, args) {
		dst = v.runDirect(dst, s, keys, args, opt)
	} else {
		dst = v.run(dst, s, keys, args, opt)
	}
	if ch != nil {
		ch.SetCaller(nil)
	}
	e.putVM(v)
	return dst, nil
}

func (e *Engine) getVM() *vm {
	if v := e.idle.Swap(nil); v != nil {
		return v
	}
	e.poolMu.Lock()
	if n := len(e.pool); n > 0 {
		v := e.pool[n-1]
		e.pool[n-1] = nil
		e.pool = e.pool[:n-1]
		e.poolMu.Unlock()
		return v
	}
	e.poolMu.Unlock()
	return newVM(e)
}

func (e *Engine) putVM(v *vm) {
	if v.broken {
		v.L.Close()
		return
	}
	if e.idle.CompareAndSwap(nil, v) {
		return
	}
	e.poolMu.Lock()
	if len(e.pool) < maxPooled {
		e.pool = append(e.pool, v)
		v = nil
	}
	e.poolMu.Unlock()
	if v != nil {
		v.L.Close()
	}
}
