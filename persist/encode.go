package persist

import (
	"encoding/binary"
	"hash/crc32"
)

// Encoder takes a window's changes and encodes each one straight into the
// change log's record buffer, in the log's format (format.go): record
// headers are reserved as it goes and filled in by DB.WriteEncoded. This
// is the write path of a window: the drain hands each change to an Add
// method while it still holds the store's lock, and nothing is kept per
// change but its encoding (no Op, no copy of the key). The bytes written
// for a sequence of Adds are exactly those DB.Write writes for the same
// changes as Ops (TestEncoderMatchesWrite).
//
// When a write fails, the Flusher decodes the encoder's entries back into
// Ops for its pending set (EachOp), so the failure path is unchanged.
//
// An Encoder is used by one goroutine at a time (the Flusher's, under its
// lock). The zero value is ready to use. Cost per Add: the entry's bytes
// appended to a reused buffer; a new record (rare: maxRecord) costs a
// move of one entry.
type Encoder struct {
	buf []byte
	// rec is where the current record's header starts in buf (-1: none
	// started since Reset).
	rec     int
	ops     int
	deletes int64
	// db is the database of the next Adds (SetDB).
	db uint32
	// sealed: headers carry seqs (WriteEncoded); Adds must not follow.
	sealed bool
	// last is the size of the latest non-empty window's records: the
	// next window's buffer is sized from it up front.
	last int
}

// Reset empties e for the next window and selects database 0. It keeps
// the buffer unless it outgrew logBufRetain (a bulk window), and makes
// sure it has room for the latest window's size and a quarter more: a
// buffer grown by append from small to a busy window's ~10 MB copies
// itself some 25 times (a quarter of a loaded server's CPU under a SET
// spray, when windows stretch); sized up front it is allocated once.
func (e *Encoder) Reset() {
	if len(e.buf) > 0 {
		e.last = len(e.buf)
	}
	if cap(e.buf) > logBufRetain {
		e.buf = nil
	}
	// A bulk window's size is not wanted again: past logBufRetain the
	// buffer doubles as it fills (copying less than it holds).
	if want := min(e.last+e.last/4, logBufRetain); cap(e.buf) < want {
		e.buf = make([]byte, 0, want)
	}
	e.buf, e.rec, e.ops, e.deletes, e.db, e.sealed = e.buf[:0], -1, 0, 0, 0, false
}

// Len is the number of changes added since Reset.
func (e *Encoder) Len() int { return e.ops }

// Bytes is the size of the encoded records so far, headers included.
func (e *Encoder) Bytes() int { return len(e.buf) }

// SetDB makes the following Adds entries of database id (Op.DB).
func (e *Encoder) SetDB(id uint32) { e.db = id }

// begin makes room for an entry of at most n bytes (and a record header),
// reserves the first record's header when none is open, and returns where
// the entry starts.
func (e *Encoder) begin(n int) int {
	if n += 2 * recordHeaderLen; cap(e.buf)-len(e.buf) < n {
		// Doubling: append's growth of a large slice (a quarter at a
		// time) would copy a big window's bytes several times over.
		b := make([]byte, len(e.buf), max(2*cap(e.buf), len(e.buf)+n, 64<<10))
		copy(b, e.buf)
		e.buf = b
	}
	if e.rec < 0 || len(e.buf) == 0 {
		e.rec = len(e.buf)
		e.buf = append(e.buf, make([]byte, recordHeaderLen)...)
	}
	return len(e.buf)
}

// added counts the entry that starts at start and, when it took the
// record past maxRecord and is not the record's first, moves it into a
// new record (the split DB.Write makes).
func (e *Encoder) added(start int) {
	e.ops++
	if len(e.buf)-e.rec-recordHeaderLen <= maxRecord || start == e.rec+recordHeaderLen {
		return
	}
	end := len(e.buf)
	e.closeRecord(start)
	e.buf = append(e.buf, make([]byte, recordHeaderLen)...)
	copy(e.buf[start+recordHeaderLen:], e.buf[start:end])
	clear(e.buf[start : start+recordHeaderLen])
	e.rec = start
}

// winEntryHead bounds a 'w' entry's bytes besides its key and state when
// both are under 128 bytes (Encoder.Window's first path): the tag, two
// one-byte lengths and the expiry's varint.
const winEntryHead = 3 + binary.MaxVarintLen64

// entryHeadMax bounds an entry's bytes besides its key and value: a
// database prefix, a tag, the lengths, an expiry, a kind, a generation or
// an 8-byte TAT.
const entryHeadMax = 64

// closeRecord writes the open record's payload length, its payload
// ending at end.
func (e *Encoder) closeRecord(end int) {
	if e.rec >= 0 && e.rec < len(e.buf) {
		binary.LittleEndian.PutUint32(e.buf[e.rec:], uint32(end-e.rec-recordHeaderLen))
	}
}

// Delete adds key's deletion.
func (e *Encoder) Delete(key []byte) {
	s := e.begin(len(key) + entryHeadMax)
	e.buf = appendDBPrefix(e.buf, e.db)
	e.buf = append(e.buf, entryDelete)
	e.buf = binary.AppendUvarint(e.buf, uint64(len(key)))
	e.buf = append(e.buf, key...)
	e.deletes++
	e.added(s)
}

// TAT adds key holding tat (the decimal text of it) until exp.
//
// Cost: CL.THROTTLE's entry (database 0, a key under 128 bytes, an
// expiry within a byte of the TAT: an 'r' entry) is stored in place,
// without append's checks per field; when a record is open and the
// buffer has room for it (every entry of a window but the first and those
// after a buffer growth or a record split), also without begin's and
// added's checks: BenchmarkEncodeSealTATs 9.8 -> 8.7 ns per key.
func (e *Encoder) TAT(key []byte, tat uint64, exp int64) {
	// The 'r' entry into the open record, byte for byte what the path
	// below writes (TestEncoderMatchesWrite): the record is open and not
	// the first entry's (no header to reserve), the buffer has the
	// entry's room (no growth) and the record stays within maxRecord (no
	// split), all tested up front.
	if n, s := len(key), len(e.buf); e.db == 0 && n < 0x80 && e.rec >= 0 && s > 0 &&
		cap(e.buf)-s >= n+11 && s+n+11-e.rec-recordHeaderLen <= maxRecord {
		if d, ok := tatRel(tat, exp); ok {
			putTATRel(e.buf[s:s+n+11], key, tat, d)
			e.buf = e.buf[:s+n+11]
			e.ops++
			return
		}
	}
	s := e.begin(len(key) + entryHeadMax)
	if d, ok := tatRel(tat, exp); ok && e.db == 0 && len(key) < 0x80 {
		putTATRel(e.buf[s:s+len(key)+11], key, tat, d) // begin made room for it
		e.buf = e.buf[:s+len(key)+11]
	} else {
		e.buf = appendDBPrefix(e.buf, e.db)
		e.buf = appendTAT(e.buf, key, tat, exp)
	}
	e.added(s)
}

// Text adds key holding value, a text known not to be a canonical decimal
// (Op.Verbatim), until exp.
func (e *Encoder) Text(key, value []byte, exp int64) {
	s := e.begin(len(key) + len(value) + entryHeadMax)
	e.buf = appendDBPrefix(e.buf, e.db)
	e.buf = appendText(e.buf, key, value, exp)
	e.added(s)
}

// Set adds key holding value until exp (a canonical decimal is written
// as a TAT, as DB.Write does).
func (e *Encoder) Set(key, value []byte, exp int64) {
	s := e.begin(len(key) + len(value) + entryHeadMax)
	e.buf = appendDBPrefix(e.buf, e.db)
	e.buf = appendSet(e.buf, key, value, exp)
	e.added(s)
}

// Window adds key holding a CL.WINDOW state (Op.Window).
//
// Cost: the entry's bytes. The drain's common window entry, a LOG state
// (a 'w' entry: never a compact one) of a key and a state under 128 bytes
// each in database 0, is written in place into the open record, byte for
// byte what the path below writes (TestEncoderWindowFastPath,
// TestEncoderMatchesWrite), as TAT's first path: the record is open and
// not the first entry's, the buffer has room for the longest such entry
// and the record stays within maxRecord with it, all tested up front.
func (e *Encoder) Window(key, state []byte, exp int64) {
	if n, m, s := len(key), len(state), len(e.buf); e.db == 0 && n < 0x80 && 0 < m && m < 0x80 &&
		state[0] != winModeFixed && state[0] != winModeSliding && e.rec >= 0 && s > 0 &&
		cap(e.buf)-s >= n+m+winEntryHead && s+n+m+winEntryHead-e.rec-recordHeaderLen <= maxRecord {
		b := e.buf[s : s+n+m+winEntryHead]
		b[0], b[1] = entryWindow, byte(n)
		i := 2 + copy(b[2:], key)
		i += binary.PutVarint(b[i:], exp)
		b[i] = byte(m)
		i += 1 + copy(b[i+1:], state)
		e.buf = e.buf[:s+i]
		e.ops++
		return
	}
	s := e.begin(len(key) + len(state) + entryHeadMax)
	e.buf = appendDBPrefix(e.buf, e.db)
	e.buf = appendWindow(e.buf, key, state, exp)
	e.added(s)
}

// WindowCounters is Window for a FIXED (mode 2, prev 0) or SLIDING (mode 3)
// state given as its numbers (store.Change.WinMode): the entry Window
// writes for the state's bytes (window_compact.go's 'f' or 'c', or a 'w'
// entry for numbers a compact entry cannot hold exactly), without
// encoding those bytes only to decode them again. Cost: the entry's bytes,
// as TAT's.
func (e *Encoder) WindowCounters(key []byte, mode byte, start int64, prev, curr uint64, exp int64) {
	// The compact entry into the open record, byte for byte what the
	// path below writes (TestWindowCountersMatchesWindow,
	// TestEncoderMatchesWrite), as TAT's first path: the record is open
	// and not the first entry's, the buffer has room for the longest such
	// entry and the record stays within maxRecord with it, all tested up
	// front. What a drain of FIXED or SLIDING keys takes for every key
	// after a record's first.
	if n, s := len(key), len(e.buf); e.db == 0 && n < 0x80 && e.rec >= 0 && s > 0 &&
		cap(e.buf)-s >= n+compactWindowMax && s+n+compactWindowMax-e.rec-recordHeaderLen <= maxRecord {
		if mode != winModeSliding {
			mode, prev = winModeFixed, 0
		}
		if span, ok := compactSpan(start, prev, curr, exp); ok {
			e.buf = e.buf[:s+putCompactWindow(e.buf[s:s+n+compactWindowMax], mode, key, exp, span, prev, curr)]
			e.ops++
			return
		}
	}
	s := e.begin(len(key) + winSlidingLen + entryHeadMax)
	e.buf = appendDBPrefix(e.buf, e.db)
	e.buf = appendWindowCounters(e.buf, key, mode, start, prev, curr, exp)
	e.added(s)
}

// Object adds key holding an object of kind (a hash, list or sorted set)
// whose whole content is image, of generation gen (0: none), as an Op
// with Kind, TAT gen and Object image.
func (e *Encoder) Object(key []byte, kind byte, gen uint64, image []byte, exp int64) {
	s := e.begin(len(key) + len(image) + 2*entryHeadMax)
	e.buf = appendObjectOp(e.buf, &Op{Key: key, Kind: kind, TAT: gen, Object: image, ExpireAtMs: exp, DB: e.db})
	e.added(s)
}

// Delta adds what a window changed in key's object of kind: delta is the
// delta entry's payload (Op.Value of an object op without Object; written
// even when empty).
func (e *Encoder) Delta(key []byte, kind byte, delta []byte, exp int64) {
	if delta == nil {
		delta = []byte{}
	}
	s := e.begin(len(key) + len(delta) + 2*entryHeadMax)
	e.buf = appendObjectOp(e.buf, &Op{Key: key, Kind: kind, Value: delta, ExpireAtMs: exp, DB: e.db})
	e.added(s)
}

// Op adds op (its own DB, not SetDB's), encoded as DB.Write encodes it.
func (e *Encoder) Op(op *Op) {
	s := e.begin(sizeBound(op))
	e.buf = appendEntry(e.buf, op)
	if op.Delete {
		e.deletes++
	}
	e.added(s)
}

// seal fills in the records' headers: seqs from seq on, stamp, lengths and
// checksums. It returns the number of records.
func (e *Encoder) seal(seq uint64, stampMs int64) int {
	e.closeRecord(len(e.buf))
	records := 0
	for h := 0; h < len(e.buf); records++ {
		n := int(binary.LittleEndian.Uint32(e.buf[h:]))
		binary.LittleEndian.PutUint64(e.buf[h+8:], seq+uint64(records))
		binary.LittleEndian.PutUint64(e.buf[h+16:], uint64(stampMs))
		binary.LittleEndian.PutUint32(e.buf[h+4:], crc32.Checksum(e.buf[h+8:h+recordHeaderLen+n], castagnoli))
		h += recordHeaderLen + n
	}
	e.sealed = true
	return records
}

// EachOp calls fn with every change added since Reset, in order, decoded
// back into an Op whose slices alias e's buffer (or, for a TAT or a
// compact window, a scratch array): valid only during the call. A change
// added as an object with a delta comes back as two ops (image, then
// delta), which a pending set merges back into one (mergeDelta). Used on
// the failure path only: the Flusher's pending set copies what it keeps.
func (e *Encoder) EachOp(fn func(op *Op)) {
	if !e.sealed {
		e.closeRecord(len(e.buf))
	}
	for h := 0; h < len(e.buf); {
		n := int(binary.LittleEndian.Uint32(e.buf[h:]))
		payload := e.buf[h+recordHeaderLen : h+recordHeaderLen+n]
		h += recordHeaderLen + n
		_, err := decodeChunk(payload, func(db uint32, key, value []byte, exp int64, kind Kind, deleted bool) error {
			op := Op{Key: key, DB: db}
			switch {
			case deleted:
				op.Delete = true
			case kind == KindWindow:
				op.Window, op.Value, op.ExpireAtMs = true, value, exp
			default:
				op.Value, op.ExpireAtMs = value, exp
			}
			fn(&op)
			return nil
		}, func(db uint32, key []byte, kind byte, image []byte, exp int64) error {
			op := Op{Key: key, DB: db, Kind: kind & ObjectKindMask, ExpireAtMs: exp}
			switch {
			case kind&ObjectDelta != 0:
				op.Value = image
			case kind&ObjectGen != 0:
				gen, img, err := SplitGen(image)
				if err != nil {
					return err
				}
				op.TAT, op.Object = gen, img
			default:
				op.Object = image
			}
			fn(&op)
			return nil
		})
		if err != nil {
			// Only this package's encoders wrote these bytes.
			panic("persist: an encoder's own entries do not decode: " + err.Error())
		}
	}
}

// WriteEncoded is Write for the changes in e: it seals e's records (seqs,
// stamp, checksums), appends them to the change log and syncs, with
// Write's guarantees and failure handling. e keeps its entries either way
// (EachOp still reads them); Reset it before the next window. An empty e
// is a no-op.
func (db *DB) WriteEncoded(e *Encoder) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed.Load() {
		return ErrClosed
	}
	if e.ops == 0 {
		return nil
	}
	stamp := db.now().UnixMilli()
	seq := db.mu.nextSeq
	records := e.seal(seq, stamp)
	return db.commitLocked(e.buf, seq, records, e.deletes, stamp, e.ops)
}
