package server

import (
	"bytes"
	"sync"
)

// An error reply of a command a script called is counted once, when that
// command replies (call, or scriptHost.refuse); when the script passes it
// on as its own error (return redis.pcall(...), or a redis.call that
// raised), the EVAL's error reply is not counted again — EVAL's failed_calls
// still is — as Redis's ignore_error_stats_update marks such errors. celld
// recognises a passed-on error by its text: the EVAL's error line starts
// with the text of an error a called command gave since the EVAL began
// (Redis appends " script: ..." to a raised one).
//
// scriptErrLog remembers the last few of those error texts. Only error
// paths touch it. Scripts that run at the same time (one-command scripts
// under the isolation read lock) share it: an error of another script seen
// by this one has the same text as its own, so the decision stays right.

// scriptErrRing is how many recent error texts are kept.
const scriptErrRing = 8

// maxScriptErrText bounds the text kept of each error.
const maxScriptErrText = 128

// scriptErrLog is safe for concurrent use; the zero value is ready.
type scriptErrLog struct {
	mu   sync.Mutex
	seq  uint64 // errors noted, ever
	ring [scriptErrRing][]byte
}

// mark returns the count of errors noted so far, for since.
func (l *scriptErrLog) mark() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seq
}

// note records an error reply (from its '-', CRLF ends it).
func (l *scriptErrLog) note(reply []byte) {
	line := reply[1:]
	if i := bytes.IndexByte(line, '\r'); i >= 0 {
		line = line[:i]
	}
	if len(line) > maxScriptErrText {
		line = line[:maxScriptErrText]
	}
	l.mu.Lock()
	slot := &l.ring[l.seq%scriptErrRing]
	*slot = append((*slot)[:0], line...)
	l.seq++
	l.mu.Unlock()
}

// since reports whether an error noted after mark returned seq begins the
// error reply (from its '-').
func (l *scriptErrLog) since(seq uint64, reply []byte) bool {
	line := reply[1:]
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seq-seq > scriptErrRing {
		seq = l.seq - scriptErrRing
	}
	for i := seq; i < l.seq; i++ {
		if t := l.ring[i%scriptErrRing]; len(t) > 0 && bytes.HasPrefix(line, t) {
			return true
		}
	}
	return false
}
