package server

import (
	"errors"
	"math/bits"
	"slices"

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
	c.out = appendResult5(c.out, &r)
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

// maxResultLen bounds appendResult5's output: "*5\r\n" and five integers of
// at most 20 characters (a sign and 19 digits), each with ':' and "\r\n".
const maxResultLen = 4 + 5*(1+20+2)

// appendResult5 is appendResult(append(b, "*5\r\n"...), r) written in one
// pass: one capacity check for the whole array, and each integer formatted
// in place (putReplyInt), not through strconv and its appends. Same bytes
// (TestAppendResult5). CL.MTHROTTLE formats one such array per group plus
// the verdict; this is the per-group share of its reply's cost.
func appendResult5(b []byte, r *gcra.Result) []byte {
	n := len(b)
	if cap(b)-n < maxResultLen {
		b = slices.Grow(b, maxResultLen)
	}
	d := (*[maxResultLen]byte)(b[n : n+maxResultLen])
	d[0], d[1], d[2], d[3] = '*', '5', '\r', '\n'
	d[4], d[5], d[6], d[7] = ':', '0', '\r', '\n'
	if r.Limited {
		d[5] = '1'
	}
	i := 8
	i = putReplyInt(d, i, r.Max)
	i = putReplyInt(d, i, r.Remaining)
	i = putReplyInt(d, i, r.RetryAfter)
	i = putReplyInt(d, i, r.ResetAfter)
	return b[:n+i]
}

// pow10[n] is 10^n, for counting digits; digits2 holds "00" to "99".
var pow10 = [...]uint64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19}

const digits2 = "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899"

// putReplySmall is putReplyInt for v in -1..9999, what CL.WINDOW's
// replies almost always hold (limited, -1 for no retry, small limits and
// counts, ms under 10 s): the same bytes without putReplyInt's call, sign
// test and digit count. Ctx.IntArray calls it for such values (13.3 ns
// per five-integer reply when the block was written inside IntArray,
// 15.2 ns through this call: too large to inline); the caller checks the
// range (uint64(v+1) <= 10000).
func putReplySmall(d *[maxResultLen]byte, i int, v int64) int {
	d[i] = ':'
	switch u := uint64(v); {
	case v < 0:
		d[i+1], d[i+2] = '-', '1'
		i += 3
	case u < 10:
		d[i+1] = byte('0' + u)
		i += 2
	case u < 100:
		d[i+1], d[i+2] = digits2[u*2], digits2[u*2+1]
		i += 3
	case u < 1000:
		lo := u % 100
		d[i+1], d[i+2], d[i+3] = byte('0'+u/100), digits2[lo*2], digits2[lo*2+1]
		i += 4
	default:
		hi, lo := u/100, u%100
		d[i+1], d[i+2], d[i+3], d[i+4] = digits2[hi*2], digits2[hi*2+1], digits2[lo*2], digits2[lo*2+1]
		i += 5
	}
	d[i], d[i+1] = '\r', '\n'
	return i + 2
}

// putReplyInt writes ":<v>\r\n" at d[i:], as appendInt formats it, and
// returns the index after it. d[i:] has room for 23 bytes (maxResultLen's
// share of one integer).
func putReplyInt(d *[maxResultLen]byte, i int, v int64) int {
	d[i] = ':'
	i++
	u := uint64(v)
	if v < 0 {
		d[i] = '-'
		i++
		u = -u // MinInt64's magnitude too: 1<<63 as a uint64
	}
	if u < 10 { // the common one-digit values, and -1
		d[i], d[i+1], d[i+2] = byte('0'+u), '\r', '\n'
		return i + 3
	}
	// decimal digits of u (at least 2 here): log10(2) ~ 1233/4096 turns
	// u's bit length into its digit count or one less, which one
	// comparison settles (no loop over the powers of ten)
	t := bits.Len64(u) * 1233 >> 12
	nd := t + 1
	if u < pow10[t] {
		nd = t
	}
	end := i + nd
	j := end
	for u >= 100 { // two digits at a time, from the right
		q := u / 100
		k := (u - q*100) * 2
		j -= 2
		d[j], d[j+1] = digits2[k], digits2[k+1]
		u = q
	}
	if u >= 10 {
		d[j-2], d[j-1] = digits2[u*2], digits2[u*2+1]
	} else {
		d[j-1] = byte('0' + u)
	}
	d[end], d[end+1] = '\r', '\n'
	return end + 2
}

// stackGroups is how many groups a CL.MTHROTTLE decides in memory on the
// handler's stack; a call with more allocates its working memory.
const stackGroups = 8

// multiScratch is CL.MTHROTTLE's working memory for up to stackGroups
// groups.
type multiScratch struct {
	gs  [stackGroups]gcra.Group
	out [stackGroups]gcra.Result
	hs  [stackGroups]uint64
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
	var keys [][]byte
	var gs []gcra.Group
	var out []gcra.Result
	var hs []uint64
	// The keys on the stack (8 slice headers to zero), not in the client's
	// scratch, which would then have to be cleared after the call so as to
	// keep no reference to the request's buffer: a deferred clear of
	// pointer words (write barriers) costs more than the zeroing.
	var stackKeys [stackGroups][]byte
	if g <= stackGroups {
		// The client's own scratch, reused call after call: nothing to
		// zero (every field read below is written first in this call).
		if c.multi == nil {
			c.multi = new(multiScratch)
		}
		sc := c.multi
		keys, gs, out, hs = stackKeys[:g], sc.gs[:g], sc.out[:g], sc.hs[:g]
	} else {
		keys, gs, out, hs = make([][]byte, g), make([]gcra.Group, g), make([]gcra.Result, g), make([]uint64, g)
	}
	// Every group's integers, left to right, before any rate is checked:
	// max_burst, count and period wait in the group's Limit (EI, DVT and
	// Max) until the rate checks below turn them into the Limit.
	for i := range g {
		a := args[1+5*i : 6+5*i]
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
		gs[i].Limit = gcra.Limit{EI: v[0], DVT: v[1], Max: v[2]}
		gs[i].Q = v[3]
	}
	for i := range gs {
		p := &gs[i].Limit
		lim, err := newLimitIn(u, p.EI, p.DVT, p.Max)
		if err != nil {
			c.out = appendError(c.out, cellZeroRate)
			return
		}
		*p = lim
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
	o = appendResult5(o, &out[b])
	end := len(o)
	for i := range out {
		if i == b { // the verdict's bytes again, not formatted twice
			o = append(o, o[start:end]...)
			continue
		}
		o = appendResult5(o, &out[i])
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
