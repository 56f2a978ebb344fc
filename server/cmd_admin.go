package server

import (
	"os"
	"sort"
	"strings"

	"github.com/celld/celld/store"
)

// Introspection and administration: COMMAND, INFO, CONFIG, MODULE, SAVE,
// BGSAVE, LASTSAVE.

func cmdCommand(s *Server, c *client, args [][]byte) {
	if len(args) == 1 {
		names := sortedNames()
		c.out = appendArray(c.out, len(names))
		for _, n := range names {
			if c.replyFull() { // obuf.go
				return
			}
			c.out = c.appendCommandInfo(c.out, commands[n], n)
		}
		return
	}
	s.subcommand(c, commands["command"], args)
}

func sortedNames() []string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// appendCommandInfo appends one COMMAND INFO entry in Redis 7's 10-element
// shape: name, arity, flags, first key, last key, step, ACL categories,
// tips, key specs, subcommands.
func (c *client) appendCommandInfo(b []byte, cmd *command, fullname string) []byte {
	b = appendArray(b, 10)
	b = appendBulkString(b, fullname)
	b = appendInt(b, int64(cmd.arity))
	flags := infoFlags(cmd) // cmdinfo.go
	b = c.appendSet(b, len(flags))
	for _, f := range flags {
		b = appendSimple(b, f)
	}
	first, last, step := cmd.firstKey, cmd.lastKey, cmd.step
	if cmd.keynum != nil {
		first, last, step = legacyRange(registeredSpecs[fullname]) // keyspecs.go
	}
	b = appendInt(b, int64(first))
	b = appendInt(b, int64(last))
	b = appendInt(b, int64(step))
	b = c.appendSet(b, len(cmd.acl))
	for _, a := range cmd.acl {
		b = appendSimple(b, a)
	}
	tips := commandTips[fullname]
	b = c.appendSet(b, len(tips))
	for _, t := range tips {
		b = appendBulkString(b, t)
	}
	b = c.appendKeySpecs(b, cmd) // cmdinfo.go
	names := make([]string, 0, len(cmd.subs))
	for n := range cmd.subs {
		names = append(names, n)
	}
	sort.Strings(names)
	b = appendArray(b, len(names))
	for _, n := range names {
		b = c.appendCommandInfo(b, cmd.subs[n], fullname+"|"+n)
	}
	return b
}

func has(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// findCommand resolves "name" or "name|sub" case-insensitively.
func findCommand(name []byte) (*command, string) {
	parent, sub, found := strings.Cut(strings.ToLower(string(name)), "|")
	cmd := commands[parent]
	if cmd == nil || !found {
		return cmd, parent
	}
	return cmd.subs[sub], parent + "|" + sub
}

func cmdCommandCount(s *Server, c *client, _ [][]byte) {
	c.out = appendInt(c.out, int64(len(commands)))
}

func cmdCommandInfo(s *Server, c *client, args [][]byte) {
	if len(args) == 2 {
		cmdCommand(s, c, args[:1])
		return
	}
	c.out = appendArray(c.out, len(args)-2)
	for _, a := range args[2:] {
		if c.replyFull() { // obuf.go: COMMAND INFO get get get ... multiplies
			return
		}
		cmd, name := findCommand(a)
		if cmd == nil {
			c.out = c.appendNullArray(c.out)
			continue
		}
		c.out = c.appendCommandInfo(c.out, cmd, name)
	}
}

func cmdCommandDocs(s *Server, c *client, args [][]byte) {
	var names []string
	if len(args) == 2 {
		names = sortedNames()
	} else {
		for _, a := range args[2:] {
			if cmd, name := findCommand(a); cmd != nil {
				names = append(names, name)
			}
		}
	}
	c.out = c.appendMap(c.out, len(names))
	for _, n := range names {
		if c.replyFull() { // obuf.go
			return
		}
		cmd, _ := findCommand([]byte(n))
		c.out = appendBulkString(c.out, n)
		if mod := moduleOf(cmd); mod != "" {
			// A module command without RedisModule_SetCommandInfo, as
			// redis-cell 0.5.0 registers CL.THROTTLE: group and module.
			c.out = c.appendMap(c.out, 2)
			c.out = appendBulkString(c.out, "group")
			c.out = appendBulkString(c.out, cmd.group)
			c.out = appendBulkString(c.out, "module")
			c.out = appendBulkString(c.out, mod)
			continue
		}
		c.out = c.appendMap(c.out, 3)
		c.out = appendBulkString(c.out, "summary")
		c.out = appendBulkString(c.out, cmd.summary)
		c.out = appendBulkString(c.out, "since")
		c.out = appendBulkString(c.out, cmd.since)
		c.out = appendBulkString(c.out, "group")
		c.out = appendBulkString(c.out, cmd.group)
	}
}

// cmdCommandList is COMMAND LIST [FILTERBY MODULE|ACLCAT|PATTERN value]:
// commands and their subcommands ("client|list"), as Redis lists them.
func cmdCommandList(s *Server, c *client, args [][]byte) {
	if len(args) > 2 && (len(args) != 5 || !strings.EqualFold(string(args[2]), "filterby")) {
		c.out = appendError(c.out, errSyntax)
		return
	}
	var names []string
	for _, n := range sortedNames() {
		cmd := commands[n]
		all := []string{n}
		subs := make([]string, 0, len(cmd.subs))
		for sub := range cmd.subs {
			subs = append(subs, n+"|"+sub)
		}
		sort.Strings(subs)
		for _, full := range append(all, subs...) {
			if len(args) == 2 {
				names = append(names, full)
				continue
			}
			fc, _ := findCommand([]byte(full))
			keep, ok := listName(fc, full, string(args[3]), string(args[4])) // cmdinfo.go
			if !ok {
				c.out = appendError(c.out, errSyntax)
				return
			}
			if keep {
				names = append(names, full)
			}
		}
	}
	c.out = appendArray(c.out, len(names))
	for _, n := range names {
		c.out = appendBulkString(c.out, n)
	}
}

func cmdCommandGetKeys(s *Server, c *client, args [][]byte) {
	cmd := lookup(commands, args[2])
	rest := args[2:]
	switch {
	case cmd == nil:
		c.out = appendError(c.out, "ERR Invalid command specified")
		return
	case cmd.firstKey == 0 && !movableKeys(cmd.name):
		c.out = appendError(c.out, "ERR The command has no key arguments")
		return
	case !arityOK(cmd.arity, len(rest)):
		c.out = appendError(c.out, "ERR Invalid number of arguments specified for command")
		return
	}
	keys, msg := commandKeys(cmd, rest) // cmdinfo.go
	if msg != "" {
		c.out = appendError(c.out, msg)
		return
	}
	c.out = appendArray(c.out, len(keys))
	for _, k := range keys {
		c.out = appendBulk(c.out, k)
	}
}

func cmdConfig(s *Server, c *client, args [][]byte) { s.subcommand(c, commands["config"], args) }

// configParams are the read-only parameters CONFIG GET reports, for tools
// (redis-benchmark, redis-cli) that ask at start-up.
func (s *Server) configParams() [][2]string {
	port := "6379"
	if a := s.Addr(); a != nil {
		if _, p, ok := strings.Cut(a.String(), "]:"); ok {
			port = p
		} else if i := strings.LastIndexByte(a.String(), ':'); i >= 0 {
			port = a.String()[i+1:]
		}
	}
	return append([][2]string{
		{"appendonly", "no"}, {"databases", itoa(int64(s.dbs.Len()))},
		{"client-output-buffer-limit", s.cfg.OutputBufferLimit.configValue()},
		{"port", port}, {"save", ""}, {"timeout", "0"},
		{"shadow", s.dec.shadowText()}, // decisions.go
	}, append(s.memoryConfigParams(), encodingParams...)...) // memory.go, config_encodings.go
}

func cmdConfigGet(s *Server, c *client, args [][]byte) {
	var kv [][2]string
	for _, p := range s.configParams() {
		for _, pat := range args[2:] {
			if Match(strings.ToLower(string(pat)), p[0]) {
				kv = append(kv, p)
				break
			}
		}
	}
	c.out = c.appendMap(c.out, len(kv))
	for _, p := range kv {
		c.out = appendBulkString(c.out, p[0])
		c.out = appendBulkString(c.out, p[1])
	}
}

func cmdConfigResetStat(s *Server, c *client, _ [][]byte) {
	s.resetStats(c) // errorstats.go
	c.out = append(c.out, replyOK...)
}

func cmdModule(s *Server, c *client, args [][]byte) { s.subcommand(c, commands["module"], args) }

func cmdModuleList(s *Server, c *client, _ [][]byte) { c.out = c.appendModules(c.out) }

func cmdModuleLoad(s *Server, c *client, _ [][]byte) {
	c.out = appendError(c.out, "ERR celld does not load modules: redis-cell is built in")
}

func cmdSave(s *Server, c *client, _ [][]byte) {
	if c.inMulti {
		c.out = appendError(c.out, "ERR Command not allowed inside a transaction")
		return
	}
	if p := s.cfg.Persister; p != nil {
		if err := p.Save(); err != nil {
			c.out = appendError(c.out, "ERR "+err.Error())
			return
		}
	}
	c.out = append(c.out, replyOK...)
}

func cmdBgsave(s *Server, c *client, args [][]byte) {
	// BGSAVE [SCHEDULE]: anything else is a syntax error, as in Redis.
	if len(args) > 2 || (len(args) == 2 && !strings.EqualFold(string(args[1]), "schedule")) {
		c.out = appendError(c.out, errSyntax)
		return
	}
	if p := s.cfg.Persister; p != nil {
		p.BackgroundSave()
	}
	c.out = appendSimple(c.out, "Background saving started")
}

func cmdLastsave(s *Server, c *client, _ [][]byte) {
	t := s.start
	if p := s.cfg.Persister; p != nil {
		if ls := p.LastSave(); !ls.IsZero() {
			t = ls
		}
	}
	c.out = appendInt(c.out, t.Unix())
}

// Match is the store's glob matcher, re-exported for CONFIG GET and
// COMMAND LIST patterns.
var Match = store.Match

func pid() int { return os.Getpid() }

// cmdShutdown is SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]: it starts the
// same ordered shutdown as SIGTERM (drain, final synced flush, exit 0) and,
// as Redis does on success, closes the connection without a reply. The
// final flush always runs: NOSAVE cannot skip it, since persistence here is
// the limiter's state, not a snapshot.
func cmdShutdown(s *Server, c *client, args [][]byte) {
	for _, a := range args[1:] {
		switch strings.ToLower(string(a)) {
		case "nosave", "save", "now", "force":
		case "abort":
			c.out = appendError(c.out, "ERR No shutdown in progress.")
			return
		default:
			c.out = appendError(c.out, errSyntax)
			return
		}
	}
	if c.inMulti {
		c.out = appendError(c.out, "ERR Command not allowed inside a transaction")
		return
	}
	if s.cfg.OnShutdown == nil {
		c.out = appendError(c.out, "ERR Errors trying to SHUTDOWN. Check logs.")
		return
	}
	s.log.Info("SHUTDOWN requested by a client", "client", c.id, "addr", c.addr)
	s.cfg.OnShutdown()
	c.closeAfterReply = true
}
