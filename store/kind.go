package store

import "errors"

// Kind is what a key holds. A key holds one kind at a time; commands of
// another kind get ErrWrongType (Redis's WRONGTYPE). KindString, the zero
// value, is every key CL.THROTTLE and SET write: a TAT or any string, kept
// in the entry itself (tat, or raw text), so the TAT path reads no more
// than it did before kinds existed. The other kinds keep their state beside
// the entry; the entry carries the tag.
type Kind uint8

// The kinds. Their numbers are stored in entry.flags (and may be persisted
// by the layers that persist them): never renumber, only append.
const (
	KindString Kind = iota // TATs and strings
	KindHash
	KindList
	KindZSet
	KindWindow // CL.WINDOW state (windows.md)
	numKinds
)

// String is the kind's name as TYPE replies it (Redis's for Redis's kinds).
func (k Kind) String() string {
	switch k {
	case KindString:
		return "string"
	case KindHash:
		return "hash"
	case KindList:
		return "list"
	case KindZSet:
		return "zset"
	case KindWindow:
		return "cl.window"
	}
	return "none"
}

// ErrWrongType: the key holds another kind of value than the operation
// works on; nothing was read or written. The server answers it with
// Redis's "WRONGTYPE Operation against a key holding the wrong kind of
// value".
var ErrWrongType = errors.New("store: key holds the wrong kind of value")

// The kind lives in entry.flags bits 4-7 (the value flags are bits 0-3, the
// LRU clock bits 8-31: evict.go).
const (
	kindShift = 4
	kindMask  = 0xF << kindShift
)

func kindFlags(k Kind) uint32 { return uint32(k) << kindShift }

func (e *entry) kind() Kind { return Kind(e.flags & kindMask >> kindShift) }

// unreadableErr is the error of a TAT operation on an entry whose flags
// have flagInvalid or a kind set (the caller tested flagInvalid|kindMask,
// one branch on the hot path): ErrWrongType for another kind,
// ErrInvalidValue for a string that is not a TAT.
func (e *entry) unreadableErr() error {
	if e.flags&kindMask != 0 {
		return ErrWrongType
	}
	return ErrInvalidValue
}

// retimeLocked sets slot's expiry, keeping its value and kind, as a write
// (version, dirty mark, LRU clock). Requires sh.mu.
func (sh *shard) retimeLocked(slot uint32, exp int64, nowMs int64) {
	e := &sh.slab[slot]
	sh.seq++
	e.exp, e.ver = exp, sh.seq
	e.flags = e.flags&(1<<lruShift-1) | lruFlags(nowMs)
	if sh.track && e.flags&flagDirty == 0 {
		e.flags |= flagDirty
		sh.dirty = append(sh.dirty, slot)
		sh.noteDirtyTailLocked()
	}
	if sh.rl != nil {
		sh.rl.noteWrite(slot, e, sh.keyOf(e))
	}
}

// dropKindLocked releases whatever a key of a non-string kind keeps beside
// its entry (and its memory charge), when the key is deleted or overwritten
// by another kind. Each kind's storage adds its case here. Requires sh.mu.
func (sh *shard) dropKindLocked(slot uint32) {
	sh.dropWindowLocked(slot) // window.go
	sh.dropObjectLocked(slot) // hashes, lists, sorted sets (object.go)
}
