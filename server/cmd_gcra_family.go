package server

import (
	"errors"

	"github.com/celld/celld/gcra"
	"github.com/celld/celld/store"
)

// The GCRA family beyond CL.THROTTLE (spec/gcra-family.md, docs/gcra-family.md):
//
//	CL.PTHROTTLE     key max_burst count period_ms [quantity]  ms periods and replies
//	CL.THROTTLE_RO   key max_burst count period    [quantity]  peek: changes nothing
//	CL.PTHROTTLE_RO  key max_burst count period_ms [quantity]
//	CL.MTHROTTLE     key max_burst count period    quantity [key ...]  all-or-nothing
//	CL.MPTHROTTLE    key max_burst count period_ms quantity [key ...]
//
// They share CL.THROTTLE's stored state and error texts (cmd_throttle.go);
// CL.THROTTLE's own handler is not involved. Every handler is safe to run
// from any connection, EXEC or script; each call reads the clock once.

// familyCmd numbers the family's commands, for their decision counters.
type familyCmd uint8

const (
	famPThrottle familyCmd = iota
	famThrottleRO
	famPThrottleRO
	famMThrottle
	famMPThrottle
	numFamily
)

// familyNames are the commands' names, indexed by familyCmd.
var familyNames = [numFamily]string{"cl.pthrottle", "cl.throttle_ro", "cl.pthrottle_ro", "cl.mthrottle", "cl.mpthrottle"}

// The usage errors (spec section 2's, naming each command).
var familyUsage = [numFamily]string{
	"Cell error: Store error: Usage: cl.pthrottle <key> <max_burst> <count per period> <period_ms> [<quantity>]",
	"Cell error: Store error: Usage: cl.throttle_ro <key> <max_burst> <count per period> <period> [<quantity>]",
	"Cell error: Store error: Usage: cl.pthrottle_ro <key> <max_burst> <count per period> <period_ms> [<quantity>]",
	"Cell error: Store error: Usage: cl.mthrottle <key> <max_burst> <count per period> <period> <quantity> [<key> ...]",
	"Cell error: Store error: Usage: cl.mpthrottle <key> <max_burst> <count per period> <period_ms> <quantity> [<key> ...]",
}

// familySpecs are the family's dispatch table entries (table.go appends
// them). Arity -1 as cl.throttle's: every argument count is the command's
// own usage error, not Redis's arity error. Group "generic", not "module":
// they are celld's own, and COMMAND LIST FILTERBY MODULE redis-cell lists
// redis-cell's one command.
var familySpecs = []spec{
	{name: "cl.pthrottle", arity: -1, flags: "write", first: 1, last: 1, step: 1, group: "generic", since: "0.1.0",
		summary: "Rate-limits a key with the generic cell rate algorithm, with the period and the replies in milliseconds.", run: cmdPThrottle},
	{name: "cl.throttle_ro", arity: -1, flags: ro, first: 1, last: 1, step: 1, group: "generic", since: "0.1.0",
		summary: "Returns what CL.THROTTLE would reply now, without changing anything.", run: cmdThrottleRO},
	{name: "cl.pthrottle_ro", arity: -1, flags: ro, first: 1, last: 1, step: 1, group: "generic", since: "0.1.0",
		summary: "Returns what CL.PTHROTTLE would reply now, without changing anything.", run: cmdPThrottleRO},
	{name: "cl.mthrottle", arity: -1, flags: "write", first: 1, last: -1, step: 5, group: "generic", since: "0.1.0",
		summary: "Rate-limits several keys at once, all or nothing: a denied call uses up none of the limits.", run: cmdMThrottle},
	{name: "cl.mpthrottle", arity: -1, flags: "write", first: 1, last: -1, step: 5, group: "generic", since: "0.1.0",
		summary: "CL.MTHROTTLE with periods and replies in milliseconds.", run: cmdMPThrottle},
}

func cmdPThrottle(s *Server, c *client, args [][]byte) {
	s.throttleOne(c, args, famPThrottle, gcra.UnitMillis, false)
}
func cmdThrottleRO(s *Server, c *client, args [][]byte) {
	s.throttleOne(c, args, famThrottleRO, gcra.UnitSeconds, true)
}
func cmdPThrottleRO(s *Server, c *client, args [][]byte) {
	s.throttleOne(c, args, famPThrottleRO, gcra.UnitMillis, true)
}
func cmdMThrottle(s *Server, c *client, args [][]byte) {
	s.throttleMulti(c, args, famMThrottle, gcra.UnitSeconds)
}
func cmdMPThrottle(s *Server, c *client, args [][]byte) {
	s.throttleMulti(c, args, famMPThrottle, gcra.UnitMillis)
}

// newLimitIn is gcra.NewLimit for periods in seconds, NewLimitMs in ms.
func newLimitIn(u gcra.Unit, maxBurst, count, period int64) (gcra.Limit, error) {
	if u == gcra.UnitMillis {
		return gcra.NewLimitMs(maxBurst, count, period)
	}
	return gcra.NewLimit(maxBurst, count, period)
}

// throttleOne is CL.PTHROTTLE, CL.THROTTLE_RO and CL.PTHROTTLE_RO: cmdThrottle's
// steps, errors and reply, with durations in unit u, and with peek (the _RO
// variants) nothing stored (store.Peek).
//
// Hot path: as cmdThrottle's — four integer parses, one shard lock, a
// fixed-size reply, no allocation for an existing key.
func (s *Server) throttleOne(c *client, args [][]byte, fc familyCmd, u gcra.Unit, peek bool) {
	if n := len(args) - 1; n != 4 && n != 5 {
		c.out = appendError(c.out, familyUsage[fc])
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
	lim, err := newLimitIn(u, v[0], v[1], v[2])
	if err != nil {
		c.out = appendError(c.out, cellZeroRate)
		return
	}
	var r gcra.Result
	if peek {
		r, err = s.keyspace(c).Peek(u, args[1], lim, v[3], s.now())
	} else {
		r, err = s.keyspace(c).ThrottleIn(u, args[1], lim, v[3], s.now())
	}
	if err != nil {
		c.out = appendError(c.out, familyErrorText(err))
		return
	}
	if s.decide(c, DecisionCmd(fc)+1, args[1], r.Limited, r.Max, r.Remaining) == VerdictShadowDenied {
		shadowResult(&r)
	}
	c.out = appendResult(append(c.out, "*5\r\n"...), &r)
}

// familyErrorText is the spec's text for a store error.
func familyErrorText(err error) string {
	switch {
	case errors.Is(err, store.ErrSetExpire):
		return cellExpire
	case errors.Is(err, store.ErrWrongType):
		return ErrWrongTypeText
	case errors.Is(err, store.ErrOOM):
		return errOOM
	}
	return cellBadStored
}

// appendResult appends a decision's five integers (without the array
// header).
func appendResult(b []byte, r *gcra.Result) []byte {
	limited := int64(0)
	if r.Limited {
		limited = 1
	}
	b = append(b, ':', byte('0'+limited), '\r', '\n')
	b = appendSmallInt(b, r.Max)
	b = appendSmallInt(b, r.Remaining)
	b = appendSmallInt(b, r.RetryAfter)
	return appendSmallInt(b, r.ResetAfter)
}

// appendSmallInt is appendInt with the values replies are made of most
// (-1 and one digit) written directly: bytes equal to appendInt's, fewer
// instructions than strconv.
func appendSmallInt(b []byte, n int64) []byte {
	switch {
	case n >= 0 && n < 10:
		return append(b, ':', byte('0'+n), '\r', '\n')
	case n == -1:
		return append(b, ':', '-', '1', '\r', '\n')
	}
	return appendInt(b, n)
}

// stackGroups is how many groups a CL.MTHROTTLE decides in memory on the
// handler's stack; a call with more allocates its working memory.
const stackGroups = 8

// multiScratch is CL.MTHROTTLE's working memory for n groups.
type multiScratch struct {
	par  [stackGroups][3]int64 // max_burst, count, period
	keys [stackGroups][]byte
	gs   [stackGroups]gcra.Group
	out  [stackGroups]gcra.Result
	hs   [stackGroups]uint64
}

// throttleMulti is CL.MTHROTTLE and CL.MPTHROTTLE (spec section 3): parse
// every group's arguments left to right, then check every group's rate in
// order, then decide all groups at one instant under the locks of the
// shards they touch (store.ThrottleAll), writing all or nothing.
//
// Reply: *N+1 arrays of five integers, the binding group's first. If every
// group is allowed but one's TTL is below −1 ms, everything is written and
// the reply is CL.THROTTLE's error 4, as a one-group call must answer what
// CL.THROTTLE answers.
//
// Hot path: 4 parses and one lookup per group, one lock per shard touched;
// no allocation up to stackGroups groups on existing keys.
func (s *Server) throttleMulti(c *client, args [][]byte, fc familyCmd, u gcra.Unit) {
	n := len(args) - 1
	if n == 0 || n%5 != 0 {
		c.out = appendError(c.out, familyUsage[fc])
		return
	}
	g := n / 5
	var sc multiScratch
	par, keys, gs, out, hs := sc.par[:0], sc.keys[:0], sc.gs[:0], sc.out[:0], sc.hs[:0]
	if g > stackGroups {
		par, keys, gs = make([][3]int64, 0, g), make([][]byte, 0, g), make([]gcra.Group, 0, g)
		out, hs = make([]gcra.Result, 0, g), make([]uint64, 0, g)
	}
	par, keys, gs, out, hs = par[:g], keys[:g], gs[:g], out[:g], hs[:g]
	// Every group's integers, left to right, before any rate is checked.
	for i := range g {
		a := args[1+5*i:]
		keys[i] = a[0]
		var v [4]int64
		for j := 1; j <= 4; j++ {
			x, ok := parseInt64(a[j])
			if !ok {
				c.out = appendError(c.out, cellParse+string(cString(a[j])))
				return
			}
			v[j-1] = x
		}
		par[i] = [3]int64{v[0], v[1], v[2]}
		gs[i].Q = v[3]
	}
	for i := range gs {
		lim, err := newLimitIn(u, par[i][0], par[i][1], par[i][2])
		if err != nil {
			c.out = appendError(c.out, cellZeroRate)
			return
		}
		gs[i].Limit = lim
	}
	now := s.now()
	b, err := s.keyspace(c).ThrottleAll(u, keys, gs, out, hs, now)
	if err != nil {
		c.out = appendError(c.out, familyErrorText(err))
		return
	}
	if out[b].Limited && s.dec.shadow.Load() != nil {
		if b, err = s.shadowMulti(c, DecisionCmd(fc)+1, u, keys, gs, out, hs, b, now); err != nil {
			c.out = appendError(c.out, familyErrorText(err))
			return
		}
	} else {
		s.dec.lookupFor(c, keys[b]).count(c.id, DecisionCmd(fc)+1, verdictOf(out[b].Limited), out[b].Max, out[b].Remaining)
	}
	o := appendArray(c.out, g+1)
	start := len(o)
	o = appendResult(append(o, "*5\r\n"...), &out[b])
	end := len(o)
	for i := range out {
		if i == b { // the verdict's bytes again, not formatted twice
			o = append(o, o[start:end]...)
			continue
		}
		o = appendResult(append(o, "*5\r\n"...), &out[i])
	}
	c.out = o
}

// maxPrefetchKeys bounds the keys one batch prefetches (parseBatch): the
// first key of every command, and the further keys of multi-key commands
// (a CL.MTHROTTLE's groups) while the total stays below it.
const maxPrefetchKeys = 4 * maxBatchCmds

// appendOtherKeys appends cmd's keys after its first (firstKey + step, ...,
// lastKey) to keys, for Store.Prefetch, stopping at maxPrefetchKeys. A
// CL.MTHROTTLE's second and third keys would otherwise each cost a cache
// miss under the store lock.
func appendOtherKeys(keys [][]byte, cmd *command, argv [][]byte) [][]byte {
	last := cmd.lastKey
	if last < 0 {
		last += len(argv)
	}
	if cmd.step <= 0 {
		return keys
	}
	for i := cmd.firstKey + cmd.step; i <= last && i < len(argv) && len(keys) < maxPrefetchKeys; i += cmd.step {
		keys = append(keys, argv[i])
	}
	return keys
}

// familyModified is tracking.go's modified() for the family's write
// commands: whether the reply shows that keys were written (allowed, or
// error 4, which comes after the writes).
func familyModified(cmd *command, reply []byte) bool {
	switch cmd.name {
	case "cl.pthrottle":
		return hasPrefix(reply, "*5\r\n:0\r\n") || hasPrefix(reply, "-"+cellExpire)
	case "cl.mthrottle", "cl.mpthrottle":
		if hasPrefix(reply, "-"+cellExpire) {
			return true
		}
		// *N\r\n*5\r\n:0\r\n: the verdict is "allowed"
		i := 0
		for i < len(reply) && reply[i] != '\n' {
			i++
		}
		return reply[0] == '*' && i < len(reply) && hasPrefix(reply[i+1:], "*5\r\n:0\r\n")
	}
	return false
}

func hasPrefix(b []byte, p string) bool { return len(b) >= len(p) && string(b[:len(p)]) == p }

// isFamilyWrite reports whether name is one of the family's write commands.
func isFamilyWrite(name string) bool {
	return name == "cl.pthrottle" || name == "cl.mthrottle" || name == "cl.mpthrottle"
}

// Decision counts one throttling command's rate-limit decisions, over all
// limiters (decisions.go): a peek counts the decision it reports, an
// MTHROTTLE call counts once, by its verdict.
type Decision struct {
	Command                                  string
	Allowed, Denied, ShadowDenied, NearLimit int64
}
