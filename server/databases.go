package server

import (
	"strconv"

	"github.com/celld/celld/store"
)

// Databases (docs/databases.md): every client has a selected database
// (client.db, 0 on connect and after RESET; SELECT changes it) and
// s.keyspace(c) is that database's store (store.Databases: one Store per
// database, all sharing one memory account). Here: SELECT, SWAPDB, MOVE,
// RANDOMKEY, FLUSHDB/FLUSHALL's scope and INFO keyspace, with Redis
// 7.0.15's replies and errors (src/db.c). A script runs in its caller's
// database, and a SELECT inside it stays inside it (scriptHost.SetCaller).
// WATCH is per (database, key) (watch.go). Client tracking is by key name
// across databases, as Redis's tracking table is. Cluster mode has
// database 0 only, as Redis Cluster.

// Redis's texts (src/db.c, src/object.c).
const (
	errDBRange     = "ERR DB index is out of range"
	errSameObject  = "ERR source and destination objects are the same"
	errIntRange    = "ERR value is out of range, value must between -2147483648 and 2147483647"
	errSelectClust = "ERR SELECT is not allowed in cluster mode"
)

// parseDBArg parses a database argument as Redis's getIntFromObjectOrReply
// does: not an integer -> msg (Redis's generic text when msg is empty),
// outside int32 -> msg (or the range text). It appends the error and
// returns false on failure.
func parseDBArg(c *client, arg []byte, msg string) (int64, bool) {
	n, ok := parseRedisInt(arg)
	switch {
	case !ok && msg == "":
		c.out = appendError(c.out, errNotInt)
	case !ok:
		c.out = appendError(c.out, msg)
	case n < -1<<31 || n > 1<<31-1:
		if msg == "" {
			msg = errIntRange
		}
		c.out = appendError(c.out, msg)
	default:
		return n, true
	}
	return 0, false
}

// validDB reports whether n names one of the databases.
func (s *Server) validDB(n int64) bool { return n >= 0 && n < int64(s.dbs.Len()) }

func cmdSelect(s *Server, c *client, args [][]byte) {
	n, ok := parseDBArg(c, args[1], "")
	if !ok {
		return
	}
	if s.clusterOn() && n != 0 {
		c.out = appendError(c.out, errSelectClust)
		return
	}
	if fc, ok := s.cfg.Forwarder.(ForwardSelectChecker); ok {
		if e := fc.SelectError(int(n)); e != "" { // sidecar: a cluster upstream
			c.out = appendError(c.out, e)
			return
		}
	}
	if !s.validDB(n) {
		c.out = appendError(c.out, errDBRange)
		return
	}
	c.mu.Lock() // CLIENT LIST reads db under mu; the owner reads it without
	c.db = int(n)
	c.mu.Unlock()
	c.out = append(c.out, replyOK...)
}

func cmdSwapDB(s *Server, c *client, args [][]byte) {
	x := &Ctx{s: s, c: c, args: args}
	if s.clusterOn() {
		x.Error("ERR SWAPDB is not allowed in cluster mode")
		return
	}
	a, ok := parseDBArg(c, args[1], "ERR invalid first DB index")
	if !ok {
		return
	}
	b, ok := parseDBArg(c, args[2], "ERR invalid second DB index")
	if !ok {
		return
	}
	if !s.validDB(a) || !s.validDB(b) {
		x.Error(errDBRange)
		return
	}
	if a != b {
		// WATCH: a key watched in either database is touched when it
		// exists on either side (Redis's touchAllWatchedKeysInDb both ways).
		nowMs := s.nowMs()
		da, db := int(a), int(b)
		s.watch.touchIf(func(d int, key string) bool {
			if d != da && d != db {
				return false
			}
			return s.liveIn(da, key, nowMs) || s.liveIn(db, key, nowMs)
		})
		s.dbs.Swap(da, db)
	}
	x.OK()
}

// liveIn reports whether key exists in database d (without creating d).
func (s *Server) liveIn(d int, key string, nowMs int64) bool {
	st := s.dbs.Existing(d)
	if st == nil {
		return false
	}
	_, ok := st.Get([]byte(key), nowMs)
	return ok
}

func cmdMove(s *Server, c *client, args [][]byte) {
	x := &Ctx{s: s, c: c, args: args}
	if s.clusterOn() {
		x.Error("ERR MOVE is not allowed in cluster mode")
		return
	}
	n, ok := parseDBArg(c, args[2], "")
	if !ok {
		return
	}
	if !s.validDB(n) {
		x.Error(errDBRange)
		return
	}
	if int(n) == c.db {
		x.Error(errSameObject)
		return
	}
	src, dst := s.keyspace(c), s.dbs.DB(int(n))
	moved, err := store.Move(src, dst, args[1], s.nowMs())
	switch {
	case err == store.ErrWrongType:
		x.Error("ERR MOVE of a key of this type is not supported")
	case err != nil:
		x.Error("ERR " + err.Error())
	case moved:
		// The source's watchers are touched by call (the key argument);
		// the destination's here, as Redis signals both.
		s.watch.touch(int(n), args[1])
		x.Int(1)
	default:
		x.Int(0)
	}
}

func cmdRandomKey(s *Server, c *client, args [][]byte) {
	x := &Ctx{s: s, c: c, args: args}
	if k, ok := x.Store().RandomKey(x.NowMs()); ok {
		x.Bulk(k)
		return
	}
	x.Null()
}

// flush empties c's database (FLUSHDB) or every database (FLUSHALL),
// first touching the watchers of the keys that existed, as Redis's
// touchAllWatchedKeysInDb does.
func (s *Server) flush(c *client, all bool) {
	nowMs := s.nowMs()
	s.watch.touchIf(func(d int, key string) bool {
		return (all || d == c.db) && s.liveIn(d, key, nowMs)
	})
	if all {
		s.dbs.FlushAll()
		return
	}
	s.keyspace(c).Flush()
}

// keyspaceLines is INFO keyspace: a dbN line for every non-empty database.
func (s *Server) keyspaceLines() []string {
	var lines []string
	nowMs := s.nowMs()
	s.dbs.Each(func(i int, st *store.Store) {
		keys, expires, avgTTL := st.KeyspaceStats(nowMs)
		if keys != 0 {
			lines = append(lines, "db"+strconv.Itoa(i)+":keys="+strconv.Itoa(keys)+
				",expires="+strconv.Itoa(expires)+",avg_ttl="+itoa(avgTTL))
		}
	})
	return lines
}
