package server

import (
	"sort"
	"sync"
	"time"
)

// Error statistics (INFO errorstats, total_error_replies) by error code, as
// Redis counts them: the code is the first word of the error text when a
// space ends it within the reply's first 32 bytes ('-' included), and "ERR"
// otherwise. The codes celld itself sends (errorKinds) have fixed atomic
// counters and cost one switch on the reply's first word; any other code —
// a script's redis.error_reply('MY_CODE ...') — is counted in customErrors
// under a mutex, up to maxErrorCodes distinct codes (a bound on memory a
// script could otherwise grow without end); codes beyond it count as
// "OTHER".

// maxErrorCodes bounds the distinct custom error codes remembered.
const maxErrorCodes = 128

// customErrors counts error codes that are not errorKinds. The zero value
// is ready; safe for concurrent use.
type customErrors struct {
	mu sync.Mutex
	m  map[string]int64 // guarded by mu
}

// errorCode returns the code of an error reply's text (after the '-'; it
// may run on past the reply's CRLF), by Redis's rule above. It aliases msg
// except for the fallback "ERR".
func errorCode(msg []byte) []byte {
	n := 0
	for n < len(msg) && msg[n] != '\r' && msg[n] != '\n' {
		n++
	}
	for i := 0; i < n && i < 31; i++ {
		if msg[i] == ' ' {
			return msg[:i]
		}
	}
	return errERR
}

var errERR = []byte("ERR")

// countError counts one error reply whose text (after the '-') is msg.
func (x *serverExt) countError(msg []byte) {
	code := errorCode(msg)
	k := codeKind(code)
	if k != errKindOther || string(code) == "OTHER" {
		x.errors[k].Add(1)
		return
	}
	x.custom.mu.Lock()
	if x.custom.m == nil {
		x.custom.m = make(map[string]int64)
	}
	if _, ok := x.custom.m[string(code)]; ok || len(x.custom.m) < maxErrorCodes {
		x.custom.m[string(code)]++
		x.custom.mu.Unlock()
		return
	}
	x.custom.mu.Unlock()
	x.errors[errKindOther].Add(1)
}

// errorCount is one line of INFO errorstats.
type errorCount struct {
	code  string
	count int64
}

// errorCounts returns every error code counted at least once, sorted by
// code as Redis's radix tree lists them.
func (x *serverExt) errorCounts() []errorCount {
	var out []errorCount
	for i := range x.errors {
		if n := x.errors[i].Load(); n > 0 {
			out = append(out, errorCount{errorKinds[i], n})
		}
	}
	x.custom.mu.Lock()
	for code, n := range x.custom.m {
		out = append(out, errorCount{code, n})
	}
	x.custom.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].code < out[j].code })
	return out
}

// totalErrors is total_error_replies.
func (x *serverExt) totalErrors() int64 {
	var n int64
	for _, e := range x.errorCounts() {
		n += e.count
	}
	return n
}

// resetStats is CONFIG RESETSTAT: it zeroes what Redis's resetServerStats,
// resetCommandTableStats and resetErrorTableStats zero — per-command calls,
// time, latency, rejected and failed calls, keyspace hits and misses, error
// counts, total_commands_processed, connections received, rejected
// connections, the ops/sec sample, the memory peak — and celld's
// CL.THROTTLE allowed/denied counts. handler_panics is kept: it reports
// bugs, not load. c is the calling client, whose own RESETSTAT counts as
// the one command processed since, as Redis counts a command when it
// returns. Concurrent commands on other connections may land on either
// side of the reset, as they would in Redis between two event loop turns.
func (s *Server) resetStats(c *client) {
	for i := range s.ext.cmds {
		for j := range s.ext.cmds[i].shards {
			sh := &s.ext.cmds[i].shards[j]
			sh.calls.Store(0)
			sh.failed.Store(0)
			sh.rejected.Store(0)
			sh.sampled.Store(0)
			sh.sampledNs.Store(0)
			sh.hits.Store(0)
			sh.misses.Store(0)
			for k := range sh.buckets {
				sh.buckets[k].Store(0)
			}
		}
	}
	for i := range s.ext.errors {
		s.ext.errors[i].Store(0)
	}
	s.ext.custom.mu.Lock()
	s.ext.custom.m = nil
	s.ext.custom.mu.Unlock()
	s.stats.connections.Store(0)
	s.dec.reset() // decisions.go
	s.stats.obufDisconnects.Store(0)
	s.dbs.ResetExpiredKeys()
	s.store.ResetEvictedKeys()
	c.pending = 0
	s.mu.Lock()
	s.closedCommands = 0
	for _, cl := range s.clients {
		cl.commands.Store(0)
	}
	s.mu.Unlock()
	c.pending = 1 // this CONFIG RESETSTAT
	rejected, _ := s.ext.listenerTotals()
	s.ext.mu.Lock()
	s.ext.rejectedBase += rejected
	s.ext.peakMem = 0
	s.ext.opsSample.at, s.ext.opsSample.commands, s.ext.opsSample.rate = time.Time{}, 0, 0
	s.ext.mu.Unlock()
	// This call itself: counted after the reset, as Redis counts it when it
	// returns (call has counted it before running it).
	s.statsOf(commands["config"].subs["resetstat"]).shard(c.id).calls.Add(1)
}
