package server

import (
	"strings"
	"time"
)

// Connection commands: PING, ECHO, QUIT, HELLO, AUTH, RESET, CLIENT (SELECT:
// databases.go).

// RedisVersion is the Redis release whose replies celld reproduces.
const RedisVersion = "7.2.4"

func cmdPing(s *Server, c *client, args [][]byte) {
	if len(args) > 2 {
		c.out = appendError(c.out, wrongArity("ping"))
		return
	}
	if len(args) == 2 {
		c.out = appendBulk(c.out, args[1])
		return
	}
	c.out = append(c.out, "+PONG\r\n"...)
}

func cmdEcho(s *Server, c *client, args [][]byte) { c.out = appendBulk(c.out, args[1]) }

func cmdQuit(s *Server, c *client, _ [][]byte) {
	c.out = append(c.out, replyOK...)
	c.closeAfterReply = true
}

// validName reports whether a client name or library attribute has only
// printable non-space ASCII, Redis's rule.
func validName(b []byte) bool {
	for _, ch := range b {
		if ch < '!' || ch > '~' {
			return false
		}
	}
	return true
}

func cmdHello(s *Server, c *client, args [][]byte) {
	ver := int64(0)
	next := 1
	if len(args) >= 2 {
		n, ok := parseRedisInt(args[1])
		if !ok {
			c.out = appendError(c.out, "ERR Protocol version is not an integer or out of range")
			return
		}
		if n < 2 || n > 3 {
			c.out = appendError(c.out, "NOPROTO unsupported protocol version")
			return
		}
		ver = n
		next = 2
	}
	var user, pass, name []byte
	hasAuth, hasName := false, false
	for j := next; j < len(args); j++ {
		more := len(args) - 1 - j
		opt := strings.ToLower(string(args[j]))
		switch {
		case opt == "auth" && more >= 2:
			user, pass, hasAuth = args[j+1], args[j+2], true
			j += 2
		case opt == "setname" && more >= 1:
			name, hasName = args[j+1], true
			j++
		default:
			c.out = appendError(c.out, "ERR Syntax error in HELLO option '"+string(cString(args[j]))+"'")
			return
		}
	}
	if hasAuth && !s.authenticate(c, user, pass) {
		return
	}
	if !c.authed {
		c.out = appendError(c.out, errHelloAuth)
		return
	}
	if hasName {
		if !validName(name) {
			c.out = appendError(c.out, "ERR Client names cannot contain spaces, newlines or special characters.")
			return
		}
		c.mu.Lock()
		c.name = string(name)
		c.mu.Unlock()
	}
	if ver != 0 {
		c.setProto(ver == 3)
	}
	proto := int64(2)
	if c.resp3 {
		proto = 3
	}
	b := c.appendMap(c.out, 7)
	b = appendBulkString(b, "server")
	b = appendBulkString(b, "redis")
	b = appendBulkString(b, "version")
	b = appendBulkString(b, RedisVersion)
	b = appendBulkString(b, "proto")
	b = appendInt(b, proto)
	b = appendBulkString(b, "id")
	b = appendInt(b, c.id)
	b = appendBulkString(b, "mode")
	b = appendBulkString(b, c.srv.redisMode())
	b = appendBulkString(b, "role")
	b = appendBulkString(b, "master")
	b = appendBulkString(b, "modules")
	c.out = c.appendModules(b)
}

// appendModules appends the loaded-module list Redis 7 + redis-cell 0.5.0
// reports, so capability probes find redis-cell.
func (c *client) appendModules(b []byte) []byte {
	b = appendArray(b, 1)
	b = c.appendMap(b, 4)
	b = appendBulkString(b, "name")
	b = appendBulkString(b, "redis-cell")
	b = appendBulkString(b, "ver")
	b = appendInt(b, 1)
	b = appendBulkString(b, "path")
	b = appendBulkString(b, "/usr/lib/redis/modules/libredis_cell.so")
	b = appendBulkString(b, "args")
	return appendArray(b, 0)
}

// authenticate checks credentials for AUTH and HELLO AUTH. With no
// password configured the default user has "nopass": any password is
// accepted for "default", as in Redis. On failure it appends the error.
func (s *Server) authenticate(c *client, user, pass []byte) bool {
	if string(user) != "default" || (s.cfg.RequirePass != "" && !s.passwordMatches(pass)) {
		c.out = appendError(c.out, errWrongPass)
		return false
	}
	c.setAuthed(true)
	return true
}

func cmdAuth(s *Server, c *client, args [][]byte) {
	if len(args) > 3 {
		c.out = appendError(c.out, errSyntax)
		return
	}
	if len(args) == 2 {
		if s.cfg.RequirePass == "" {
			c.out = appendError(c.out, errNoPassSet)
			return
		}
		if s.authenticate(c, []byte("default"), args[1]) {
			c.out = append(c.out, replyOK...)
		}
		return
	}
	if s.authenticate(c, args[1], args[2]) {
		c.out = append(c.out, replyOK...)
	}
}

func cmdReset(s *Server, c *client, _ [][]byte) {
	c.reset()
	if s.cfg.RequirePass != "" {
		c.setAuthed(false)
	}
	c.out = append(c.out, "+RESET\r\n"...)
}

func cmdClient(s *Server, c *client, args [][]byte) { s.subcommand(c, commands["client"], args) }

func cmdClientID(s *Server, c *client, _ [][]byte) { c.out = appendInt(c.out, c.id) }

func cmdClientSetName(s *Server, c *client, args [][]byte) {
	if !validName(args[2]) {
		c.out = appendError(c.out, "ERR Client names cannot contain spaces, newlines or special characters.")
		return
	}
	c.mu.Lock()
	c.name = string(args[2])
	c.mu.Unlock()
	c.out = append(c.out, replyOK...)
}

func cmdClientGetName(s *Server, c *client, _ [][]byte) {
	c.mu.Lock()
	name := c.name
	c.mu.Unlock()
	if name == "" {
		c.out = c.appendNull(c.out)
		return
	}
	c.out = appendBulkString(c.out, name)
}

func cmdClientSetInfo(s *Server, c *client, args [][]byte) {
	attr := strings.ToLower(string(args[2]))
	if attr != "lib-name" && attr != "lib-ver" {
		c.out = appendError(c.out, "ERR Unrecognized option '"+string(cString(args[2]))+"'")
		return
	}
	if !validName(args[3]) {
		c.out = appendError(c.out, "ERR "+string(cString(args[2]))+" cannot contain spaces, newlines or special characters.")
		return
	}
	c.mu.Lock()
	if attr == "lib-name" {
		c.libName = string(args[3])
	} else {
		c.libVer = string(args[3])
	}
	c.mu.Unlock()
	c.out = append(c.out, replyOK...)
}

func cmdClientInfo(s *Server, c *client, args [][]byte) {
	c.out = c.appendVerbatim(c.out, c.info(time.Now(), args)+"\n")
}

func cmdClientList(s *Server, c *client, args [][]byte) {
	var ids map[int64]bool
	for i := 2; i < len(args); i++ {
		switch opt := strings.ToLower(string(args[i])); {
		case opt == "type" && i+1 < len(args):
			switch strings.ToLower(string(args[i+1])) {
			case "normal", "master", "replica", "slave", "pubsub":
			default:
				c.out = appendError(c.out, "ERR Unknown client type '"+string(cString(args[i+1]))+"'")
				return
			}
			i++
		case opt == "id" && i+1 < len(args):
			ids = map[int64]bool{}
			for i++; i < len(args); i++ {
				n, ok := parseRedisInt(args[i])
				if !ok || n <= 0 {
					c.out = appendError(c.out, "ERR Invalid client ID")
					return
				}
				ids[n] = true
			}
		default:
			c.out = appendError(c.out, errSyntax)
			return
		}
	}
	s.mu.Lock()
	list := make([]*client, 0, len(s.clients))
	for _, o := range s.clients {
		if ids == nil || ids[o.id] {
			list = append(list, o)
		}
	}
	s.mu.Unlock()
	sortClients(list)
	now := time.Now()
	var b strings.Builder
	for _, o := range list {
		var cur [][]byte // c's own line shows its current command
		if o == c {
			cur = args
		}
		b.WriteString(o.info(now, cur))
		b.WriteByte('\n')
	}
	c.out = c.appendVerbatim(c.out, b.String())
}

func sortClients(l []*client) {
	for i := 1; i < len(l); i++ {
		for j := i; j > 0 && l[j].id < l[j-1].id; j-- {
			l[j], l[j-1] = l[j-1], l[j]
		}
	}
}

func cmdClientNoEvict(s *Server, c *client, args [][]byte) {
	switch strings.ToLower(string(args[2])) {
	case "on", "off":
		c.out = append(c.out, replyOK...)
	default:
		c.out = appendError(c.out, errSyntax)
	}
}

func cmdClientHelp(s *Server, c *client, _ [][]byte) {
	lines := []string{
		"CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"CACHING (YES|NO)", "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
		"GETREDIR", "    Return the client ID we are redirecting to when tracking is enabled.",
		"GETNAME", "    Return the name of the current connection.",
		"ID", "    Return the ID of the current connection.",
		"INFO", "    Return information about the current client connection.",
		"LIST [options ...]", "    Return information about client connections.",
		"SETINFO <option> <value>", "    Set client meta attr (LIB-NAME or LIB-VER).",
		"SETNAME <name>", "    Assign the name <name> to the current connection.",
		"TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
		"         [OPTIN] [OPTOUT] [NOLOOP]", "    Control server assisted client side caching.",
		"TRACKINGINFO", "    Report tracking status for the current connection.",
		"HELP", "    Print this help.",
	}
	c.out = appendArray(c.out, len(lines))
	for _, l := range lines {
		c.out = appendSimple(c.out, l)
	}
}
