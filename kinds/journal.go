package kinds

import (
	"encoding/binary"
	"errors"
	"math"
	"unsafe"
)

// Journals: a value's writes recorded element by element, so that
// persistence can write what a command changed instead of the whole value
// (a ZADD of one member to a set of a million writes one member). The
// store starts a value's journal once the value's image is on disk
// (StartJournal), and from then on takes what was recorded once per flush
// window (TakeJournal); replaying those records in order on that image
// (ApplyJournal) gives the value back exactly. A value whose journal was
// never started records nothing and costs nothing.
//
// A journal is bounded: once its records pass journalLimit bytes (or an
// eighth of the value's Size, whichever is larger) it is abandoned, and
// the next take reports that the whole image must be written instead, as a
// change that large costs about as much as the image anyway. So a journal
// never holds more than about one window's worth of changes, and never
// much more than an eighth of its value.
//
// Records (each a tag byte and its operands; strings are uvarint(len)
// bytes, numbers uvarints, scores 8-byte little-endian float64):
//
//	hash:  'S' field value          HSET
//	       'D' field                HDEL
//	zset:  'S' score member         ZADD, ZINCRBY (the new score)
//	       'D' member               ZREM, ZREMRANGEBY*, ZPOP*
//	list:  'L' item                 LPUSH
//	       'R' item                 RPUSH
//	       'l'                      LPOP (one item)
//	       'r'                      RPOP (one item)
//	       'T' index item           LSET
//	       'I' index item           LINSERT (before index)
//	       'F' count index*         LREM (the removed indices, ascending)
//	       'M' start stop           LTRIM
//	       'C'                      emptied

// journalLimit is the smallest bound of a journal, in bytes.
const journalLimit = 64 << 10

// ErrBadJournal: records that do not apply to the value (damaged, or
// written for another value of the same key; see ApplyJournal).
var ErrBadJournal = errors.New("kinds: journal does not apply")

// journal is the recorder embedded in each kind (its StartJournal and
// TakeJournal are the kind's): one pointer, so that a value that records
// nothing pays 8 bytes for it. nil records nothing; journalIdle records
// but holds nothing yet (every value whose image is on disk, until its
// next write); a value's first write after a take gives it a jbuf of its
// own, which a take keeps for the next window while it is small.
type journal struct{ p *jbuf }

// jbuf holds a journal's records since the last start or take (its own
// bytes: never a value's). A window's first records go into small, in the
// same 64-byte allocation, so a drain reading them misses one cache line
// fewer than with a separate buffer.
type jbuf struct {
	recs  []byte
	small [40]byte
}

// journalIdle is the shared state of every started journal with nothing
// recorded: never written (out gives the writer a jbuf of its own first).
var journalIdle = &jbuf{}

// keptRecs is the largest record buffer a take keeps for the next window.
const keptRecs = 256

// StartJournal drops anything recorded and records every later write.
func (j *journal) StartJournal() {
	if j.p != nil && j.p != journalIdle && cap(j.p.recs) <= keptRecs {
		j.p.recs = j.p.recs[:0]
		return
	}
	j.p = journalIdle
}

// StopJournal drops anything recorded and records nothing more (until the
// next StartJournal): the store does this for values so small that their
// image costs no more to persist than their records (store/journal.go).
func (j *journal) StopJournal() { j.p = nil }

// TakeJournal appends the records made since StartJournal or the previous
// TakeJournal to b and goes on recording. ok is false (and b unchanged)
// when there is no complete record: the journal was never started, or it
// outgrew its bound and was abandoned; recording has stopped then, and the
// caller must write the whole image and StartJournal again.
func (j *journal) TakeJournal(b []byte) (_ []byte, ok bool) {
	switch {
	case j.p == nil:
		return b, false
	case j.p == journalIdle:
		return b, true
	}
	b = append(b, j.p.recs...)
	if cap(j.p.recs) > keptRecs {
		j.p = journalIdle // a burst's buffer is not kept
	} else {
		j.p.recs = j.p.recs[:0]
	}
	return b, true
}

// addr is the address of j's own record buffer (nil when j has none: not
// recording, or recording with nothing recorded since the last take), for
// the store's prefetch: the next write's record goes there, and the next
// take reads it. Its first line holds the slice header and the first 40
// record bytes.
func (j *journal) addr() unsafe.Pointer {
	if j.p == nil || j.p == journalIdle {
		return nil
	}
	return unsafe.Pointer(j.p)
}

// recording reports whether a write must be recorded.
func (j *journal) recording() bool { return j.p != nil }

// out is the journal's own record buffer, made on the first record after
// a start or take. Only while recording.
func (j *journal) out() *jbuf {
	if j.p == journalIdle {
		r := &jbuf{}
		r.recs = r.small[:0]
		j.p = r
	}
	return j.p
}

// check abandons the journal once it passes its bound (size is the
// value's Size).
func (j *journal) check(size int64) {
	if len(j.p.recs) > journalLimit && int64(len(j.p.recs)) > size/8 {
		j.p = nil
	}
}

// room makes space for n more record bytes and returns the buffer: past
// the inline bytes it allocates once per doubling (at least 32 bytes)
// instead of growing in append's small steps.
func (j *journal) room(n int) *jbuf {
	r := j.out()
	if cap(r.recs)-len(r.recs) < n {
		nr := make([]byte, len(r.recs), allocSize(max(32, 2*cap(r.recs), len(r.recs)+n)))
		copy(nr, r.recs)
		r.recs = nr
	}
	return r
}

func (j *journal) rec1(tag byte, s string, size int64) {
	r := j.room(1 + binary.MaxVarintLen64 + len(s))
	r.recs = append(r.recs, tag)
	r.recs = appendStr(r.recs, s)
	j.check(size)
}

func (j *journal) rec2(tag byte, a, b string, size int64) {
	r := j.room(1 + 2*binary.MaxVarintLen64 + len(a) + len(b))
	r.recs = append(r.recs, tag)
	r.recs = appendStr(r.recs, a)
	r.recs = appendStr(r.recs, b)
	j.check(size)
}

// ApplyJournal replays records taken from a journal of obj's kind (a
// *Hash, *List or *ZSet) on obj, in order. Records that do not decode or
// do not fit obj (an index past its end) stop it with ErrBadJournal; the
// records before them stay applied. Replaying never records.
func ApplyJournal(obj any, recs []byte) error {
	r := reader{b: recs}
	for len(r.b) > 0 && !r.bad {
		tag := r.b[0]
		r.b = r.b[1:]
		var ok bool
		switch o := obj.(type) {
		case *Hash:
			ok = o.apply(tag, &r)
		case *List:
			ok = o.apply(tag, &r)
		case *ZSet:
			ok = o.apply(tag, &r)
		}
		if !ok || r.bad {
			return ErrBadJournal
		}
	}
	return nil
}

func (r *reader) score() float64 {
	if len(r.b) < 8 {
		r.bad = true
		return 0
	}
	s := math.Float64frombits(binary.LittleEndian.Uint64(r.b))
	r.b = r.b[8:]
	return s
}

// index reads a list index below n.
func (r *reader) index(n int) (int, bool) {
	i := r.uvarint()
	if r.bad || i >= uint64(n) {
		return 0, false
	}
	return int(i), true
}

func (h *Hash) apply(tag byte, r *reader) bool {
	switch tag {
	case 'S':
		f := r.str()
		v := r.str()
		if !r.bad {
			h.set(f, v)
		}
	case 'D':
		if f := r.str(); !r.bad {
			h.del(f, false)
		}
	default:
		return false
	}
	return true
}

func (z *ZSet) apply(tag byte, r *reader) bool {
	saved := z.journal.p
	z.journal.p = nil
	defer func() { z.journal.p = saved }()
	switch tag {
	case 'S':
		s := r.score()
		m := r.str()
		if r.bad || math.IsNaN(s) {
			return false
		}
		z.Set(m, s)
	case 'D':
		if m := r.str(); !r.bad {
			z.Remove(m)
		}
	default:
		return false
	}
	return true
}

func (l *List) apply(tag byte, r *reader) bool {
	saved := l.journal.p
	l.journal.p = nil
	defer func() { l.journal.p = saved }()
	switch tag {
	case 'L', 'R':
		s := r.str()
		if r.bad || int(l.n) >= MaxElements {
			return false
		}
		if tag == 'L' {
			l.PushFront(s)
		} else {
			l.PushBack(s)
		}
	case 'l', 'r':
		if int(l.n) == 0 {
			return false
		}
		if tag == 'l' {
			l.PopFront()
		} else {
			l.PopBack()
		}
	case 'T':
		i, ok := r.index(int(l.n))
		s := r.str()
		if !ok || r.bad {
			return false
		}
		l.SetAt(i, s)
	case 'I':
		i, ok := r.index(int(l.n) + 1)
		s := r.str()
		if !ok || r.bad || int(l.n) >= MaxElements {
			return false
		}
		l.InsertAt(i, s)
	case 'F':
		n := r.count(1)
		idx := make([]int, 0, n)
		for k := 0; k < n; k++ {
			i, ok := r.index(int(l.n))
			if !ok || (k > 0 && i <= idx[k-1]) {
				return false
			}
			idx = append(idx, i)
		}
		k := 0
		l.Filter(func(i int, _ string) bool {
			if k < len(idx) && idx[k] == i {
				k++
				return false
			}
			return true
		})
	case 'M':
		start, ok1 := r.index(int(l.n))
		stop, ok2 := r.index(int(l.n))
		if !ok1 || !ok2 || stop < start {
			return false
		}
		l.Trim(start, stop)
	case 'C':
		l.Clear()
	default:
		return false
	}
	return true
}
