package server

import (
	"bytes"
	"errors"
	"hash/maphash"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/celld/celld/gcra"
	"github.com/celld/celld/store"
)

// Rate-limit decisions per limiter, shadow mode and the near-limit signal
// (docs/limiter-metrics.md). Every throttling command, built in or
// registered (Ctx.Decide), ends its decision with one call here:
//
//   - the limiter is the key's first segment before the separator
//     (Config.LimiterSeparator, default ":"); a key without it is the
//     limiter "". At most Config.MetricsMaxLimiters distinct names are
//     kept (names longer than maxLimiterName bytes are never kept); every
//     later one is counted as "other", so hostile keys cannot grow the
//     table or the metrics' cardinality.
//   - each decision is counted as allowed, denied or shadow_denied, per
//     limiter and command; an allowed decision that left less than 20% of
//     the limit (remaining*5 < limit) is also counted as near_limit.
//   - shadow mode: a denied decision on a key matching one of the shadow
//     patterns (Redis glob syntax; --shadow, CONFIG SET shadow) is answered
//     as allowed — limited 0, the limit, remaining 0, retry_after -1, the
//     denied decision's reset_after — and writes nothing (a denial writes
//     nothing anyway), so a limit can be dry-run before it is enforced.
//
// Cost on the hot path: finding the limiter is one scan of the key for the
// separator, one maphash of the prefix and one probe of a fixed,
// lock-free open-addressing table (no allocation: a name is copied once,
// when it is first seen); counting is one atomic add (two when near the
// limit) on counters sharded by client id like the command counters. The
// shadow patterns are read (one atomic load) only on a denial.

// Verdict is what a throttling call answered.
type Verdict uint8

const (
	VerdictAllowed      Verdict = iota // allowed
	VerdictDenied                      // denied
	VerdictShadowDenied                // denied by a shadowed limit: answered as allowed
)

// counter indices in a limiter's per-command block.
const (
	cntAllowed = iota
	cntDenied
	cntShadow
	cntNear
	numDecisionCounters
)

// DecisionCmd numbers a throttling command's decision counters.
type DecisionCmd uint8

// The built-in throttling commands. decPThrottle..decMPThrottle are
// familyCmd+1 (cmd_gcra_family.go).
const (
	decThrottle DecisionCmd = iota
	decPThrottle
	decThrottleRO
	decPThrottleRO
	decMThrottle
	decMPThrottle
	numBuiltinDecisionCmds
)

// maxDecisionCmds bounds the throttling commands (built in and
// registered): it sizes every limiter's counter block.
const maxDecisionCmds = 8

// maxLimiterName is the longest limiter name kept; longer prefixes are
// counted as "other" (a 512 MB key must not become a label).
const maxLimiterName = 64

// OtherLimiter is the limiter name every decision beyond the table's bound
// (and every over-long name) is counted under.
const OtherLimiter = "other"

// decisionCmds are the throttling commands' names, indexed by DecisionCmd.
// Written only by init functions (RegisterDecisionCommand), read after.
var decisionCmds = struct {
	names [maxDecisionCmds]string
	n     int
}{
	names: [maxDecisionCmds]string{"cl.throttle", "cl.pthrottle", "cl.throttle_ro", "cl.pthrottle_ro", "cl.mthrottle", "cl.mpthrottle"},
	n:     int(numBuiltinDecisionCmds),
}

// RegisterDecisionCommand gives a throttling command registered from
// outside package server (CL.WINDOW, ...) its own decision counters, for
// Ctx.Decide. Call it only from an init function, once per name; it panics
// when the name is taken or maxDecisionCmds are registered.
func RegisterDecisionCommand(name string) DecisionCmd {
	for i := 0; i < decisionCmds.n; i++ {
		if decisionCmds.names[i] == name {
			panic("server: decision command registered twice: " + name)
		}
	}
	if decisionCmds.n == maxDecisionCmds {
		panic("server: too many decision commands: " + name)
	}
	decisionCmds.names[decisionCmds.n] = name
	decisionCmds.n++
	return DecisionCmd(decisionCmds.n - 1)
}

// limiterCounters is one limiter's counters: per shard (client id mod
// statShards), per command, allowed/denied/shadow_denied/near_limit. A
// shard's block is 256 bytes, so shards never share a cache line.
type limiterCounters [statShards][maxDecisionCmds][numDecisionCounters]atomic.Int64

// limiterSlot is one limiter: its name (immutable) and counters. The
// name's bytes live in buf, beside the header, so that a lookup's compare
// touches one cache line rather than two.
type limiterSlot struct {
	name string // points into buf
	buf  [maxLimiterName]byte
	c    limiterCounters
}

// newLimiterSlot makes the slot of name (at most maxLimiterName bytes).
func newLimiterSlot(name []byte) *limiterSlot {
	sl := &limiterSlot{}
	if n := copy(sl.buf[:], name); n > 0 {
		sl.name = unsafe.String(&sl.buf[0], n)
	}
	return sl
}

// shadowRules is one CONFIG SET shadow value: the text as given and its
// patterns. Immutable once published.
type shadowRules struct {
	text     string
	patterns []string
}

// decisionTable is the server's limiter table, counters and shadow rules.
// Safe for concurrent use; lookups take no lock.
type decisionTable struct {
	sep  []byte // limiter separator, not empty
	max  int    // most names kept; 0: every decision is "other"
	seed maphash.Seed
	// slots is an open-addressing table of at least 2*max entries (so a
	// probe always ends at an empty one); an entry, once set, never
	// changes. n counts entries set.
	slots []atomic.Pointer[limiterSlot]
	mask  uint64
	n     atomic.Int64
	mu    sync.Mutex // serialises inserts
	other limiterSlot
	// shadow is nil when no pattern is set.
	shadow atomic.Pointer[shadowRules]
}

// newDecisionTable makes a table keeping at most max names (max <= 0: none).
func newDecisionTable(sep string, max int) *decisionTable {
	if sep == "" {
		sep = ":"
	}
	switch {
	case max == 0:
		max = DefaultMaxLimiters
	case max < 0:
		max = 0
	}
	t := &decisionTable{sep: []byte(sep), max: max, seed: maphash.MakeSeed()}
	t.other.name = OtherLimiter
	if max > 0 {
		size := 16
		for size < 2*max {
			size <<= 1
		}
		t.slots = make([]atomic.Pointer[limiterSlot], size)
		t.mask = uint64(size - 1)
	}
	return t
}

// limiterName is key's limiter: the bytes before the first separator, ""
// when there is none; ok is false for a name longer than maxLimiterName.
func (t *decisionTable) limiterName(key []byte) (name []byte, ok bool) {
	i := -1
	if len(t.sep) == 1 {
		// Limiter names are short: a plain loop over the first bytes
		// beats IndexByte's setup; a longer key without the separator
		// there needs the full scan only to tell "" from "other".
		sep, n := t.sep[0], min(len(key), maxLimiterName+1)
		for j := 0; j < n; j++ {
			if key[j] == sep {
				i = j
				break
			}
		}
		if i < 0 && n < len(key) {
			i = bytes.IndexByte(key[n:], sep)
			if i >= 0 {
				i += n
			}
		}
	} else {
		i = bytes.Index(key, t.sep)
	}
	if i < 0 {
		return key[:0], true
	}
	if i > maxLimiterName {
		return nil, false
	}
	return key[:i], true
}

// lookup returns key's limiter slot, adding its name while the table has
// room; "other" when it has none. Allocates only when a name is added.
func (t *decisionTable) lookup(key []byte) *limiterSlot {
	if t.max == 0 {
		return &t.other
	}
	name, ok := t.limiterName(key)
	if !ok {
		return &t.other
	}
	return t.find(name)
}

// lookupFor is lookup for client c, which remembers the last limiter it
// counted: a connection usually asks about one limiter again and again,
// and a match skips the hash and the probe.
func (t *decisionTable) lookupFor(c *client, key []byte) *limiterSlot {
	if t.max == 0 {
		return &t.other
	}
	name, ok := t.limiterName(key)
	if !ok {
		return &t.other
	}
	if sl := c.limiter; sl != nil && sl.name == string(name) {
		return sl
	}
	sl := t.find(name)
	c.limiter = sl
	return sl
}

// find returns name's slot (adding it while there is room) or "other".
func (t *decisionTable) find(name []byte) *limiterSlot {
	h := maphash.Bytes(t.seed, name)
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		sl := t.slots[i].Load()
		if sl == nil {
			return t.insert(name, h)
		}
		if sl.name == string(name) {
			return sl
		}
	}
}

// insert adds name (hash h) unless the table is full, and returns its slot.
func (t *decisionTable) insert(name []byte, h uint64) *limiterSlot {
	if t.n.Load() >= int64(t.max) {
		return &t.other
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		sl := t.slots[i].Load()
		if sl == nil {
			if t.n.Load() >= int64(t.max) {
				return &t.other
			}
			sl = newLimiterSlot(name)
			t.slots[i].Store(sl)
			t.n.Add(1)
			return sl
		}
		if sl.name == string(name) { // added meanwhile
			return sl
		}
	}
}

// count counts one decision of command dc by client id on limiter sl.
func (sl *limiterSlot) count(id int64, dc DecisionCmd, v Verdict, limit, remaining int64) {
	b := &sl.c[uint64(id)%statShards][dc]
	b[v].Add(1)
	if v == VerdictAllowed && nearLimit(limit, remaining) {
		b[cntNear].Add(1)
	}
}

// nearLimit reports whether an allowed decision left less than 20% of the
// limit: remaining*5 < limit, without overflow.
func nearLimit(limit, remaining int64) bool {
	return limit > 0 && remaining <= (limit-1)/5
}

// shadowed reports whether key matches a shadow pattern. One atomic load
// when none is set.
func (t *decisionTable) shadowed(key []byte) bool {
	r := t.shadow.Load()
	if r == nil {
		return false
	}
	var k string
	if len(key) > 0 {
		k = unsafe.String(&key[0], len(key)) // Match keeps nothing
	}
	for _, p := range r.patterns {
		if store.Match(p, k) {
			return true
		}
	}
	return false
}

// setShadow replaces the shadow patterns with text's: comma-separated
// Redis glob patterns, blanks around each ignored, "" for none.
func (t *decisionTable) setShadow(text string) {
	var ps []string
	for _, p := range strings.Split(text, ",") {
		if p = strings.TrimSpace(p); p != "" {
			ps = append(ps, p)
		}
	}
	if len(ps) == 0 {
		t.shadow.Store(nil)
		return
	}
	t.shadow.Store(&shadowRules{text: strings.Join(ps, ","), patterns: ps})
}

// shadowText is the shadow patterns as CONFIG GET shadow reports them.
func (t *decisionTable) shadowText() string {
	if r := t.shadow.Load(); r != nil {
		return r.text
	}
	return ""
}

// decide counts one single-key decision of command dc and applies shadow
// mode; it returns the verdict to answer. On VerdictShadowDenied the
// caller answers as allowed (shadowResult) and the client is marked so
// that WATCH and client tracking do not take the reply for a write.
func (s *Server) decide(c *client, dc DecisionCmd, key []byte, limited bool, limit, remaining int64) Verdict {
	v := VerdictAllowed
	if limited {
		v = VerdictDenied
		if s.dec.shadowed(key) {
			v = VerdictShadowDenied
			c.shadowed = true
		}
	}
	s.dec.lookupFor(c, key).count(c.id, dc, v, limit, remaining)
	return v
}

// LimiterDecisions are one limiter's decisions by one command.
type LimiterDecisions struct {
	Limiter, Command                         string
	Allowed, Denied, ShadowDenied, NearLimit int64
}

// limiterDecisions sums the counters, one row per limiter and command
// with any decision, "other" last; names in table order.
func (t *decisionTable) limiterDecisions() []LimiterDecisions {
	var out []LimiterDecisions
	add := func(sl *limiterSlot) {
		for dc := 0; dc < decisionCmds.n; dc++ {
			var n [numDecisionCounters]int64
			for sh := range sl.c {
				for k := range n {
					n[k] += sl.c[sh][dc][k].Load()
				}
			}
			if n[cntAllowed]+n[cntDenied]+n[cntShadow] == 0 {
				continue
			}
			out = append(out, LimiterDecisions{Limiter: sl.name, Command: decisionCmds.names[dc],
				Allowed: n[cntAllowed], Denied: n[cntDenied], ShadowDenied: n[cntShadow], NearLimit: n[cntNear]})
		}
	}
	for i := range t.slots {
		if sl := t.slots[i].Load(); sl != nil {
			add(sl)
		}
	}
	add(&t.other)
	return out
}

// commandDecisions sums rows per command (every throttling command, in
// DecisionCmd order, zeros included).
func commandDecisions(rows []LimiterDecisions) []Decision {
	out := make([]Decision, decisionCmds.n)
	for i := range out {
		out[i].Command = decisionCmds.names[i]
	}
	for _, r := range rows {
		for i := range out {
			if out[i].Command == r.Command {
				out[i].Allowed += r.Allowed
				out[i].Denied += r.Denied
				out[i].ShadowDenied += r.ShadowDenied
				out[i].NearLimit += r.NearLimit
				break
			}
		}
	}
	return out
}

// reset zeroes every counter (CONFIG RESETSTAT); the names stay.
func (t *decisionTable) reset() {
	clear := func(sl *limiterSlot) {
		for sh := range sl.c {
			for dc := range sl.c[sh] {
				for k := range sl.c[sh][dc] {
					sl.c[sh][dc][k].Store(0)
				}
			}
		}
	}
	for i := range t.slots {
		if sl := t.slots[i].Load(); sl != nil {
			clear(sl)
		}
	}
	clear(&t.other)
}

// infoTopLimiters is how many limiters INFO limiters lists.
const infoTopLimiters = 10

// infoLimiters is INFO's limiters section: the table's size and bound,
// the shadow patterns, and the infoTopLimiters limiters with the most
// denials (denied + shadow_denied, all commands), most first.
func (s *Server) infoLimiters(time.Time) []string {
	rows := s.dec.limiterDecisions()
	type sum struct {
		name                                     string
		allowed, denied, shadowDenied, nearLimit int64
	}
	idx := map[string]int{}
	var sums []sum
	for _, r := range rows {
		i, ok := idx[r.Limiter]
		if !ok {
			i = len(sums)
			idx[r.Limiter] = i
			sums = append(sums, sum{name: r.Limiter})
		}
		sums[i].allowed += r.Allowed
		sums[i].denied += r.Denied
		sums[i].shadowDenied += r.ShadowDenied
		sums[i].nearLimit += r.NearLimit
	}
	sort.SliceStable(sums, func(i, j int) bool {
		return sums[i].denied+sums[i].shadowDenied > sums[j].denied+sums[j].shadowDenied
	})
	lines := []string{
		"limiters:" + strconv.FormatInt(s.dec.n.Load(), 10),
		"limiters_max:" + strconv.Itoa(s.dec.max),
		"limiter_separator:" + infoEscape(string(s.dec.sep)),
		"shadow:" + infoEscape(s.dec.shadowText()),
	}
	for i, x := range sums {
		if i == infoTopLimiters || x.denied+x.shadowDenied == 0 {
			break
		}
		lines = append(lines, "top_denied_"+strconv.Itoa(i+1)+":limiter="+infoEscape(x.name)+
			",allowed="+strconv.FormatInt(x.allowed, 10)+",denied="+strconv.FormatInt(x.denied, 10)+
			",shadow_denied="+strconv.FormatInt(x.shadowDenied, 10)+",near_limit="+strconv.FormatInt(x.nearLimit, 10))
	}
	return lines
}

// infoEscape makes a limiter name or pattern safe inside an INFO line:
// bytes outside printable ASCII, and ',', '=', '\\', as \xHH.
func infoEscape(s string) string {
	const hex = "0123456789abcdef"
	var b []byte
	for i := 0; i < len(s); i++ {
		ch := s[i]
		if ch < 0x20 || ch >= 0x7f || ch == ',' || ch == '=' || ch == '\\' {
			if b == nil {
				b = append(make([]byte, 0, len(s)+8), s[:i]...)
			}
			b = append(b, '\\', 'x', hex[ch>>4], hex[ch&15])
			continue
		}
		if b != nil {
			b = append(b, ch)
		}
	}
	if b == nil {
		return s
	}
	return string(b)
}

// throttleTotals sums CL.THROTTLE's allowed and denied decisions (INFO's
// throttle_allowed, throttle_denied; shadow denials are neither).
func (t *decisionTable) throttleTotals() (allowed, denied int64) {
	add := func(sl *limiterSlot) {
		for sh := range sl.c {
			allowed += sl.c[sh][decThrottle][cntAllowed].Load()
			denied += sl.c[sh][decThrottle][cntDenied].Load()
		}
	}
	for i := range t.slots {
		if sl := t.slots[i].Load(); sl != nil {
			add(sl)
		}
	}
	add(&t.other)
	return allowed, denied
}

// splitDecisions is Stats' per-command view of rows: CL.THROTTLE's allowed
// and denied, and one Decision per other throttling command.
func splitDecisions(rows []LimiterDecisions) (allowed, denied int64, others []Decision) {
	all := commandDecisions(rows)
	return all[decThrottle].Allowed, all[decThrottle].Denied, all[1:]
}

// verdictOf is the verdict of a decision shadow mode does not apply to.
func verdictOf(limited bool) Verdict {
	if limited {
		return VerdictDenied
	}
	return VerdictAllowed
}

// shadowResult turns a denied decision into shadow mode's answer: limited
// 0, the limit, remaining 0, retry_after -1, the same reset_after.
func shadowResult(r *gcra.Result) {
	r.Limited = false
	r.Remaining = 0
	r.RetryAfter = -1
}

// shadowMulti applies shadow mode to a CL.MTHROTTLE call that ThrottleAll
// denied (binding group b, nothing written), counts the call, and returns
// the binding group of the answer. Shadowed limits take no part in the
// decision:
//
//   - a denied group whose key matches a shadow pattern is answered as
//     allowed (shadowResult) and writes nothing;
//   - if every denied group is shadowed, the other groups are decided
//     again at the same instant without the shadowed ones (ThrottleAll
//     over the rest, all or nothing as ever), so an enforced limit is
//     charged as if the shadowed limit were not there; the call counts as
//     shadow_denied under the limiter of the group that bound it (b);
//   - otherwise the call stays denied by its enforced groups and counts as
//     denied under the limiter of the binding enforced group.
//
// The binding group of the answer is gcra.Binding over the answered
// results. Runs only on a denied call while shadow patterns are set; it
// allocates only above stackGroups groups.
func (s *Server) shadowMulti(c *client, dc DecisionCmd, u gcra.Unit, keys [][]byte, gs []gcra.Group, out []gcra.Result, hs []uint64, b int, now int64) (int, error) {
	label := keys[b]
	var flags [stackGroups]bool
	sh := flags[:0]
	if len(keys) > stackGroups {
		sh = make([]bool, len(keys))
	} else {
		sh = flags[:len(keys)]
	}
	anyShadow, enforced := false, false
	for i := range out {
		if !out[i].Limited {
			continue
		}
		if s.dec.shadowed(keys[i]) {
			sh[i], anyShadow = true, true
		} else {
			enforced = true
		}
	}
	if !anyShadow {
		s.dec.lookup(keys[b]).count(c.id, dc, VerdictDenied, out[b].Max, out[b].Remaining)
		return b, nil
	}
	wrote := false
	if !enforced {
		var sc multiScratch
		var sk [stackGroups][]byte
		k2, g2, o2, h2 := sk[:0], sc.gs[:0], sc.out[:0], sc.hs[:0]
		if len(keys) > stackGroups {
			k2, g2 = make([][]byte, 0, len(keys)), make([]gcra.Group, 0, len(keys))
			o2, h2 = make([]gcra.Result, 0, len(keys)), make([]uint64, 0, len(keys))
		}
		for i := range keys {
			if !sh[i] {
				k2, g2 = append(k2, keys[i]), append(g2, gs[i])
			}
		}
		if len(k2) > 0 {
			o2, h2 = o2[:len(k2)], h2[:len(k2)]
			b2, err := s.keyspace(c).ThrottleAll(u, k2, g2, o2, h2, now)
			if err != nil && !errors.Is(err, store.ErrSetExpire) {
				return 0, err
			}
			j := 0
			for i := range keys {
				if !sh[i] {
					out[i] = o2[j]
					j++
				}
			}
			wrote = !o2[b2].Limited
			if err != nil { // ErrSetExpire: written, answered as CL.THROTTLE's error 4
				s.dec.lookup(label).count(c.id, dc, VerdictShadowDenied, 0, 0)
				return 0, err
			}
		}
	}
	for i := range out {
		if sh[i] {
			shadowResult(&out[i])
		}
	}
	nb := gcra.Binding(out)
	if out[nb].Limited { // an enforced group denies the call
		s.dec.lookup(keys[nb]).count(c.id, dc, VerdictDenied, out[nb].Max, out[nb].Remaining)
		return nb, nil
	}
	if !wrote {
		c.shadowed = true // nothing written: not a write for WATCH and tracking
	}
	s.dec.lookup(label).count(c.id, dc, VerdictShadowDenied, 0, 0)
	return nb, nil
}
