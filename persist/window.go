package persist

import (
	"encoding/binary"
	"fmt"
)

// Kinds of stored values beyond strings and TATs. A CL.WINDOW key's state
// (store.KindWindow, the window package's encoding: a mode byte and a few
// counters or log entries) is its own entry, so that a restore gives it
// back as a window key, never as a string:
//
//	window: 'w' uvarint(len(key)) key varint(ExpireAtMs) uvarint(len(state)) state
//
// Directories written before windows existed hold no 'w' entry and restore
// unchanged; a celld without this file would refuse a 'w' entry as an
// unknown entry kind (ErrCorrupt) rather than misread it.
const entryWindow = 'w'

// Kind says what a restored value is: the callback of ReplayAll gets it
// with every entry.
type Kind uint8

const (
	// KindString: the value is a string's text (a TAT's decimal text for
	// 't' entries), as Replay passes it.
	KindString Kind = iota
	// KindWindow: the value is a CL.WINDOW state ('w' entries; Op.Window).
	KindWindow
)

// entryFunc receives one decoded entry (decodeChunk, ReplayAll).
type entryFunc func(dbid uint32, key, value []byte, exp int64, kind Kind, deleted bool) error

// appendWindow appends a window entry to b: a compact 'f' or 'c' entry
// for a FIXED or SLIDING state (window_compact.go), else a 'w' entry.
func appendWindow(b, key, state []byte, exp int64) []byte {
	if tag, span, prev, curr, ok := compactWindow(state, exp); ok {
		return appendCompactWindow(b, tag, key, exp, span, prev, curr)
	}
	b = append(b, entryWindow)
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	b = binary.AppendVarint(b, exp)
	b = binary.AppendUvarint(b, uint64(len(state)))
	return append(b, state...)
}

// windowEntrySize is the encoded size of a window op.
func windowEntrySize(op *Op) int {
	if tag, span, prev, curr, ok := compactWindow(op.Value, op.ExpireAtMs); ok {
		return compactWindowSize(tag, op.Key, op.ExpireAtMs, span, prev, curr)
	}
	return 1 + uvarintLen(uint64(len(op.Key))) + len(op.Key) + varintLen(op.ExpireAtMs) +
		uvarintLen(uint64(len(op.Value))) + len(op.Value)
}

// decodeWindow decodes a 'w' entry's fields after its key, at chunk[off:]:
// the expiry and the state (aliasing chunk), and the offset past them.
func decodeWindow(chunk, key []byte, off int) (exp int64, state []byte, end int, err error) {
	exp, n := binary.Varint(chunk[off:])
	if n <= 0 {
		return 0, nil, 0, fmt.Errorf("bad expiry of window key %q", key)
	}
	off += n
	slen, n := binary.Uvarint(chunk[off:])
	if n <= 0 || slen > uint64(len(chunk)-off-n) {
		return 0, nil, 0, fmt.Errorf("bad state length of window key %q", key)
	}
	off += n
	return exp, chunk[off : off+int(slen) : off+int(slen)], off + int(slen), nil
}

// AddWindow is Add for a CL.WINDOW key: state is its encoded window state
// (store.Change.Text of a KindWindow change). key and state are copied.
func (w *BaseWriter) AddWindow(key, state []byte, expireAtMs int64) {
	w.buf = appendDBPrefix(w.buf, w.dbid)
	w.buf = appendWindow(w.buf, key, state, expireAtMs)
	w.added()
}

// AddWindowCounters is AddWindow for a FIXED (mode 2) or SLIDING (mode 3)
// state given as numbers (store.Change.WinMode, as DumpShard gives an
// inline window key): the entry AddWindow writes for the state's bytes
// (Encoder.WindowCounters). key is copied.
func (w *BaseWriter) AddWindowCounters(key []byte, mode byte, start int64, prev, curr uint64, expireAtMs int64) {
	w.buf = appendDBPrefix(w.buf, w.dbid)
	w.buf = appendWindowCounters(w.buf, key, mode, start, prev, curr, expireAtMs)
	w.added()
}
