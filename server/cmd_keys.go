package server

import (
	"math"
	"strconv"
	"strings"

	"github.com/celld/celld/store"
)

// Keyspace commands over limiter keys, with Redis 7's replies and error
// texts. Every key holds a string: the TAT as an unsigned decimal integer.

const (
	errNotInt    = "ERR value is not an integer or out of range"
	errSyntax    = "ERR syntax error"
	errBadCursor = "ERR invalid cursor"
)

func errExpireTime(name string) string { return "ERR invalid expire time in '" + name + "' command" }

func (s *Server) nowMs() int64 { return s.now() / 1e6 }

func cmdGet(s *Server, c *client, args [][]byte) {
	v, ok := s.keyspace(c).Get(args[1], s.nowMs())
	if !ok {
		c.out = c.appendNull(c.out)
		return
	}
	c.out = appendHeader(c.out, '$', v.TextLen())
	c.out = v.AppendText(c.out)
	c.out = append(c.out, '\r', '\n')
}

// SET option flags, as Redis names them.
const (
	setNX = 1 << iota
	setXX
	setGet
	setKeepTTL
	setEX
	setPX
	setEXAT
	setPXAT
)

func cmdSet(s *Server, c *client, args [][]byte) {
	flags := 0
	var expArg []byte
	for j := 3; j < len(args); j++ {
		opt := strings.ToLower(string(args[j]))
		hasNext := j+1 < len(args)
		anyExp := flags&(setEX|setPX|setEXAT|setPXAT) != 0
		switch {
		case opt == "nx" && flags&setXX == 0:
			flags |= setNX
		case opt == "xx" && flags&setNX == 0:
			flags |= setXX
		case opt == "get":
			flags |= setGet
		case opt == "keepttl" && !anyExp:
			flags |= setKeepTTL
		case opt == "ex" && flags&(setKeepTTL|setPX|setEXAT|setPXAT) == 0 && hasNext:
			flags |= setEX
			j++
			expArg = args[j]
		case opt == "px" && flags&(setKeepTTL|setEX|setEXAT|setPXAT) == 0 && hasNext:
			flags |= setPX
			j++
			expArg = args[j]
		case opt == "exat" && flags&(setKeepTTL|setEX|setPX|setPXAT) == 0 && hasNext:
			flags |= setEXAT
			j++
			expArg = args[j]
		case opt == "pxat" && flags&(setKeepTTL|setEX|setPX|setEXAT) == 0 && hasNext:
			flags |= setPXAT
			j++
			expArg = args[j]
		default:
			c.out = appendError(c.out, errSyntax)
			return
		}
	}
	nowMs := s.nowMs()
	var expireAt int64
	if expArg != nil {
		n, ok := parseRedisInt(expArg)
		if !ok {
			c.out = appendError(c.out, errNotInt)
			return
		}
		seconds := flags&(setEX|setEXAT) != 0
		if n <= 0 || (seconds && n > math.MaxInt64/1000) {
			c.out = appendError(c.out, errExpireTime("set"))
			return
		}
		if seconds {
			n *= 1000
		}
		if flags&(setEX|setPX) != 0 {
			if n > math.MaxInt64-nowMs {
				c.out = appendError(c.out, errExpireTime("set"))
				return
			}
			n += nowMs
		}
		expireAt = n
	}
	nv, ok := store.NewValue(args[2])
	if !ok {
		c.out = appendError(c.out, errNotInt)
		return
	}
	var old store.Value
	var found, written bool
	err := s.keyspace(c).Update(args[1], nowMs, func(o store.Value, exists bool) (store.Value, store.Action) {
		old, found = o, exists
		if (flags&setNX != 0 && exists) || (flags&setXX != 0 && !exists) {
			return store.Value{}, store.Keep
		}
		written = true
		nv.ExpireAtMs = expireAt
		if flags&setKeepTTL != 0 {
			nv.ExpireAtMs = o.ExpireAtMs
		}
		if expireAt == 0 && flags&setKeepTTL == 0 {
			nv.ExpireAtMs = 0
		}
		return nv, store.Put
	})
	switch {
	case err != nil: // store.ErrOOM: the only error, and nothing written
		c.out = appendError(c.out, errOOM)
	case flags&setGet != 0 && found:
		c.out = appendBulk(c.out, old.AppendText(nil))
	case flags&setGet != 0 || !written:
		c.out = c.appendNull(c.out)
	default:
		c.out = append(c.out, replyOK...)
	}
}

func cmdDel(s *Server, c *client, args [][]byte) {
	nowMs := s.nowMs()
	n := int64(0)
	for _, k := range args[1:] {
		if s.keyspace(c).Delete(k, nowMs) {
			n++
		}
	}
	c.out = appendInt(c.out, n)
}

func cmdExists(s *Server, c *client, args [][]byte) {
	nowMs := s.nowMs()
	n := int64(0)
	for _, k := range args[1:] {
		if _, ok := s.keyspace(c).Get(k, nowMs); ok {
			n++
		}
	}
	c.out = appendInt(c.out, n)
}

func cmdType(s *Server, c *client, args [][]byte) {
	if v, ok := s.keyspace(c).Get(args[1], s.nowMs()); ok {
		c.out = appendSimple(c.out, v.Kind.String())
		return
	}
	c.out = appendSimple(c.out, "none")
}

func cmdStrlen(s *Server, c *client, args [][]byte) {
	v, ok := s.keyspace(c).Get(args[1], s.nowMs())
	n := 0
	if ok {
		n = v.TextLen()
	}
	c.out = appendInt(c.out, int64(n))
}

// ttlReply implements TTL, PTTL, EXPIRETIME and PEXPIRETIME.
func ttlReply(s *Server, c *client, key []byte, ms, abs bool) {
	nowMs := s.nowMs()
	v, ok := s.keyspace(c).Get(key, nowMs)
	switch {
	case !ok:
		c.out = appendInt(c.out, -2)
		return
	case v.ExpireAtMs == 0:
		c.out = appendInt(c.out, -1)
		return
	}
	t := v.ExpireAtMs
	if !abs {
		t -= nowMs
	}
	if t < 0 {
		t = 0
	}
	if !ms {
		t = (t + 500) / 1000
	}
	c.out = appendInt(c.out, t)
}

func cmdTTL(s *Server, c *client, a [][]byte)         { ttlReply(s, c, a[1], false, false) }
func cmdPTTL(s *Server, c *client, a [][]byte)        { ttlReply(s, c, a[1], true, false) }
func cmdExpireTime(s *Server, c *client, a [][]byte)  { ttlReply(s, c, a[1], false, true) }
func cmdPExpireTime(s *Server, c *client, a [][]byte) { ttlReply(s, c, a[1], true, true) }

// EXPIRE option flags.
const (
	expNX = 1 << iota
	expXX
	expGT
	expLT
)

// expireGeneric implements EXPIRE, PEXPIRE, EXPIREAT and PEXPIREAT as Redis
// 7's expireGenericCommand: options first, then the number, overflow checks,
// then the conditions; an expiry not in the future deletes the key.
func expireGeneric(s *Server, c *client, args [][]byte, name string, seconds, absolute bool) {
	flags := 0
	for _, a := range args[3:] {
		switch strings.ToLower(string(a)) {
		case "nx":
			flags |= expNX
		case "xx":
			flags |= expXX
		case "gt":
			flags |= expGT
		case "lt":
			flags |= expLT
		default:
			c.out = appendError(c.out, "ERR Unsupported option "+string(cString(a)))
			return
		}
	}
	if flags&expNX != 0 && flags&(expXX|expGT|expLT) != 0 {
		c.out = appendError(c.out, "ERR NX and XX, GT or LT options at the same time are not compatible")
		return
	}
	if flags&expGT != 0 && flags&expLT != 0 {
		c.out = appendError(c.out, "ERR GT and LT options at the same time are not compatible")
		return
	}
	when, ok := parseRedisInt(args[2])
	if !ok {
		c.out = appendError(c.out, errNotInt)
		return
	}
	if seconds {
		if when > math.MaxInt64/1000 || when < math.MinInt64/1000 {
			c.out = appendError(c.out, errExpireTime(name))
			return
		}
		when *= 1000
	}
	nowMs := s.nowMs()
	var base int64
	if !absolute {
		base = nowMs
	}
	if when > math.MaxInt64-base {
		c.out = appendError(c.out, errExpireTime(name))
		return
	}
	when += base
	result := int64(0)
	s.keyspace(c).Update(args[1], nowMs, func(v store.Value, exists bool) (store.Value, store.Action) {
		if !exists {
			return v, store.Keep
		}
		cur := v.ExpireAtMs
		switch {
		case flags&expNX != 0 && cur != 0,
			flags&expXX != 0 && cur == 0,
			flags&expGT != 0 && (cur == 0 || when <= cur),
			flags&expLT != 0 && cur != 0 && when >= cur:
			return v, store.Keep
		}
		result = 1
		if when <= nowMs {
			return v, store.Delete
		}
		v.ExpireAtMs = when
		return v, store.Put
	})
	c.out = appendInt(c.out, result)
}

func cmdExpire(s *Server, c *client, a [][]byte)    { expireGeneric(s, c, a, "expire", true, false) }
func cmdPExpire(s *Server, c *client, a [][]byte)   { expireGeneric(s, c, a, "pexpire", false, false) }
func cmdExpireAt(s *Server, c *client, a [][]byte)  { expireGeneric(s, c, a, "expireat", true, true) }
func cmdPExpireAt(s *Server, c *client, a [][]byte) { expireGeneric(s, c, a, "pexpireat", false, true) }

func cmdPersist(s *Server, c *client, args [][]byte) {
	result := int64(0)
	s.keyspace(c).Update(args[1], s.nowMs(), func(v store.Value, exists bool) (store.Value, store.Action) {
		if !exists || v.ExpireAtMs == 0 {
			return v, store.Keep
		}
		result = 1
		v.ExpireAtMs = 0
		return v, store.Put
	})
	c.out = appendInt(c.out, result)
}

func cmdKeys(s *Server, c *client, args [][]byte) {
	var keys []string
	s.keyspace(c).Keys(string(args[1]), s.nowMs(), func(k []byte) { keys = append(keys, string(k)) })
	c.out = appendArray(c.out, len(keys))
	for _, k := range keys {
		c.out = appendBulkString(c.out, k)
	}
}

// knownTypes are the type names SCAN's TYPE option accepts; only "string"
// matches anything in celld.
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
	next := s.keyspace(c).Scan(cursor, int(count), s.nowMs(), func(k []byte) {
		if hasType && typ != "string" {
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
