package data

import (
	"github.com/celld/celld/kinds"
	"github.com/celld/celld/server"
	"github.com/celld/celld/store"
)

// LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]: Redis 7's
// longest common subsequence of two strings (kinds.LCS), with its errors
// and reply shapes. Both keys are read under their shard locks together
// (store.GetMany), then the table is built without locks: O(len1·len2)
// time, and its 4·(len1+1)·(len2+1) bytes are refused above
// proto-max-bulk-len, as Redis refuses them.

func init() {
	server.Register(server.Command{Name: "lcs", Arity: -3, Flags: "readonly", FirstKey: 1, LastKey: 2, Step: 1,
		ACL: "read string slow", Group: "string", Since: "7.0.0", Summary: "Finds the longest common substring.", Run: cmdLCS})
}

func cmdLCS(x *server.Ctx) {
	args := x.Args()
	var a, b string
	wrong := false
	x.Store().GetMany(args[1:3], x.NowMs(), func(i int, v store.Value, ok bool) {
		switch {
		case !ok:
		case v.Kind != store.KindString:
			wrong = true
		case i == 0:
			a = string(v.AppendText(nil))
		default:
			b = string(v.AppendText(nil))
		}
	})
	if wrong {
		x.Error("ERR The specified keys must contain string values")
		return
	}
	var getLen, getIdx, withLen bool
	var minLen int64
	for j := 3; j < len(args); j++ {
		more := len(args) - 1 - j
		switch {
		case is(args[j], "idx"):
			getIdx = true
		case is(args[j], "len"):
			getLen = true
		case is(args[j], "withmatchlen"):
			withLen = true
		case is(args[j], "minmatchlen") && more > 0:
			n, ok := parseInt(args[j+1])
			if !ok {
				x.Error(errNotInt)
				return
			}
			minLen = max(n, 0)
			j++
		default:
			x.Error(errSyntaxText)
			return
		}
	}
	if getIdx && getLen {
		x.Error("ERR If you want both the length and indexes, please just use IDX.")
		return
	}
	if kinds.LCSTableBytes(len(a), len(b)) > uint64(x.MaxBulk()) {
		x.Error("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len")
		return
	}
	n, lcs, matches := kinds.LCS(a, b, getIdx || !getLen, minLen)
	switch {
	case getIdx:
		x.Map(2)
		x.BulkString("matches")
		x.Array(len(matches))
		for _, m := range matches {
			if withLen {
				x.Array(3)
			} else {
				x.Array(2)
			}
			x.Array(2)
			x.Int(int64(m.AStart))
			x.Int(int64(m.AEnd))
			x.Array(2)
			x.Int(int64(m.BStart))
			x.Int(int64(m.BEnd))
			if withLen {
				x.Int(int64(m.Len))
			}
		}
		x.BulkString("len")
		x.Int(int64(n))
	case getLen:
		x.Int(int64(n))
	default:
		x.Bulk(lcs)
	}
}
