package sidecar

import (
	"github.com/celld/celld/server"
)

// Bulk reads: commands whose reply grows with a stored value or with the
// keyspace, not with the request (HGETALL of a hash of a million fields,
// LRANGE 0 -1 of a long list, KEYS *). An owner may compute such a reply
// for longer than --upstream-timeout before it sends the first byte (celld
// and Redis build a reply before they write it): measured, HGETALL of 1M
// fields was silent for 0.43-1.79 s before its first byte on the 2-core test
// VM at load 13-15 (celld owner, 21 MB reply). Under the decision
// timeout that silence took the owner for dead, and the local fallback
// answered the client an empty hash (docs/sidecar-bulk.md).
//
// So a bulk read gets a first-byte allowance of its own
// (Config.BulkTimeout, --upstream-bulk-timeout, default 10 s) and travels
// on connections of its own (a "bulk lane": upConn with connKey.bulk on an
// event loop, the bulk pools of owner.conns on the blocking path): a
// decision (CL.THROTTLE and everything not listed here) never queues behind
// a bulk reply, and keeps its 250 ms bound, so a silent owner is still
// noticed within the decision timeout. Value reads (GET, ...: valueNames)
// share the bulk lane with the decision timeout for their first byte. On
// the bulk lane a reply that keeps arriving is waited for; one that stalls
// or trickles below minBulkRate takes its owner down like any other
// timeout (deadline.go).

// bulkNames are the bulk reads, lower case: whole-value reads, whole- or
// multi-value set algebra (and its STORE forms, whose work grows with the
// values as well), SORT, DUMP and KEYS.
var bulkNames = [...]string{
	"hgetall", "hkeys", "hvals",
	"lrange",
	"smembers", "sunion", "sinter", "sdiff", "sunionstore", "sinterstore", "sdiffstore",
	"zrange", "zrangebyscore", "zrangebylex", "zrevrange", "zrevrangebyscore", "zrevrangebylex",
	"zrangestore", "zunion", "zinter", "zdiff", "zunionstore", "zinterstore", "zdiffstore",
	"sort", "sort_ro", "dump", "keys",
	// Writes and reads whose reply carries stored elements by a count
	// (LPOP key 1000000, HRANDFIELD key -N WITHVALUES, ZPOPMIN key N,
	// HSCAN ... COUNT N): as large as a bulk read's. A write among them
	// on the decision lane was worse than a read: a reply slower than
	// the timeout took its owner down after the owner had applied it, and
	// the fallback's answer (nil) lost what was popped
	// (TestSidecarLargeWriteReplyNotLost).
	"lpop", "rpop", "spop", "zpopmin", "zpopmax", "lmpop", "zmpop",
	"hrandfield", "zrandmember", "srandmember", "hscan", "sscan", "zscan", "lpos",
}

// valueNames are the value reads, lower case: commands that return a
// stored value as it is (a string of up to 512 MB, a field, an element).
// The owner has nothing to compute, so their first byte keeps the decision
// timeout (a paused owner is still noticed within it); but the reply may
// take long to cross a slow link, so they travel on the bulk lane, where
// a reply that keeps arriving is waited for (replyLeft) while the
// decision lane counts the age of a reply, not its silence.
var valueNames = [...]string{
	"get", "mget", "getrange", "substr", "hget", "hmget", "lindex",
	// Writes that return a stored value (GETDEL of a 512 MB string): see
	// bulkNames for why a write's value must not be left to the fallback.
	"getdel", "getex", "getset", "lmove", "rpoplpush",
}

// bulkFirst has a bit per lower-case first letter of a bulk or value
// read: a command whose first letter has none (c for every CL.* command)
// is known to be neither after one load, without a string comparison.
var bulkFirst = func() (m uint32) {
	for _, n := range bulkNames {
		m |= 1 << (n[0] - 'a')
	}
	for _, n := range valueNames {
		m |= 1 << (n[0] - 'a')
	}
	return m
}()

// Kinds of command for the lanes (laneKind).
const (
	laneDecision = iota // the decision lane: answered within Timeout
	laneValue           // a value read: bulk lane, first byte within Timeout
	laneBulk            // a bulk read: bulk lane, first byte within BulkTimeout
)

// laneKind reports which lane name (any case) travels on, and with which
// first-byte allowance. Cheap: a command whose first letter starts no bulk
// or value read (CL.THROTTLE) costs one bit test; others are lower-cased
// on the stack and looked up in kinds.
func laneKind(name []byte) int {
	if len(name) < 3 || len(name) > len(lowerBuf{}) {
		return laneDecision
	}
	c := name[0] | 0x20
	if c < 'a' || c > 'z' || bulkFirst&(1<<(c-'a')) == 0 {
		return laneDecision
	}
	var b lowerBuf
	for i, ch := range name {
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		b[i] = ch
	}
	switch string(b[:len(name)]) { // no allocation; TestIsBulk checks it against the lists
	case "hgetall", "hkeys", "hvals", "lrange",
		"smembers", "sunion", "sinter", "sdiff", "sunionstore", "sinterstore", "sdiffstore",
		"zrange", "zrangebyscore", "zrangebylex", "zrevrange", "zrevrangebyscore", "zrevrangebylex",
		"zrangestore", "zunion", "zinter", "zdiff", "zunionstore", "zinterstore", "zdiffstore",
		"sort", "sort_ro", "dump", "keys",
		"lpop", "rpop", "spop", "zpopmin", "zpopmax", "lmpop", "zmpop",
		"hrandfield", "zrandmember", "srandmember", "hscan", "sscan", "zscan", "lpos":
		return laneBulk
	case "get", "mget", "getrange", "substr", "hget", "hmget", "lindex",
		"getdel", "getex", "getset", "lmove", "rpoplpush":
		return laneValue
	}
	return laneDecision
}

// lowerBuf holds the longest bulk or value read's name.
type lowerBuf [16]byte

// isBulkName reports whether name (any case) is a bulk read (BulkTimeout
// before its first byte).
func isBulkName(name []byte) bool { return laneKind(name) == laneBulk }

// reqKind is laneKind of req; for a transaction the highest of its
// commands'. Cheap for the common case: one byte test for CL.THROTTLE.
func reqKind(req *server.ForwardReq) int {
	if req.Unit == nil {
		if len(req.Args) == 0 {
			return laneDecision
		}
		return laneKind(req.Args[0])
	}
	k := laneDecision
	for _, q := range req.Unit {
		if len(q) > 0 {
			k = max(k, laneKind(q[0]))
		}
	}
	return k
}

// isBulk reports whether req goes on the bulk lane: a bulk or value read,
// or a transaction with one.
func isBulk(req *server.ForwardReq) bool { return reqKind(req) != laneDecision }

// slowFirst reports whether req's first reply byte may take BulkTimeout
// (a bulk read, or a transaction with one); others get Timeout.
func slowFirst(req *server.ForwardReq) bool { return reqKind(req) == laneBulk }

// LargeReply implements server.ForwardLargeReply: a bulk or value read
// (its reply grows with what is stored). Cheap: one bit test for
// CL.THROTTLE. Any goroutine.
func (sc *Sidecar) LargeReply(args [][]byte) bool {
	return len(args) > 0 && laneKind(args[0]) != laneDecision
}
