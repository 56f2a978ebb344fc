package server

import (
	"errors"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/celld/celld/script"
)

// Scripting: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT
// LOAD|EXISTS|FLUSH|KILL|HELP. The Lua side (cache, sandboxed states,
// conversions, time limit) is package script; this file is the glue: it
// parses arguments, makes each script atomic (dispatch hands the EVAL
// family to runScript, which takes the isolation write lock, or the read
// lock for a script that can run only one command; under EXEC they run
// under EXEC's), runs redis.call's commands on a scratch client per Lua
// state, and turns the engine's errors into Redis's replies.

// scripting is the Server's script engine, created on first use.
type scripting struct {
	once   sync.Once
	engine *script.Engine
	// overMemory is s.overMemory as a func value, made once with the
	// engine (a method value per EVAL would allocate).
	overMemory func() bool
}

func (s *Server) scriptEngine() *script.Engine {
	s.scripts.once.Do(func() {
		s.scripts.engine = script.New(script.Config{
			NewHost:      func() script.Host { return newScriptHost(s) },
			TimeLimit:    s.cfg.ScriptTimeLimit,
			Logger:       s.log,
			RedisVersion: RedisVersion,
			// The script cache counts in used_memory, as in Redis
			// (used_memory_scripts): the bound refuses and evicts for it.
			OnMemory: s.store.AddOverheadMemory,
		})
		s.scripts.overMemory = s.overMemory
	})
	return s.scripts.engine
}

// runScript runs an EVAL-family command atomically, as Redis does: under
// the isolation write lock, so that nothing else runs while the script
// does. A script known to run at most one command (script.RunsOneCommand:
// "return redis.call(...)", the rate-limit pattern) is atomic without
// that, as its one command is, and takes the read lock like any command.
// The unlock is deferred: a panic must not leave the server locked.
func (s *Server) runScript(c *client, cmd *command, args [][]byte) {
	bySHA := cmd.name == "evalsha" || cmd.name == "evalsha_ro"
	if s.scriptEngine().RunsOneCommand(args[1], bySHA) {
		s.iso.rlock(c.id)
		defer s.iso.runlock(c.id)
	} else {
		s.iso.lock()
		defer s.iso.unlock()
	}
	s.run(c, cmd, args)
}

// Redis's texts for commands a script may not call.
const (
	replyScriptUnknown  = "-ERR Unknown Redis command called from script\r\n"
	replyScriptArity    = "-ERR Wrong number of args calling Redis command from script\r\n"
	replyScriptNoScript = "-ERR This Redis command is not allowed from script\r\n"
	replyScriptRO       = "-ERR Write commands are not allowed from read-only scripts.\r\n"
	replyScriptPanic    = "-ERR internal error\r\n"
	replyScriptOOM      = "-" + errOOM + "\r\n"
)

// scriptHost runs redis.call's commands for one Lua state, on a client of
// its own that no connection owns (Redis's "fake client"). The caller
// already holds the isolation lock (runScript, EXEC), so commands run
// through s.run directly.
type scriptHost struct {
	s *Server
	c *client
	// caller is the client whose script runs on this state (SetCaller);
	// keysTracked: its keys were remembered for its tracking already.
	caller      *client
	keysTracked bool
	// wrote: a write command of this run has succeeded, so the memory
	// bound no longer stops the script's denyoom commands (Redis's
	// SCRIPT_WRITE_DIRTY). Reset by SetCaller at each run's start and end.
	wrote bool
}

// SetCaller implements script.CallerHost.
func (h *scriptHost) SetCaller(caller any) {
	h.caller, _ = caller.(*client)
	h.keysTracked = false
	h.wrote = false
	if h.caller != nil {
		// The script runs in its caller's database; a SELECT inside it
		// changes this scratch client's only, as in Redis 7.
		h.c.mu.Lock()
		h.c.db = h.caller.db
		h.c.mu.Unlock()
	}
}

func newScriptHost(s *Server) *scriptHost {
	return &scriptHost{s: s, c: &client{
		srv:      s,
		addr:     "lua",
		created:  time.Now(),
		proto:    2,
		multiLen: -1,
		authed:   true, // scripts run for an authenticated caller
	}}
}

// maxScratchOut is the reply buffer a scratch client keeps between calls.
const maxScratchOut = 1 << 20

// Call implements script.Host. The reply aliases the scratch client's
// buffer, valid until the next Call.
func (h *scriptHost) Call(args [][]byte, flags script.CallFlags) (reply []byte) {
	c := h.c
	if cap(c.out) > maxScratchOut {
		c.out = nil
	}
	c.out = c.out[:0]
	c.resp3 = flags&script.RESP3 != 0

	top := lookup(commands, args[0])
	cmd := top
	if top != nil && top.subs != nil && len(args) > 1 {
		cmd = lookup(top.subs, args[1])
	}
	switch {
	case cmd == nil:
		return h.refuse(nil, replyScriptUnknown)
	case !arityOK(cmd.arity, len(args)):
		return h.refuse(cmd, replyScriptArity)
	case has(cmd.flags, "noscript"):
		return h.refuse(cmd, replyScriptNoScript)
	case flags&script.ReadOnly != 0 && has(cmd.flags, "write"):
		return h.refuse(cmd, replyScriptRO)
	case cmd.meta.denyOOM && flags&script.AllowOOM == 0 && !h.wrote && h.s.overMemory():
		// Redis's scriptVerifyOOM: over the bound, a denyoom command is
		// refused until the script has written (then it may not stop
		// half-way), unless the shebang says allow-oom.
		return h.refuse(cmd, replyScriptOOM)
	}
	if h.s.clusterOn() {
		// Each command's keys must be served here and share one slot. (The
		// engine has no per-run hook yet, so keys of different commands of
		// one script are not checked against each other.)
		slot := -1
		if msg := h.s.clusterScriptCheck(cmd, args, &slot, true); msg != "" {
			return h.refuse(cmd, "-ERR "+msg+"\r\n")
		}
	}
	defer func() {
		if p := recover(); p != nil {
			h.s.stats.panics.Add(1)
			h.s.log.Error("panic in command called from a script", "panic", p,
				"command", cmd.name, "stack", string(debug.Stack()))
			reply = append(c.out[:0], replyScriptPanic...)
		}
	}()
	h.s.run(c, top, args)
	if len(c.out) == 0 { // every command replies; never hand the parser nothing
		c.out = c.appendNull(c.out)
	}
	if cl := h.caller; cl != nil && cl.trk != nil && !h.keysTracked && has(cmd.flags, "readonly") {
		// A script that reads: its declared keys are the caller's to
		// cache, as Redis's call() remembers the script caller's keys.
		h.keysTracked = true
		h.s.trackKeys(cl, cl.evalKeys)
	}
	if c.out[0] == '-' {
		h.s.scriptErrs.note(c.out) // counted by call; see scripterr.go
	} else if cmd.meta.write {
		h.wrote = true
	}
	return c.out
}

// refuse answers a command a script may not run, counting the error and,
// for a known command, a rejected call of it, as Redis's scriptCall does.
func (h *scriptHost) refuse(cmd *command, reply string) []byte {
	h.s.ext.countError([]byte(reply[1:]))
	h.s.scriptErrs.note([]byte(reply))
	if cmd != nil {
		h.s.statsOf(cmd).shard(h.c.id).rejected.Add(1)
	}
	return append(h.c.out, reply...)
}

// flushScript is a script result's check point (script.Options.Flush,
// obuf.go's replyFull): out, the output with the result so far, is handed
// on, or dropped once the connection is gone.
func (c *client) flushScript(out []byte) []byte {
	c.out = out
	c.replyFull()
	return c.out
}

func cmdEval(s *Server, c *client, args [][]byte)      { s.eval(c, args, false, false) }
func cmdEvalSha(s *Server, c *client, args [][]byte)   { s.eval(c, args, true, false) }
func cmdEvalRO(s *Server, c *client, args [][]byte)    { s.eval(c, args, false, true) }
func cmdEvalShaRO(s *Server, c *client, args [][]byte) { s.eval(c, args, true, true) }
func cmdScript(s *Server, c *client, args [][]byte)    { s.subcommand(c, commands["script"], args) }
func cmdScriptKill(s *Server, c *client, _ [][]byte)   { c.out = appendError(c.out, errNotBusy) }

const (
	errNoScript      = "NOSCRIPT No matching script. Please use EVAL."
	errNotBusy       = "NOTBUSY No scripts in execution right now."
	errWriteScriptRO = "ERR Can not execute a script with write flag using *_ro command."
)

// eval is EVAL/EVALSHA[_RO] script|sha1 numkeys [key ...] [arg ...].
func (s *Server) eval(c *client, args [][]byte, bySHA, ro bool) {
	if bySHA && len(args[1]) != 40 {
		c.out = appendError(c.out, errNoScript)
		return
	}
	numkeys, ok := parseRedisInt(args[2])
	switch {
	case !ok:
		c.out = appendError(c.out, errNotInt)
		return
	case numkeys > int64(len(args)-3):
		c.out = appendError(c.out, "ERR Number of keys can't be greater than number of args")
		return
	case numkeys < 0:
		c.out = appendError(c.out, "ERR Number of keys can't be negative")
		return
	}
	keys, argv := args[3:3+numkeys], args[3+numkeys:]
	if c.flushFn == nil {
		c.flushFn = c.flushScript // once: a method value per EVAL would allocate
	}
	opt := script.Options{ReadOnly: ro, RESP3: c.resp3, Caller: c, Flush: c.flushFn}
	if s.store.MaxMemory() != 0 {
		s.scriptEngine() // makes s.scripts.overMemory
		opt.OverMemory = s.scripts.overMemory
	}
	if c.trk != nil {
		c.evalKeys = keys // for scriptHost.Call's tracking; valid during the run
		defer func() { c.evalKeys = nil }()
	}
	seq := s.scriptErrs.mark()
	start := c.outMark()
	defer func() {
		if reply := c.replyFrom(start); len(reply) > 0 && reply[0] == '-' && s.scriptErrs.since(seq, reply) {
			c.errCounted = true
		}
	}()
	var err error
	if bySHA {
		c.out, err = s.scriptEngine().EvalSHA(c.out, args[1], keys, argv, opt)
	} else {
		c.out, err = s.scriptEngine().Eval(c.out, args[1], keys, argv, opt)
	}
	if err != nil {
		c.out = appendError(c.out, scriptErrorText(err))
	}
}

// scriptErrorText is the reply text for an engine error.
func scriptErrorText(err error) string {
	var le *script.LoadError
	switch {
	case errors.Is(err, script.ErrNoScript):
		return errNoScript
	case errors.Is(err, script.ErrWriteScriptRO):
		return errWriteScriptRO
	case errors.Is(err, script.ErrOOM):
		return errOOM
	case errors.As(err, &le):
		return "ERR " + le.Msg
	}
	return "ERR " + err.Error()
}

func cmdScriptLoad(s *Server, c *client, args [][]byte) {
	sha, err := s.scriptEngine().Load(args[2])
	if err != nil {
		c.out = appendError(c.out, scriptErrorText(err))
		return
	}
	c.out = appendBulkString(c.out, sha)
}

func cmdScriptExists(s *Server, c *client, args [][]byte) {
	e := s.scriptEngine()
	c.out = appendArray(c.out, len(args)-2)
	for _, sha := range args[2:] {
		n := int64(0)
		if e.Exists(sha) {
			n = 1
		}
		c.out = appendInt(c.out, n)
	}
}

// cmdScriptFlush is SCRIPT FLUSH [ASYNC|SYNC]; both modes flush at once
// (dropping the cache is cheap; the garbage collector frees it).
func cmdScriptFlush(s *Server, c *client, args [][]byte) {
	if len(args) > 3 || (len(args) == 3 &&
		!strings.EqualFold(string(args[2]), "sync") && !strings.EqualFold(string(args[2]), "async")) {
		c.out = appendError(c.out, "ERR SCRIPT FLUSH only support SYNC|ASYNC option")
		return
	}
	s.scriptEngine().Flush()
	c.out = append(c.out, replyOK...)
}

func cmdScriptHelp(s *Server, c *client, _ [][]byte) {
	lines := []string{
		"SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"EXISTS <sha1> [<sha1> ...]",
		"    Return information about the existence of the scripts in the script cache.",
		"FLUSH [ASYNC|SYNC]",
		"    Flush the Lua scripts cache. Very dangerous on replicas.",
		"    When called without the optional mode argument, the behavior is determined by the",
		"    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
		"    * ASYNC: Asynchronously flush the scripts cache.",
		"    * SYNC: Synchronously flush the scripts cache.",
		"KILL",
		"    Kill the currently executing Lua script.",
		"LOAD <script>",
		"    Load a script into the scripts cache without executing it.",
		"HELP",
		"    Print this help.",
	}
	c.out = appendArray(c.out, len(lines))
	for _, l := range lines {
		c.out = appendSimple(c.out, l)
	}
}
