package kinds

import "unsafe"

// A Hash's forms and its journal. A Hash is one pointer, x, whose low two
// bits say what it points at:
//
//	hxPlain  compact, records nothing: x is the block (nil: none)
//	hxIdle   compact, recording, nothing recorded since the last start or
//	         take: x is the block + hxIdle (never nil)
//	hxOwn    compact with a journal of its own (records waiting for the
//	         next take, or a kept buffer): x is a *hashOwn + hxOwn
//	hxFull   full: x is the *hashFull + hxFull, which holds the journal
//
// So a compact hash that is not between a recorded write and the next
// take (every hash small enough to be written as an image at each drain,
// store/journal.go's smallImage, and every hash at rest) costs its 8-byte
// struct and its block, where a journal pointer of its own took 8 bytes
// more. A hashOwn (80 bytes: the journal, the block's pointer and the
// record buffer with its first 40 bytes inline, one allocation where the
// journal's buffer alone took 64) is made by a window's first recorded
// write and dropped by the take that ends the window, so at a write's
// start the hash's pointer leads to its block (the store's prefetch
// starts it) rather than to a kept buffer. Neither it nor a grown record
// buffer is in Size, which changes only with writes (the store charges
// Size's changes around each write, and the journal's transitions happen
// in its drain). A tagged pointer still points into its allocation (every
// block is at least 8 bytes), so the garbage collector keeps it alive,
// and unsafe.Add takes the tag off.
const (
	hxPlain = 0
	hxFull  = 1
	hxIdle  = 2
	hxOwn   = 3
)

// hashOwn is a compact Hash's journal of its own, and its block.
type hashOwn struct {
	journal
	blk unsafe.Pointer
	buf jbuf // the journal's record buffer (journal.p == &buf) once recording
}

// form is h's form (hxPlain, hxFull, hxIdle or hxOwn).
func (h *Hash) form() uintptr { return uintptr(h.x) & 3 }

// compact reports whether h is in its compact form (no load).
func (h *Hash) compact() bool { return h.form() != hxFull }

// full is a full h's form.
func (h *Hash) full() *hashFull { return (*hashFull)(unsafe.Add(h.x, -hxFull)) }

// setFullForm makes f h's form (its journal is f's).
func (h *Hash) setFullForm(f *hashFull) { h.x = unsafe.Add(unsafe.Pointer(f), hxFull) }

// own is the journal and block of h in the hxOwn form.
func (h *Hash) own() *hashOwn { return (*hashOwn)(unsafe.Add(h.x, -hxOwn)) }

// blk is a compact h's block (nil: none).
func (h *Hash) blk() unsafe.Pointer {
	switch h.form() {
	case hxPlain:
		return h.x
	case hxIdle:
		return unsafe.Add(h.x, -hxIdle)
	case hxOwn:
		return h.own().blk
	}
	return nil
}

// setBlk makes b (nil: none) a compact h's block, in the same form.
func (h *Hash) setBlk(b unsafe.Pointer) {
	switch h.form() {
	case hxPlain:
		h.x = b
	case hxIdle:
		if b == nil { // idle with no block: the form that can say so
			h.x = unsafe.Add(unsafe.Pointer(&hashOwn{journal: journal{journalIdle}}), hxOwn)
			return
		}
		h.x = unsafe.Add(b, hxIdle)
	case hxOwn:
		h.own().blk = b
	}
}

// jrn is h's journal when h holds one in memory (the hxOwn and hxFull
// forms), else nil.
func (h *Hash) jrn() *journal {
	switch h.form() {
	case hxOwn:
		return &h.own().journal
	case hxFull:
		return &h.full().journal
	}
	return nil
}

// settle moves a compact h in the hxOwn form whose journal holds nothing
// of its own (idle, or stopped) back to the form that says so without the
// hashOwn.
func (h *Hash) settle() {
	if h.form() != hxOwn {
		return
	}
	o := h.own()
	switch {
	case o.journal.p == nil:
		h.x = o.blk
	case o.journal.p == journalIdle && o.blk != nil:
		h.x = unsafe.Add(o.blk, hxIdle)
	}
}

// takeCompactJournal is a compact h's journal, for the full form it moves
// to (toFull).
func (h *Hash) takeCompactJournal() journal {
	switch h.form() {
	case hxIdle:
		return journal{journalIdle}
	case hxOwn:
		return h.own().journal
	}
	return journal{}
}

// recording reports whether a write must be recorded.
func (h *Hash) recording() bool {
	switch h.form() {
	case hxPlain:
		return false
	case hxIdle:
		return true
	}
	return h.jrn().recording()
}

// ownJournal is h's journal, a compact h's of its own made first when it
// has none (hxIdle). Only while recording.
func (h *Hash) ownJournal() *journal {
	if h.form() == hxIdle {
		o := &hashOwn{blk: unsafe.Add(h.x, -hxIdle)}
		o.buf.recs = o.buf.small[:0]
		o.journal.p = &o.buf
		h.x = unsafe.Add(unsafe.Pointer(o), hxOwn)
	}
	return h.jrn()
}

func (h *Hash) rec1(tag byte, s string, size int64) { h.ownJournal().rec1(tag, s, size) }

func (h *Hash) rec2(tag byte, a, b string, size int64) { h.ownJournal().rec2(tag, a, b, size) }

// StartJournal drops anything recorded and records every later write
// (journal.StartJournal).
func (h *Hash) StartJournal() {
	switch h.form() {
	case hxPlain:
		if h.x == nil {
			h.x = unsafe.Add(unsafe.Pointer(&hashOwn{journal: journal{journalIdle}}), hxOwn)
		} else {
			h.x = unsafe.Add(h.x, hxIdle)
		}
	case hxOwn:
		h.own().journal.p = journalIdle // nothing kept between windows
		h.settle()
	case hxFull:
		h.full().StartJournal()
	}
}

// StopJournal drops anything recorded and records nothing more
// (journal.StopJournal).
func (h *Hash) StopJournal() {
	switch h.form() {
	case hxIdle:
		h.x = unsafe.Add(h.x, -hxIdle)
	case hxOwn:
		h.x = h.own().blk
	case hxFull:
		h.full().StopJournal()
	}
}

// TakeJournal appends what was recorded since the last start or take to
// b (journal.TakeJournal); unlike the other kinds' it keeps no record
// buffer for the next window.
func (h *Hash) TakeJournal(b []byte) (_ []byte, ok bool) {
	switch h.form() {
	case hxPlain:
		return b, false
	case hxIdle:
		return b, true
	case hxFull:
		return h.full().TakeJournal(b)
	}
	o := h.own()
	b, ok = o.TakeJournal(b)
	if ok {
		o.journal.p = journalIdle // nothing kept between windows (see above)
	}
	h.settle()
	return b, ok
}
