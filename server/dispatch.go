package server

import (
	"strings"
)

// cmdFunc runs one command; args[0] is the command name as sent. It appends
// its reply to c.out.
type cmdFunc func(s *Server, c *client, args [][]byte)

// command is one entry of the dispatch table and of COMMAND's replies.
type command struct {
	name     string // lower case
	fullname string // name, or "parent|sub" for a subcommand (CLIENT LIST's cmd=)
	arity    int    // Redis convention: n exact, -n at least n (name included)
	flags    []string
	firstKey int
	lastKey  int
	step     int
	acl      []string
	run      cmdFunc
	// immediate commands run even inside MULTI instead of being queued.
	immediate bool
	// noAuth commands (AUTH, HELLO, QUIT, RESET) run before authentication.
	noAuth bool
	// script commands (EVAL, EVALSHA, ...) are atomic like EXEC: runScript
	// (cmd_script.go) picks their isolation lock; queued in MULTI, they run
	// under EXEC's.
	script bool
	// subs are subcommands (CLIENT ID, COMMAND INFO, ...), keyed lower case.
	subs map[string]*command
	// keynum, for a registered command with a keynum key spec (ZUNIONSTORE,
	// LMPOP, ...), says where its keys are (keyspecs.go); nil otherwise.
	keynum *keynumKeys
	// meta: what the hot path needs to know without reading flags, and the
	// index of the command's counters in the Server (cmdstats.go).
	meta cmdMeta
	// Documentation for COMMAND DOCS.
	summary string
	group   string
	since   string
}

// commands is the dispatch table, built once at init and read-only after.
var commands map[string]*command

// maxNameLen bounds the stack buffer used to lower-case command names; no
// command name (with subcommand) is longer.
const maxNameLen = 32

// lookup finds a command by name, case-insensitively, without allocating.
func lookup(table map[string]*command, name []byte) *command {
	if len(name) > maxNameLen {
		return nil
	}
	var buf [maxNameLen]byte
	for i, ch := range name {
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		buf[i] = ch
	}
	return table[string(buf[:len(name)])]
}

func arityOK(arity, n int) bool {
	if arity >= 0 {
		return n == arity
	}
	return n >= -arity
}

// unknownCommandError is Redis's text for an unknown command: the name cut
// at 128 bytes, then the arguments, each quoted and followed by a space,
// until 128 bytes of argument text have been written (each argument cut to
// what is left of that budget); C strings stop at NUL.
func unknownCommandError(args [][]byte) string {
	name := cString(args[0])
	if len(name) > 128 {
		name = name[:128]
	}
	var b strings.Builder
	for i := 1; i < len(args) && b.Len() < 128; i++ {
		a := cString(args[i])
		if left := 128 - b.Len(); len(a) > left {
			a = a[:left]
		}
		b.WriteByte('\'')
		b.Write(a)
		b.WriteString("' ")
	}
	return "ERR unknown command '" + string(name) + "', with args beginning with: " + b.String()
}

func wrongArity(name string) string {
	return "ERR wrong number of arguments for '" + name + "' command"
}

// dispatch runs or queues one command read from the connection. args may
// alias the connection's read buffer: they are valid only until dispatch
// returns, so anything kept longer (the MULTI queue below, WATCH keys,
// names, tracking keys and prefixes) is copied.
// cmd is lookup(commands, args[0]), which the caller has already done
// (parseBatch) to know which key to prefetch; nil for an unknown name.
func (s *Server) dispatch(c *client, cmd *command, args [][]byte) {
	if len(args) == 0 {
		return
	}
	switch {
	case cmd == nil:
		c.reject(unknownCommandError(args))
		return
	case !arityOK(cmd.arity, len(args)):
		s.rejectCmd(c, cmd, wrongArity(cmd.name))
		return
	case !c.authed && !cmd.noAuth:
		s.rejectCmd(c, cmd, errNoAuth)
		return
	}
	// Cluster mode: MOVED/CROSSSLOT before the command runs or is queued,
	// as Redis's processCommand does; standalone pays this one nil check.
	if t := s.topo.Load(); t != nil && !s.clusterRoute(c, t, cmd, args) {
		return
	}
	if c.inMulti && cmd.meta.noMulti {
		c.reject(errNoMulti) // SAVE, SHUTDOWN: dooms the transaction
		return
	}
	if c.inMulti && cmd.subs != nil && len(args) > 1 && !cmd.immediate && !s.queueableSub(c, cmd, args) {
		return // an unknown subcommand or its wrong arity dooms the transaction
	}
	// The memory bound, as Redis's processCommand applies it: over the
	// bound, once one chunk of evictions by the policy frees nothing
	// (overMemory), a command flagged denyoom (SET, APPEND, HSET, RPUSH,
	// ZADD, ...: one that may grow memory, whether it creates a key or
	// grows one that exists) is refused with -OOM before it runs, as is
	// every command queued in MULTI (queuing itself takes memory) and an
	// EXEC whose queue holds a denyoom command (c.queueOOM). Commands that
	// do not grow memory (GET, DEL, HDEL, LPOP, ...) always run. A command
	// is checked once, before it runs: one HSET of many fields under the
	// bound is allowed whole, as in Redis. CL.THROTTLE and its family are
	// not denyoom (as redis-cell registers them): a call on a live key
	// costs nothing, and a call that would create a key meets the bound in
	// the store (store.ErrOOM). Hot path: two bool tests for a command
	// that is neither denyoom nor in MULTI; one atomic load more for a
	// denyoom command when no bound is set.
	if (cmd.meta.denyOOM || c.inMulti && (!cmd.immediate || cmd.meta.exec && c.queueOOM)) && s.overMemory() {
		s.rejectCmd(c, cmd, errOOM)
		return
	}
	// total_commands_processed (see client.publishCommands) counts what
	// runs or is queued; a command refused above is not processed.
	c.pending++
	if c.inMulti && !cmd.immediate {
		q := make([][]byte, len(args))
		mem := int64(24 + 24*len(args)) // the queue's and the command's slice headers
		for i, a := range args {
			q[i] = append([]byte(nil), a...)
			mem += int64(len(a))
		}
		c.queue = append(c.queue, q)
		// Held against the memory bound until EXEC or DISCARD, so that a
		// queue of millions of commands meets -OOM (memory.go) instead of
		// growing the process without limit.
		c.queueMem += mem
		s.store.AddHeldMemory(mem)
		c.queueOOM = c.queueOOM || cmd.meta.denyOOM
		c.setMultiLen(len(c.queue))
		c.lastCmd.Store(cmd) // CLIENT LIST's cmd=, as Redis: the last command read
		c.out = append(c.out, "+QUEUED\r\n"...)
		return
	}
	if !cmd.sharesIsolation() {
		if cmd.script {
			s.runScript(c, cmd, args) // cmd_script.go
		} else {
			s.run(c, cmd, args) // MULTI/EXEC/WATCH/... manage isolation themselves
		}
		return
	}
	if !c.isoHeld { // else runBatch holds it for the batch
		s.iso.rlock(c.id)
		defer s.iso.runlock(c.id) // released even if the handler panics
	}
	s.run(c, cmd, args)
}

// sharesIsolation reports whether cmd runs under its client's isolation
// read lock, as every command does but the immediate ones (MULTI, EXEC,
// WATCH, ...) and scripts, which take the locks they need themselves.
// dispatch and runBatch both decide by it.
func (cmd *command) sharesIsolation() bool { return !cmd.immediate && !cmd.script }

// run executes a known command whose arity has been checked.
func (s *Server) run(c *client, cmd *command, args [][]byte) {
	if s.loading() && !cmd.immediate && cmd.name != "info" && cmd.name != "ping" {
		c.out = appendError(c.out, "LOADING celld is loading the dataset in memory")
		return
	}
	if c.lastCmd.Load() != cmd { // a store is a barrier; a pipeline repeats one command
		c.lastCmd.Store(cmd)
	}
	s.call(c, cmd, args) // cmdstats.go: counts, tracking hooks, then cmd.run
}

// loading reports whether a restore is in progress (never, until
// persistence restores in the background).
func (s *Server) loading() bool { return false }

// subcommand dispatches CLIENT/COMMAND style containers.
func (s *Server) subcommand(c *client, parent *command, args [][]byte) {
	if len(args) < 2 {
		c.out = appendError(c.out, wrongArity(parent.name))
		return
	}
	sub, refusal := subOf(parent, args)
	if refusal != "" {
		c.out = appendError(c.out, refusal)
		return
	}
	c.lastCmd.Store(sub)
	s.call(c, sub, args)
}

// queueableSub checks a container command's subcommand (CLIENT NOSUCH,
// CONFIG GET without a parameter) before it is queued in MULTI, as
// Redis's processCommand looks subcommands up before queuing: an unknown
// one or a wrong arity is refused and dooms the transaction to EXECABORT,
// where queuing it would run the rest of the transaction and answer the
// error inside EXEC's reply. Outside MULTI subcommand() answers the same
// errors. Only for commands queued in MULTI.
func (s *Server) queueableSub(c *client, parent *command, args [][]byte) bool {
	sub, refusal := subOf(parent, args)
	switch {
	case refusal == "":
		return true
	case sub == nil:
		c.reject(refusal)
	default:
		s.rejectCmd(c, sub, refusal)
	}
	return false
}

// subOf looks up the subcommand args[1] of the container parent (args has
// at least two words) and checks its arity: the subcommand, and "" or
// Redis's refusal (an unknown subcommand: sub is nil; a wrong arity).
func subOf(parent *command, args [][]byte) (sub *command, refusal string) {
	sub = lookup(parent.subs, args[1])
	switch {
	case sub == nil:
		return nil, "ERR unknown subcommand '" + string(cString(args[1])) +
			"'. Try " + strings.ToUpper(parent.name) + " HELP."
	case !arityOK(sub.arity, len(args)):
		return sub, wrongArity(sub.fullname)
	}
	return sub, ""
}

// errNoMulti is Redis's refusal of a no-multi command (SAVE, SHUTDOWN)
// inside MULTI.
const errNoMulti = "ERR Command not allowed inside a transaction"

// rejectCmd is reject for a known command: a refused EXEC (wrong arity,
// NOAUTH) ends the transaction with EXECABORT and the reason, as Redis's
// rejectCommand does through execCommandAbort, even outside MULTI.
func (s *Server) rejectCmd(c *client, cmd *command, msg string) {
	if cmd.meta.exec {
		c.discardMulti()
		s.watch.unwatchAll(c)
		c.out = appendError(c.out, "EXECABORT Transaction discarded because of: "+strings.TrimPrefix(msg, "ERR "))
		return
	}
	c.reject(msg)
}

// reject answers a command that cannot run (unknown, wrong arity, not
// authenticated) and, inside MULTI, dooms the transaction to EXECABORT, as
// Redis's rejectCommand does.
func (c *client) reject(msg string) {
	c.out = appendError(c.out, msg)
	if c.inMulti {
		c.multiError = true
	}
}
