package server

import (
	"bytes"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Client-side caching, Redis 6+'s "server assisted client side caching":
// CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX p ...] [BCAST] [OPTIN]
// [OPTOUT] [NOLOOP], CLIENT CACHING YES|NO, CLIENT GETREDIR and CLIENT
// TRACKINGINFO, with Redis 7's replies and error texts (networking.c
// clientCommand, tracking.c).
//
// Semantics, as in Redis:
//   - Default mode: the keys of every read-only command a tracking client
//     runs are remembered for it (OPTIN: only for the command, or MULTI ...
//     EXEC, after CLIENT CACHING YES; OPTOUT: all but the one after CLIENT
//     CACHING NO). When such a key is written, the client gets one
//     invalidation push, ">2 invalidate [key]", and the key is forgotten
//     for it until it reads it again.
//   - BCAST: no key is remembered; every write of a key that starts with
//     one of the client's prefixes (PREFIX, or "" for all) is pushed.
//   - NOLOOP: no push about keys the client wrote itself.
//   - FLUSHDB/FLUSHALL: every tracking client gets ">2 invalidate _" (a
//     null: everything), and the table is emptied.
//   - REDIRECT id: pushes go to that client instead, if it speaks RESP3; if
//     it is gone, the tracking client gets ">2 tracking-redir-broken id".
//     RESP2 connections cannot receive pushes: as in Redis, TRACKING ON is
//     accepted but nothing is sent (Redis's RESP2 route, REDIRECT to a
//     client subscribed to __redis__:invalidate, needs Pub/Sub, which celld
//     does not have).
//
// What counts as a write: a command flagged "write" whose reply shows it
// changed something: CL.THROTTLE allowed (denied writes nothing), SET
// unless NX/XX refused it, DEL/UNLINK/EXPIRE family/PERSIST unless they
// answered 0, FLUSHDB/FLUSHALL. Writes made by Lua scripts count (they run
// through the same path), but with the script's own client as the writer
// (so NOLOOP does not hide a script's writes from its caller), and keys read
// by scripts are not remembered. Keys that expire or are swept are not
// pushed: clients expire cached entries themselves from the TTL they read
// (rueidis asks PTTL with every cached read). Keys evicted at the memory
// bound are pushed, as Redis does (Server.evicted).
//
// Delivery. Each connection's reply buffer (client.out) belongs to the
// connection's goroutine, which writes it with one Write per pipeline
// (serveConn, conn.go). So pushes go around it: every accepted connection
// is wrapped (pushConn), and once a connection tracks or is a redirect
// target, all its writes go through one ordered path (pushState): replies
// and pushes are whole Write calls serialised by a mutex, so a push never
// lands inside a reply. Order matters for correctness: a push about a write that happened
// after the client read a key must reach it after the reply carrying the
// old value, or the client would cache a stale value. A key is remembered
// before the read runs, while the connection is "busy" (it has read
// requests whose replies are not flushed yet); pushes to a busy connection
// wait and are written right after the flush that answers the last request
// read (an early write of part of a long pipeline's replies leaves the
// connection busy: see pushConn.writeReplies). Pushes to an idle
// connection are written by a per-connection goroutine, never by the writer,
// so a client that stops reading cannot stall the clients that write. A
// connection with more than maxPendingPush bytes of undelivered pushes is
// closed (Redis's client output buffer limit; the client reconnects and
// drops its cache).
//
// Cost when nobody tracks: one atomic load per write command (call, in
// cmdstats.go), a nil check per read command, and one atomic pointer load
// per socket read and per pipeline flush.

const (
	// maxPendingPush bounds the pushes queued for one connection.
	maxPendingPush = 32 << 20
	// maxTrackedKeys bounds the tracking table (Redis's
	// tracking-table-max-keys default): past it, a remembered key is
	// dropped and its clients get an invalidation for it.
	maxTrackedKeys = 1_000_000
	// maxKeepBuf is the largest push buffer kept for reuse.
	maxKeepBuf = 64 << 10
)

// Redis 7's error texts.
const (
	errTrkOneRedirect  = "ERR A client can only redirect to a single other client"
	errTrkNoRedirect   = "ERR The client ID you want redirect to does not exist"
	errTrkPrefixBcast  = "ERR PREFIX option requires BCAST mode to be enabled"
	errTrkSwitchBcast  = "ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode."
	errTrkBcastOpt     = "ERR OPTIN and OPTOUT are not compatible with BCAST"
	errTrkOptInOut     = "ERR You can't specify both OPTIN mode and OPTOUT mode"
	errTrkSwitchOpt    = "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode."
	errCachingNotTrack = "ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled"
	errCachingYes      = "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode."
	errCachingNo       = "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode."
)

// trackState is one client's tracking mode. The mode fields are written
// only by the client's own goroutine, under trackingTable.mu, and read by
// it without the lock or by others with it.
type trackState struct {
	c *client

	on, bcast, optin, optout, noloop bool
	redirect                         int64
	prefixes                         []string
	brokenRedir                      bool // guarded by trackingTable.mu only

	// Owned by the client's goroutine.
	caching bool // CLIENT CACHING given for the next command or transaction
}

// idSet is the clients that may cache one key.
type idSet struct{ ids []int64 }

// trackingTable is the server's tracking state. Its zero value is ready.
type trackingTable struct {
	active atomic.Int64 // clients with tracking on

	mu    sync.Mutex
	keys  map[string]*idSet     // default mode: key → client ids
	items int                   // ids across keys
	mem   int64                 // the keys' and BCAST prefixes' estimated memory (trackedKeyCost, prefixCost), charged to used_memory
	pmem  int64                 // the part of mem that is BCAST prefixes (kept by FLUSHALL)
	byID  map[int64]*trackState // clients with tracking on
	bcast []*trackState         // clients with tracking on in BCAST mode
	buf   []byte                // scratch for building pushes
}

func (t *trackingTable) numKeys() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.keys)
}

// counts returns INFO's tracking_total_keys, _items and _prefixes.
func (t *trackingTable) counts() (keys, items, prefixes int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	seen := map[string]bool{}
	for _, st := range t.bcast {
		for _, p := range st.prefixes {
			seen[p] = true
		}
	}
	return len(t.keys), t.items, len(seen)
}

// ---------------------------------------------------------------------------
// Hooks called by the command path.

// trackRead remembers the keys of a read-only command for c, before the
// command reads them (so that a write racing with the read is pushed).
func (s *Server) trackRead(c *client, cmd *command, args [][]byte) {
	st := c.trk
	if !st.on || st.bcast || (st.optin && !st.caching) || (st.optout && st.caching) {
		return
	}
	t := &s.ext.trk
	t.mu.Lock()
	eachKey(cmd, args, func(k []byte) { t.rememberLocked(s, k, c.id) })
	t.mu.Unlock()
}

// trackKeys remembers keys for c as trackRead does for a read command's:
// a script's keys when the script reads (scriptHost.Call).
func (s *Server) trackKeys(c *client, keys [][]byte) {
	st := c.trk
	if len(keys) == 0 || !st.on || st.bcast || (st.optin && !st.caching) || (st.optout && st.caching) {
		return
	}
	t := &s.ext.trk
	t.mu.Lock()
	for _, k := range keys {
		t.rememberLocked(s, k, c.id)
	}
	t.mu.Unlock()
}

// eachKey calls fn for each key argument of cmd.
func eachKey(cmd *command, args [][]byte, fn func([]byte)) {
	if cmd.keynum != nil {
		cmd.keynum.each(args, true, fn) // keyspecs.go
		return
	}
	if cmd.firstKey <= 0 || cmd.step <= 0 {
		return
	}
	last := cmd.lastKey
	if last < 0 {
		last += len(args)
	}
	for i := cmd.firstKey; i <= last && i < len(args); i += cmd.step {
		fn(args[i])
	}
}

// trackWrite sends invalidations for the keys a write command changed;
// reply is the command's reply. Called only while some client tracks.
func (s *Server) trackWrite(c *client, cmd *command, args [][]byte, reply []byte) {
	if !modified(cmd, args, reply) {
		return
	}
	t := &s.ext.trk
	t.mu.Lock()
	defer t.mu.Unlock()
	if cmd.meta.flush {
		t.flushLocked(s)
		return
	}
	eachKey(cmd, args, func(k []byte) { t.invalidateLocked(s, c, k) })
}

// modified reports whether a write command's reply shows that it changed
// its keys. When in doubt it says yes: an extra invalidation only costs
// the client a cache miss.
func modified(cmd *command, args [][]byte, reply []byte) bool {
	if len(reply) == 0 {
		return false
	}
	if isFamilyWrite(cmd.name) {
		return familyModified(cmd, reply) // cmd_gcra_family.go
	}
	if f := extModified[cmd.name]; f != nil {
		return f(args, reply) // handlerapi_decisions.go
	}
	switch reply[0] {
	case '-':
		// CL.THROTTLE's "Error while setting key expire" comes after the
		// key was written.
		return cmd.name == "cl.throttle" && bytes.HasPrefix(reply[1:], []byte(cellExpire))
	case ':':
		return cmd.meta.intIsValue || !bytes.HasPrefix(reply, []byte(":0\r\n"))
	}
	switch cmd.name {
	case "cl.throttle": // *5 :limited ...
		return bytes.HasPrefix(reply, []byte("*5\r\n:0\r\n"))
	case "set": // a null without GET: NX or XX refused the write
		if reply[0] == '_' || bytes.HasPrefix(reply, []byte("$-1\r\n")) {
			for _, a := range args[3:] {
				if strings.EqualFold(string(a), "get") {
					return true
				}
			}
			return false
		}
	}
	return true
}

// afterCommand runs after each top-level command of a client that has used
// tracking: CLIENT CACHING lasts for one command, or for a whole MULTI ...
// EXEC, as in Redis's resetClient.
func (st *trackState) afterCommand(c *client, args [][]byte) {
	if st.caching && !c.inMulti && !bytes.EqualFold(args[0], []byte("client")) {
		st.caching = false
	}
}

// trackingClosed forgets a closing client (Server.closed).
func (s *Server) trackingClosed(c *client) {
	if c.trk == nil {
		return
	}
	t := &s.ext.trk
	t.mu.Lock()
	t.disableLocked(s, c.trk)
	t.mu.Unlock()
}

// trackingOff turns tracking off for c (CLIENT TRACKING OFF, RESET).
func (s *Server) trackingOff(c *client) { s.trackingClosed(c) }

// ---------------------------------------------------------------------------
// The table.

func (t *trackingTable) rememberLocked(s *Server, key []byte, id int64) {
	if t.keys == nil {
		t.keys = make(map[string]*idSet)
	}
	set := t.keys[string(key)]
	if set == nil {
		if len(t.keys) >= maxTrackedKeys {
			t.evictOneLocked(s)
		}
		set = &idSet{}
		t.keys[string(key)] = set
		t.addMemLocked(s, trackedKeyCost(len(key)))
	}
	for _, x := range set.ids {
		if x == id {
			return
		}
	}
	c0 := cap(set.ids)
	set.ids = append(set.ids, id)
	t.items++
	if c := cap(set.ids); c != c0 {
		t.addMemLocked(s, int64(c-c0)*8)
	}
}

// trackedKeyCost is what remembering a key of klen bytes costs the heap,
// before its client ids (8 B each, by the ids slice's capacity): its map
// slot, its name's copy (in the allocator's 8-byte classes) and its idSet.
// Measured 67 B plus the name's size class at 200k keys (Go 1.26); the
// table's memory counts in used_memory (Store.AddOverheadMemory), as
// Redis counts its tracking table.
func trackedKeyCost(klen int) int64 { return 64 + int64((klen+7)&^7) }

// addMemLocked adds d to the table's memory and to the store's account
// (s nil: tests of the table alone). t.mu must be held; one atomic add.
func (t *trackingTable) addMemLocked(s *Server, d int64) {
	t.mem += d
	if s != nil {
		s.store.AddOverheadMemory(d)
	}
}

// evictOneLocked drops one remembered key, telling its clients, to keep the
// table within maxTrackedKeys.
func (t *trackingTable) evictOneLocked(s *Server) {
	for k := range t.keys {
		t.invalidateLocked(s, nil, []byte(k))
		return
	}
}

// invalidateLocked pushes key to the clients that may cache it and to the
// BCAST clients whose prefixes match, and forgets it. modifier is the
// client that wrote it (nil for evictions), for NOLOOP.
func (t *trackingTable) invalidateLocked(s *Server, modifier *client, key []byte) {
	msg := appendInvalidate(t.buf[:0], key)
	t.buf = msg
	if set := t.keys[string(key)]; set != nil {
		delete(t.keys, string(key))
		t.items -= len(set.ids)
		t.addMemLocked(s, -trackedKeyCost(len(key))-int64(cap(set.ids))*8)
		for _, id := range set.ids {
			st := t.byID[id]
			if st == nil || !st.on || st.bcast || (st.noloop && st.c == modifier) {
				continue
			}
			t.sendLocked(s, st, msg)
		}
	}
	for _, st := range t.bcast {
		if st.noloop && st.c == modifier {
			continue
		}
		for _, p := range st.prefixes {
			if len(key) >= len(p) && string(key[:len(p)]) == p {
				t.sendLocked(s, st, msg)
				break // a client's prefixes never overlap
			}
		}
	}
}

// evicted is the store's OnEvict hook: as Redis's evict.c signals every
// evicted key as modified, WATCHers of the keys are marked dirty and the
// clients that may cache them get an invalidation push (no client is the
// writer, so NOLOOP hides none). It runs on the goroutine of the command
// (or background sweep) that evicted, holding the store's evictor lock
// and no shard lock. Cost when nobody tracks or watches: two atomic loads.
func (s *Server) evicted(keys [][]byte) {
	for _, k := range keys {
		s.watch.touchAnyDB(k) // the hook does not name the database
	}
	t := &s.ext.trk
	if t.active.Load() == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range keys {
		t.invalidateLocked(s, nil, k)
	}
}

// flushLocked tells every tracking client that everything changed.
func (t *trackingTable) flushLocked(s *Server) {
	for _, st := range t.byID {
		t.sendLocked(s, st, []byte(pushFlush))
	}
	t.keys = nil
	t.items = 0
	t.addMemLocked(s, -(t.mem - t.pmem)) // the keys; BCAST prefixes stay
}

// sendLocked delivers one push for st: to st's client, or to its REDIRECT
// target; only RESP3 connections get pushes.
func (t *trackingTable) sendLocked(s *Server, st *trackState, msg []byte) {
	target := st.c
	if st.redirect != 0 {
		s.mu.Lock()
		rc := s.clients[st.redirect]
		s.mu.Unlock()
		if rc == nil {
			st.brokenRedir = true
			if protoOf(st.c) == 3 {
				deliver(st.c, appendInt([]byte(">2\r\n$21\r\ntracking-redir-broken\r\n"), st.redirect))
			}
			return
		}
		target = rc
	}
	if protoOf(target) == 3 {
		deliver(target, msg)
	}
}

func protoOf(c *client) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.proto
}

const pushFlush = ">2\r\n$10\r\ninvalidate\r\n_\r\n"

// appendInvalidate appends ">2 invalidate [key]" in RESP3.
func appendInvalidate(b, key []byte) []byte {
	b = append(b, ">2\r\n$10\r\ninvalidate\r\n*1\r\n"...)
	return appendBulk(b, key)
}

// deliver queues msg (copied) on c's connection.
func deliver(c *client, msg []byte) {
	if pc, ok := c.netConn.(*pushConn); ok {
		pc.ensure(false).enqueue(msg, c)
	}
}

func (t *trackingTable) disableLocked(s *Server, st *trackState) {
	for _, p := range st.prefixes {
		t.pmem -= prefixCost(len(p))
		t.addMemLocked(s, -prefixCost(len(p)))
	}
	if st.on {
		st.on = false
		t.active.Add(-1)
		delete(t.byID, st.c.id)
		if st.bcast {
			for i, o := range t.bcast {
				if o == st {
					t.bcast = append(t.bcast[:i], t.bcast[i+1:]...)
					break
				}
			}
		}
	}
	st.bcast, st.optin, st.optout, st.noloop, st.brokenRedir = false, false, false, false, false
	st.caching = false
	st.prefixes = nil
	st.redirect = 0
}

// ---------------------------------------------------------------------------
// Commands.

// trackOpts are CLIENT TRACKING's parsed options.
type trackOpts struct {
	bcast, optin, optout, noloop bool
	redirect                     int64
	prefixes                     [][]byte
}

func cmdClientTracking(s *Server, c *client, args [][]byte) {
	var o trackOpts
	for j := 3; j < len(args); j++ {
		more := len(args) - 1 - j
		switch opt := strings.ToLower(string(args[j])); {
		case opt == "redirect" && more > 0:
			j++
			if o.redirect != 0 {
				c.out = appendError(c.out, errTrkOneRedirect)
				return
			}
			id, ok := parseRedisInt(args[j])
			if !ok {
				c.out = appendError(c.out, errNotInt)
				return
			}
			s.mu.Lock()
			_, exists := s.clients[id]
			s.mu.Unlock()
			if !exists && id != c.id {
				c.out = appendError(c.out, errTrkNoRedirect)
				return
			}
			o.redirect = id
		case opt == "bcast":
			o.bcast = true
		case opt == "optin":
			o.optin = true
		case opt == "optout":
			o.optout = true
		case opt == "noloop":
			o.noloop = true
		case opt == "prefix" && more > 0:
			j++
			o.prefixes = append(o.prefixes, args[j])
		default:
			c.out = appendError(c.out, errSyntax)
			return
		}
	}
	switch strings.ToLower(string(args[2])) {
	case "on":
		if s.cfg.Forwarder != nil { // sidecar mode: see errTrkSidecar
			c.out = appendError(c.out, errTrkSidecar)
			return
		}
		if msg := s.trackingOn(c, o); msg != "" {
			c.out = appendError(c.out, msg)
			return
		}
	case "off":
		s.trackingOff(c)
	default:
		c.out = appendError(c.out, errSyntax)
		return
	}
	c.out = append(c.out, replyOK...)
}

// trackingOn checks o against c's current mode, in Redis's order, and
// turns tracking on; it returns an error text or "".
func (s *Server) trackingOn(c *client, o trackOpts) string {
	if c.trk == nil {
		c.trk = &trackState{c: c}
	}
	st := c.trk
	switch {
	case !o.bcast && len(o.prefixes) > 0:
		return errTrkPrefixBcast
	case st.on && st.bcast != o.bcast:
		return errTrkSwitchBcast
	case o.bcast && (o.optin || o.optout):
		return errTrkBcastOpt
	case o.optin && o.optout:
		return errTrkOptInOut
	case (o.optin && st.optout) || (o.optout && st.optin):
		return errTrkSwitchOpt
	}
	if o.bcast {
		if msg := prefixCollision(st.prefixes, o.prefixes); msg != "" {
			return msg
		}
	}
	// From here on pushes may come: the connection's writes take the
	// ordered path. This command is running, so the connection is busy.
	if pc, ok := c.netConn.(*pushConn); ok {
		pc.ensure(true)
	}
	if o.redirect != 0 {
		s.mu.Lock()
		rc := s.clients[o.redirect]
		s.mu.Unlock()
		if rc != nil && rc != c {
			if pc, ok := rc.netConn.(*pushConn); ok {
				pc.ensure(false)
			}
		}
	}
	t := &s.ext.trk
	t.mu.Lock()
	defer t.mu.Unlock()
	if !st.on {
		st.on = true
		t.active.Add(1)
		if t.byID == nil {
			t.byID = make(map[int64]*trackState)
		}
		t.byID[c.id] = st
	}
	wasBcast := st.bcast
	st.brokenRedir, st.bcast, st.optin, st.optout, st.noloop = false, false, false, false, false
	st.redirect = o.redirect
	if o.bcast {
		st.bcast = true
		if !wasBcast {
			t.bcast = append(t.bcast, st)
		}
		if len(o.prefixes) == 0 {
			t.addPrefixLocked(s, st, "")
		}
		for _, p := range o.prefixes {
			t.addPrefixLocked(s, st, string(p))
		}
	}
	st.optin, st.optout, st.noloop = o.optin, o.optout, o.noloop
	return ""
}

// addPrefixLocked adds BCAST prefix p to st (once) and charges it to the
// table's memory, as Redis counts a BCAST client's prefixes (its rax) in
// used_memory. t.mu must be held.
func (t *trackingTable) addPrefixLocked(s *Server, st *trackState, p string) {
	for _, q := range st.prefixes {
		if q == p {
			return
		}
	}
	st.prefixes = append(st.prefixes, p)
	t.pmem += prefixCost(len(p))
	t.addMemLocked(s, prefixCost(len(p)))
}

// prefixCost is what one BCAST prefix of plen bytes costs the heap: its
// string header in the client's slice and its bytes (8-byte classes).
func prefixCost(plen int) int64 { return 16 + int64((plen+7)&^7) }

// prefixCollision is Redis's checkPrefixCollisionsOrReply: no new prefix
// may be a prefix of an existing or another new one, or the reverse.
func prefixCollision(existing []string, add [][]byte) string {
	overlap := func(a, b []byte) bool {
		n := min(len(a), len(b))
		return bytes.Equal(a[:n], b[:n])
	}
	for i, p := range add {
		for _, e := range existing {
			if overlap([]byte(e), p) {
				return "ERR Prefix '" + string(cString(p)) + "' overlaps with an existing prefix '" +
					string(cString([]byte(e))) + "'. Prefixes for a single client must not overlap."
			}
		}
		for _, q := range add[i+1:] {
			if overlap(p, q) {
				return "ERR Prefix '" + string(cString(p)) + "' overlaps with another provided prefix '" +
					string(cString(q)) + "'. Prefixes for a single client must not overlap."
			}
		}
	}
	return ""
}

func cmdClientCaching(s *Server, c *client, args [][]byte) {
	st := c.trk
	if st == nil || !st.on {
		c.out = appendError(c.out, errCachingNotTrack)
		return
	}
	switch strings.ToLower(string(args[2])) {
	case "yes":
		if !st.optin {
			c.out = appendError(c.out, errCachingYes)
			return
		}
	case "no":
		if !st.optout {
			c.out = appendError(c.out, errCachingNo)
			return
		}
	default:
		c.out = appendError(c.out, errSyntax)
		return
	}
	st.caching = true
	c.out = append(c.out, replyOK...)
}

func cmdClientGetRedir(s *Server, c *client, _ [][]byte) {
	if st := c.trk; st != nil && st.on {
		c.out = appendInt(c.out, st.redirect)
		return
	}
	c.out = appendInt(c.out, -1)
}

func cmdClientTrackingInfo(s *Server, c *client, _ [][]byte) {
	st := c.trk
	if st == nil {
		st = &trackState{c: c}
	}
	s.ext.trk.mu.Lock()
	broken := st.brokenRedir
	s.ext.trk.mu.Unlock()
	flags := []string{"off"}
	if st.on {
		flags[0] = "on"
	}
	if st.bcast {
		flags = append(flags, "bcast")
	}
	if st.optin {
		flags = append(flags, "optin")
		if st.caching {
			flags = append(flags, "caching-yes")
		}
	}
	if st.optout {
		flags = append(flags, "optout")
		if st.caching {
			flags = append(flags, "caching-no")
		}
	}
	if st.noloop {
		flags = append(flags, "noloop")
	}
	if broken {
		flags = append(flags, "broken_redirect")
	}
	b := c.appendMap(c.out, 3)
	b = appendBulkString(b, "flags")
	b = c.appendSet(b, len(flags))
	for _, f := range flags {
		b = appendBulkString(b, f)
	}
	b = appendBulkString(b, "redirect")
	if st.on {
		b = appendInt(b, st.redirect)
	} else {
		b = appendInt(b, -1)
	}
	b = appendBulkString(b, "prefixes")
	prefixes := slices.Clone(st.prefixes)
	slices.Sort(prefixes) // Redis keeps them in a radix tree: sorted
	b = appendArray(b, len(prefixes))
	for _, p := range prefixes {
		b = appendBulkString(b, p)
	}
	c.out = b
}

// ---------------------------------------------------------------------------
// Delivery: the connection wrapper.

// pushListener wraps every accepted connection in a pushConn.
type pushListener struct {
	net.Listener
	s *Server // counts and logs closes for the push backlog
}

func (l pushListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &pushConn{Conn: conn, s: l.s}, nil
}

// pushConn is a connection that can take invalidation pushes from other
// goroutines. Until the first push state exists it only forwards (one
// atomic load per Read and Write); after, see pushState.
type pushConn struct {
	net.Conn
	s      *Server // nil in some tests
	ps     atomic.Pointer[pushState]
	closed atomic.Bool
	// deferred: replies to requests read wait in c.out for the end of
	// the event loop's turn (loopConn.deferOut), so a push state created
	// meanwhile starts busy. Set and cleared by the loop goroutine
	// (cleared after the replies are written: eventLoop.writeDeferred).
	deferred atomic.Bool
}

// Read marks the connection busy when requests arrive: their replies are
// not written yet, and pushes must follow them.
func (p *pushConn) Read(b []byte) (int, error) {
	n, err := p.Conn.Read(b)
	if n > 0 {
		if ps := p.ps.Load(); ps != nil {
			ps.mu.Lock()
			if !ps.busy {
				// Pushes queued while idle, not written yet, came from
				// writes done before these requests: they go first.
				ps.early = len(ps.pending)
			}
			ps.busy = true
			ps.mu.Unlock()
		}
	}
	return n, err
}

// Write writes b as the replies to every request read so far (as
// writeReplies(b, true) does).
func (p *pushConn) Write(b []byte) (int, error) {
	ps := p.ps.Load()
	if ps == nil {
		return p.Conn.Write(b)
	}
	return ps.flush(b)
}

// writeReplies writes b, replies to requests already read, in one Write.
// With done, b ends the replies to every request read so far: the
// connection is no longer busy and the pushes that waited for these
// replies follow them. Without done (an early write of part of a long
// pipeline's replies), the connection stays busy and pushes keep waiting.
// Connection goroutine only. Hot-path cost until the connection tracks: one
// atomic load and the Write (nothing when b is empty).
func (p *pushConn) writeReplies(b []byte, done bool) error {
	ps := p.ps.Load()
	if ps == nil {
		if len(b) == 0 {
			return nil
		}
		_, err := p.Conn.Write(b)
		return err
	}
	if done {
		_, err := ps.flush(b)
		return err
	}
	if len(b) == 0 {
		return nil
	}
	ps.wmu.Lock()
	defer ps.wmu.Unlock()
	_, err := ps.conn.Write(b)
	return err
}

// Close stops the push writer and closes the connection. Idempotent.
func (p *pushConn) Close() error {
	p.closed.Store(true)
	if ps := p.ps.Load(); ps != nil {
		ps.stop()
	}
	return p.Conn.Close()
}

// SetAuthenticated forwards to the protocol guard's connection (auth.go).
func (p *pushConn) SetAuthenticated(ok bool) {
	if a, is := p.Conn.(authSetter); is {
		a.SetAuthenticated(ok)
	}
}

// NetConn returns the wrapped connection.
func (p *pushConn) NetConn() net.Conn { return p.Conn }

// ensure returns the connection's push state, creating it if needed.
// inCommand is true when the caller is the connection's own goroutine
// running a command: the connection is then busy (its replies are not
// flushed yet), even if another goroutine created the state a moment ago
// as a REDIRECT target, before this connection's next Read could say so.
func (p *pushConn) ensure(inCommand bool) *pushState {
	ps := p.ps.Load()
	if ps == nil {
		ps = &pushState{conn: p.Conn, s: p.s, wake: make(chan struct{}, 1), done: make(chan struct{})}
		ps.obuf, _ = unwrapConn[outBuffer](p.Conn)
		if p.ps.CompareAndSwap(nil, ps) {
			go ps.loop()
			if p.closed.Load() {
				ps.stop()
			}
		} else {
			ps = p.ps.Load()
		}
	}
	if inCommand {
		ps.mu.Lock()
		ps.busy = true
		ps.mu.Unlock()
	} else if p.deferred.Load() {
		// Checked again under ps.mu: loopConn's writeDeferred clears
		// deferred after writing the replies, then flushes ps (which
		// takes ps.mu and clears busy), so either that flush follows
		// this busy mark or this check sees deferred false.
		ps.mu.Lock()
		if p.deferred.Load() {
			ps.busy = true
		}
		ps.mu.Unlock()
	}
	return ps
}

// pushState serialises a connection's writes: its goroutine's reply flushes
// and the pushes other goroutines queue.
type pushState struct {
	conn net.Conn
	s    *Server    // reports a close for the backlog limit (nil: none)
	wmu  sync.Mutex // held across each write to conn

	mu      sync.Mutex // guards the fields below; never held across I/O
	busy    bool       // requests read whose replies are not flushed yet
	pending []byte     // pushes not written yet
	early   int        // pending[:early] was queued before the busy requests were read
	obuf    outBuffer  // the connection's output buffer, if it has one (obuf.go)
	spare   []byte
	dead    bool

	wake     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// enqueue queues msg (copied) for c (the connection's client, for the
// report of a close). It never blocks on the network. Past
// pushBacklogLimit the connection is closed, counted and logged as a
// close for the output buffer limit (outputLimitReached), as Redis does.
func (ps *pushState) enqueue(msg []byte, c *client) {
	ps.mu.Lock()
	if ps.dead {
		ps.mu.Unlock()
		return
	}
	if mem := len(ps.pending) + len(msg) + ps.backlog(); mem > pushBacklogLimit {
		ps.dead = true
		ps.pending = nil
		ps.mu.Unlock()
		go ps.conn.Close() // may block (TLS close_notify); not under the caller's locks
		if ps.s != nil {
			ps.s.outputLimitReached(c, c.addr, int64(mem), "tracking pushes "+itoa(int64(pushBacklogLimit)))
		}
		return
	}
	ps.pending = append(ps.pending, msg...)
	busy := ps.busy
	ps.mu.Unlock()
	if !busy {
		select {
		case ps.wake <- struct{}{}:
		default:
		}
	}
}

// take swaps out the pending pushes.
func (ps *pushState) takeLocked() []byte {
	pend := ps.pending
	ps.early = 0
	ps.pending = ps.spare[:0]
	ps.spare = nil
	return pend
}

func (ps *pushState) recycle(b []byte) {
	if cap(b) > maxKeepBuf {
		return
	}
	ps.mu.Lock()
	if ps.spare == nil {
		ps.spare = b[:0]
	}
	ps.mu.Unlock()
}

// flush writes a pipeline's replies, then the pushes that waited for them.
// Pushes queued before the pipeline's requests were read (from writes that
// finished first: the idle writer had not sent them yet) go before the
// replies, as in Redis, so that a client that saw another client's write
// acknowledged gets its invalidation before its next reply.
func (ps *pushState) flush(b []byte) (int, error) {
	ps.wmu.Lock()
	defer ps.wmu.Unlock()
	var n int
	var err error
	ps.mu.Lock()
	var first []byte
	if ps.early > 0 { // rare: a push raced the next request
		first = append([]byte(nil), ps.pending[:ps.early]...)
		ps.pending = ps.pending[:copy(ps.pending, ps.pending[ps.early:])]
		ps.early = 0
	}
	ps.mu.Unlock()
	if len(first) > 0 {
		_, err = ps.conn.Write(first)
	}
	if len(b) > 0 && err == nil {
		n, err = ps.conn.Write(b)
	}
	ps.mu.Lock()
	ps.busy = false
	pend := ps.takeLocked()
	ps.mu.Unlock()
	if len(pend) > 0 && err == nil {
		_, err = ps.conn.Write(pend)
	}
	ps.recycle(pend)
	return n, err
}

// loop writes pushes queued while the connection is idle.
func (ps *pushState) loop() {
	for {
		select {
		case <-ps.done:
			return
		case <-ps.wake:
		}
		ps.wmu.Lock()
		ps.mu.Lock()
		if ps.busy || ps.dead || len(ps.pending) == 0 {
			ps.mu.Unlock()
			ps.wmu.Unlock()
			continue
		}
		pend := ps.takeLocked()
		ps.mu.Unlock()
		_, err := ps.conn.Write(pend)
		ps.wmu.Unlock()
		ps.recycle(pend)
		if err != nil {
			ps.mu.Lock()
			ps.dead = true
			ps.mu.Unlock()
			ps.conn.Close()
			return
		}
	}
}

func (ps *pushState) stop() { ps.stopOnce.Do(func() { close(ps.done) }) }
