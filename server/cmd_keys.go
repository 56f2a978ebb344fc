package server

import (
	"strconv"
	"strings"

	"github.com/celld/celld/store"
)

// Keyspace commands that walk or clear a whole database, with Redis 7's
// replies and error texts. The per-key commands (GET, SET, DEL, EXPIRE,
// ...) are package data's (data/strings.go, data/keys.go).

const (
	errNotInt    = "ERR value is not an integer or out of range"
	errSyntax    = "ERR syntax error"
	errBadCursor = "ERR invalid cursor"
)

func (s *Server) nowMs() int64 { return s.now() / 1e6 }

func cmdKeys(s *Server, c *client, args [][]byte) {
	var keys []string
	s.keyspace(c).Keys(string(args[1]), s.nowMs(), func(k []byte) { keys = append(keys, string(k)) })
	c.out = appendArray(c.out, len(keys))
	for _, k := range keys {
		if c.replyFull() { // obuf.go
			return
		}
		c.out = appendBulkString(c.out, k)
	}
}

// knownTypes are the type names SCAN's TYPE option accepts (Redis's; "set"
// and "stream" match nothing in celld).
var knownTypes = map[string]bool{"string": true, "list": true, "set": true, "zset": true, "hash": true, "stream": true}

func cmdScan(s *Server, c *client, args [][]byte) {
	cursor, ok := parseScanCursor(args[1])
	if !ok {
		c.out = appendError(c.out, errBadCursor)
		return
	}
	count := int64(10)
	pattern, typ := "", ""
	hasPattern, hasType := false, false
	for i := 2; i < len(args); i += 2 {
		if i+1 >= len(args) {
			c.out = appendError(c.out, errSyntax)
			return
		}
		switch strings.ToLower(string(args[i])) {
		case "count":
			n, ok := parseRedisInt(args[i+1])
			if !ok {
				c.out = appendError(c.out, errNotInt)
				return
			}
			if n < 1 {
				c.out = appendError(c.out, errSyntax)
				return
			}
			count = n
		case "match":
			pattern, hasPattern = string(args[i+1]), true
		case "type":
			typ, hasType = strings.ToLower(string(args[i+1])), true
			if !knownTypes[typ] {
				c.out = appendError(c.out, "ERR unknown type name '"+string(cString(args[i+1]))+"'")
				return
			}
		default:
			c.out = appendError(c.out, errSyntax)
			return
		}
	}
	if count > 1<<20 {
		count = 1 << 20
	}
	matchAll := !hasPattern || pattern == "*"
	var keys []string
	next := s.keyspace(c).ScanKind(cursor, int(count), s.nowMs(), func(k []byte, kind store.Kind) {
		if hasType && typ != kind.String() {
			return
		}
		if matchAll || store.Match(pattern, store.KeyString(k)) {
			keys = append(keys, string(k))
		}
	})
	c.out = appendArray(c.out, 2)
	c.out = appendBulkString(c.out, strconv.FormatUint(next, 10))
	c.out = appendArray(c.out, len(keys))
	for _, k := range keys {
		if c.replyFull() { // obuf.go
			return
		}
		c.out = appendBulkString(c.out, k)
	}
}

func cmdDBSize(s *Server, c *client, _ [][]byte) {
	c.out = appendInt(c.out, int64(s.keyspace(c).Len()))
}

func cmdFlush(s *Server, c *client, args [][]byte) {
	if len(args) > 2 {
		c.out = appendError(c.out, errSyntax)
		return
	}
	if len(args) == 2 {
		if m := strings.ToLower(string(args[1])); m != "sync" && m != "async" {
			c.out = appendError(c.out, errSyntax)
			return
		}
	}
	s.flush(c, strings.EqualFold(string(args[0]), "flushall")) // databases.go
	c.out = append(c.out, replyOK...)
}

func cmdTime(s *Server, c *client, _ [][]byte) {
	now := s.now()
	c.out = appendArray(c.out, 2)
	c.out = appendBulkString(c.out, strconv.FormatInt(now/1e9, 10))
	c.out = appendBulkString(c.out, strconv.FormatInt(now%1e9/1e3, 10))
}
