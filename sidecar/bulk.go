package sidecar

import (
	"bytes"

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
// noticed within the decision timeout. A bulk connection that stays silent
// for the whole allowance takes its owner down like any other.

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
}

// bulkFirst has a bit per lower-case first letter of a bulk name: a
// command whose first letter has none (c for every CL.* command) is known
// not to be bulk after one load, without a string comparison.
var bulkFirst = func() (m uint32) {
	for _, n := range bulkNames {
		m |= 1 << (n[0] - 'a')
	}
	return m
}()

// isBulkName reports whether name (any case) is a bulk read.
func isBulkName(name []byte) bool {
	if len(name) < 4 {
		return false
	}
	c := name[0] | 0x20
	if c < 'a' || c > 'z' || bulkFirst&(1<<(c-'a')) == 0 {
		return false
	}
	for _, n := range bulkNames {
		if len(n) == len(name) && bytes.EqualFold(name, []byte(n)) {
			return true
		}
	}
	return false
}

// isBulk reports whether req is a bulk read, or a transaction with one.
// Cheap for the common case: one byte test for CL.THROTTLE.
func isBulk(req *server.ForwardReq) bool {
	if req.Unit == nil {
		return len(req.Args) > 0 && isBulkName(req.Args[0])
	}
	for _, q := range req.Unit {
		if len(q) > 0 && isBulkName(q[0]) {
			return true
		}
	}
	return false
}
