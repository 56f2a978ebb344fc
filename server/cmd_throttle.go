package server

import (
	"errors"

	"github.com/celld/celld/gcra"
	"github.com/celld/celld/store"
)

// The spec's error texts (section 2 and 7), sent without an "ERR" prefix.
const (
	cellUsage     = "Cell error: Store error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]"
	cellParse     = "Cell error: Store error: Couldn't parse as integer: "
	cellZeroRate  = "Cell error: Store error: Zero rates are not supported"
	cellExpire    = "Cell error: Store error: Error while setting key expire"
	cellBadStored = "Cell error: Store error: invalid stored value"
)

// parseInt64 is strconv.ParseInt(string(b), 10, 64) without the allocation:
// an optional sign, ASCII digits, int64 range. It is redis-cell's rule, for
// CL.THROTTLE's numbers only; Redis commands' integers use parseRedisInt
// (intparse.go).
func parseInt64(b []byte) (int64, bool) {
	neg := false
	if len(b) > 0 && (b[0] == '+' || b[0] == '-') {
		neg = b[0] == '-'
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, false
	}
	var n uint64
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		if n > (1<<63)/10 {
			return 0, false
		}
		n = n*10 + uint64(ch-'0')
		if n > 1<<63 {
			return 0, false
		}
	}
	if neg {
		return -int64(n), true // n == 1<<63 wraps to MinInt64, as wanted
	}
	if n == 1<<63 {
		return 0, false
	}
	return int64(n), true
}

// cmdThrottle is CL.THROTTLE key max_burst count period [quantity].
//
// Hot path: four integer parses, one store call under one shard lock, a
// fixed-size reply; no allocation for an existing key.
func cmdThrottle(s *Server, c *client, args [][]byte) {
	if n := len(args) - 1; n != 4 && n != 5 {
		c.out = appendError(c.out, cellUsage)
		return
	}
	var v [4]int64
	v[3] = 1
	for i := 2; i < len(args); i++ {
		n, ok := parseInt64(args[i])
		if !ok {
			c.out = appendError(c.out, cellParse+string(cString(args[i])))
			return
		}
		v[i-2] = n
	}
	lim, err := gcra.NewLimit(v[0], v[1], v[2])
	if err != nil {
		c.out = appendError(c.out, cellZeroRate)
		return
	}
	r, err := s.keyspace(c).Throttle(args[1], lim, v[3], s.now())
	if err != nil {
		switch {
		case errors.Is(err, store.ErrInvalidValue):
			c.out = appendError(c.out, cellBadStored)
			return
		case errors.Is(err, store.ErrSetExpire):
			c.out = appendError(c.out, cellExpire)
			return
		case errors.Is(err, store.ErrWrongType):
			c.out = appendError(c.out, ErrWrongTypeText)
			return
		case errors.Is(err, store.ErrOOM):
			c.out = appendError(c.out, errOOM) // memory.go
			return
		}
	}
	if s.decide(c, decThrottle, args[1], r.Limited, r.Max, r.Remaining) == VerdictShadowDenied {
		shadowResult(&r) // decisions.go
	}
	limited := int64(0)
	if r.Limited {
		limited = 1
	}
	b := append(c.out, "*5\r\n"...)
	b = appendInt(b, limited)
	b = appendInt(b, r.Max)
	b = appendInt(b, r.Remaining)
	b = appendInt(b, r.RetryAfter)
	c.out = appendInt(b, r.ResetAfter)
}
