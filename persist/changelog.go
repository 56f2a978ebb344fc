package persist

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	iofs "io/fs"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// The change log: since format v4 the log of per-window changes lives in
// plain append-only files next to pebble's, not in pebble. Each window is
// one write and one fdatasync; pebble keeps only the base and the metadata.
// (In pebble, every log byte was also copied into a memtable, flushed to
// an L0 table and compacted before the next fold range-deleted it: about
// 0.25-0.3 µs of server CPU per CL.THROTTLE call under load.)
//
// Files are named changes-<first seq, 16 hex digits>.log. A file holds
// records, each the changes of one Write:
//
//	[0:4)   payload length (uint32, little-endian; > 0)
//	[4:8)   CRC-32C of bytes [8 : 24+length)
//	[8:16)  seq (uint64, little-endian): strictly increasing along the files
//	[16:24) flushed_at: Options.Now of the Write, Unix ms (int64)
//	[24:)   payload: entries (format.go)
//
// A file is only ever appended to by the DB that created it, and a DB never
// appends to a file it did not create: Open, a failed write and a base
// rewrite each end the current file, and the next Write starts a new one.
// A failed write is cut back to the file's last whole record (or the file
// removed if it holds none) before the file is ended. So only a record cut
// short by the end of the file is a torn tail (a crash in the middle of
// that record, in whichever file was being written then: the newest, or an
// older one after a restart). A record that fails its CRC (or does not
// raise the seq) is damage, whether intact records follow it or it is the
// last and its declared length lies wholly inside the file: the reader
// resynchronises on the next record whose header and CRC are valid and
// whose seq is higher, so damage costs only the damaged bytes,
// and reports it (a WARN naming the file and offset; RestoreStats and
// DB.Damage count it). A record whose CRC matches but whose payload does
// not decode is corruption (ErrCorrupt).
//
// A base rewrite covers every record written before it; once its switch is
// committed the files are removed. Open removes files left behind (all of
// whose records are at or below the base's seq).

const (
	changeFilePrefix = "changes-"
	changeFileSuffix = ".log"
	recordHeaderLen  = 24
)

// maxRecord caps a record's payload. A Write whose changes encode to more
// (a shutdown flush of ~10M keys) is several records: a crash during it can
// keep a prefix of them, each key then holding either its old or its new
// state. A variable only so that tests can make it small.
var maxRecord = 256 << 20

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// changeFileName is the base name of the change file whose first record has
// seq first.
func changeFileName(first uint64) string {
	return fmt.Sprintf("%s%016x%s", changeFilePrefix, first, changeFileSuffix)
}

// parseChangeFileName returns the first seq named by a change file's base
// name, or ok=false for any other name.
func parseChangeFileName(name string) (first uint64, ok bool) {
	hex, found := strings.CutPrefix(name, changeFilePrefix)
	if !found {
		return 0, false
	}
	hex, found = strings.CutSuffix(hex, changeFileSuffix)
	if !found || len(hex) != 16 {
		return 0, false
	}
	v, err := strconv.ParseUint(hex, 16, 64)
	return v, err == nil
}

// changeFile is a change file on disk that has not been removed yet.
type changeFile struct {
	path  string
	first uint64
}

// fileScan is what reading one change file found.
type fileScan struct {
	records   int64
	lastSeq   uint64 // seq of the last valid record (0: none)
	lastStamp int64  // its flushed_at
	valid     int64  // offset just after the last valid record
	tail      int64  // where the torn tail starts (size: none)
	size      int64  // the file's size
	// damaged are the skipped spans: bytes followed by a valid record, or
	// a last record whose declared length lies wholly inside the file but
	// that fails its CRC (a crash cuts a record short, it does not leave
	// a whole one with wrong bytes).
	damaged []span
}

// span is a byte range of a change file.
type span struct{ off, len int64 }

// listChangeFiles returns the change files in dir, by first seq.
func listChangeFiles(fs vfs.FS, dir string) ([]changeFile, error) {
	names, err := fs.List(dir)
	if err != nil {
		return nil, err
	}
	var files []changeFile
	for _, name := range names {
		if first, ok := parseChangeFileName(name); ok {
			files = append(files, changeFile{path: fs.PathJoin(dir, name), first: first})
		}
	}
	slices.SortFunc(files, func(a, b changeFile) int { return cmp.Compare(a.first, b.first) })
	return files, nil
}

// readChangeFile calls fn for each valid record of the file at path, in
// order. At a record that is short, fails its CRC or does not increase the
// seq it resynchronises: it looks for the next offset holding a valid
// record with a higher seq, records the skipped bytes in fileScan.damaged
// and goes on from there. If there is none, a record whose declared length
// (header intact enough to give one in range) ends inside the file is
// damage too (recorded, reading goes on after it); otherwise the rest is
// a torn tail (fileScan.tail) and reading stops. payload is only valid during the call; buf is a reusable
// buffer (returned, perhaps grown). fn's error stops the read and is
// returned. Cost: one sequential read of the file, CRC-32C over it
// (hardware), no allocation per record beyond growing buf to the largest
// record; a damaged or torn spot costs a read of the rest of the file.
func readChangeFile(fs vfs.FS, path string, buf []byte, fn func(seq uint64, stamp int64, payload []byte) error) (fileScan, []byte, error) {
	var sc fileScan
	f, err := fs.Open(path)
	if err != nil {
		return sc, buf, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return sc, buf, err
	}
	sc.size = info.Size()
	r := bufio.NewReaderSize(f, 256<<10)
	var hdr [recordHeaderLen]byte
	off := int64(0) // where the record being read starts
	for off < sc.size {
		ok, n, seq, stamp, payload, rerr := readRecord(r, &hdr, &buf, off, sc.size, sc.records > 0, sc.lastSeq)
		if rerr != nil {
			return sc, buf, rerr
		}
		if !ok {
			next, found, err := resync(f, off, sc.size, sc.records > 0, sc.lastSeq)
			if err != nil {
				return sc, buf, err
			}
			if !found {
				end, whole, err := wholeRecordEnd(f, off, sc.size)
				if err != nil {
					return sc, buf, err
				}
				if !whole {
					sc.tail = off
					return sc, buf, nil // a torn tail
				}
				next = end
			}
			sc.damaged = append(sc.damaged, span{off, next - off})
			off = next
			r.Reset(io.NewSectionReader(f, off, sc.size-off))
			continue
		}
		if fn != nil {
			if err := fn(seq, stamp, payload); err != nil {
				return sc, buf, err
			}
		}
		sc.records++
		sc.lastSeq, sc.lastStamp = seq, stamp
		off += recordHeaderLen + n
		sc.valid = off
	}
	sc.tail = sc.size
	return sc, buf, nil
}

// wholeRecordEnd reports whether the record at off declares a length in
// range (0 < n <= maxRecord) whose bytes lie wholly inside the file, and
// where it then ends. Such a record failing its CRC is damage, not a torn
// tail: appends are cut back to the last whole record on failure, so a
// crash can only leave a record cut short by the end of the file.
func wholeRecordEnd(f vfs.File, off, size int64) (end int64, whole bool, err error) {
	var hdr [recordHeaderLen]byte
	if size-off < recordHeaderLen {
		return 0, false, nil
	}
	if _, err := f.ReadAt(hdr[:], off); err != nil && !errors.Is(err, io.EOF) {
		return 0, false, err
	}
	n := int64(binary.LittleEndian.Uint32(hdr[0:]))
	if n == 0 || n > int64(maxRecord) || off+recordHeaderLen+n > size {
		return 0, false, nil
	}
	return off + recordHeaderLen + n, true, nil
}

// readRecord reads the record at off from r: ok=false when it is short,
// fails its CRC, or (haveLast) does not have a seq above lastSeq. err is
// only a read error other than the end of the file.
func readRecord(r *bufio.Reader, hdr *[recordHeaderLen]byte, buf *[]byte, off, size int64, haveLast bool, lastSeq uint64) (ok bool, n int64, seq uint64, stamp int64, payload []byte, err error) {
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return false, 0, 0, 0, nil, nil
		}
		return false, 0, 0, 0, nil, err
	}
	n = int64(binary.LittleEndian.Uint32(hdr[0:]))
	sum := binary.LittleEndian.Uint32(hdr[4:])
	seq = binary.LittleEndian.Uint64(hdr[8:])
	stamp = int64(binary.LittleEndian.Uint64(hdr[16:]))
	if n == 0 || n > int64(maxRecord) || off+recordHeaderLen+n > size || (haveLast && seq <= lastSeq) {
		return false, 0, 0, 0, nil, nil
	}
	if int64(cap(*buf)) < n {
		*buf = make([]byte, n)
	}
	payload = (*buf)[:n]
	if _, err := io.ReadFull(r, payload); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return false, 0, 0, 0, nil, nil
		}
		return false, 0, 0, 0, nil, err
	}
	if crc32.Update(crc32.Checksum(hdr[8:], castagnoli), castagnoli, payload) != sum {
		return false, 0, 0, 0, nil, nil
	}
	return true, n, seq, stamp, payload, nil
}

// resync finds the first offset after bad (where an invalid record
// starts) that holds a valid record with a seq above lastSeq (when
// haveLast), reading the rest of the file. Candidates are filtered by
// their length and seq fields before their CRC is computed, so the scan
// costs little more than the read.
func resync(f vfs.File, bad, size int64, haveLast bool, lastSeq uint64) (next int64, found bool, err error) {
	rest := make([]byte, size-bad)
	if _, err := f.ReadAt(rest, bad); err != nil && !errors.Is(err, io.EOF) {
		return 0, false, err
	}
	for p := 1; p+recordHeaderLen <= len(rest); p++ {
		h := rest[p:]
		n := int(binary.LittleEndian.Uint32(h[0:]))
		if n == 0 || n > maxRecord || n > len(h)-recordHeaderLen {
			continue
		}
		seq := binary.LittleEndian.Uint64(h[8:])
		if (haveLast && seq <= lastSeq) || seq == 0 {
			continue
		}
		if crc32.Checksum(h[8:recordHeaderLen+n], castagnoli) == binary.LittleEndian.Uint32(h[4:]) {
			return bad + int64(p), true, nil
		}
	}
	return 0, false, nil
}

// appendRecords encodes ops into buf (after its current contents) as
// records with seqs seq, seq+1, …, stamped stampMs, and returns buf and
// the number of records (one, unless the payload exceeds maxRecord). buf
// grows once, to a bound of the size (sizeBound): a shutdown flush of 1M
// keys is ~28 MB, which growing by doubling copied several times over. The
// bound reads no value's bytes, so each value is read once, by the copy
// (a window of SETs of 100-byte values is megabytes: an exact size pass
// made every value's bytes a cache miss twice).
func appendRecords(buf []byte, ops []Op, seq uint64, stampMs int64) ([]byte, int) {
	total := 0 // at least the payload's size: one record when it fits
	for i := range ops {
		total += sizeBound(&ops[i])
	}
	if need := total + (total/maxRecord+1)*recordHeaderLen; cap(buf)-len(buf) < need {
		// A quarter more: the next window, a little busier, fits too
		// (Write keeps the buffer up to logBufRetain). A new buffer is
		// zeroed by the runtime: regrowing it every window cost 6% of
		// a SET spray's CPU.
		buf = slices.Grow(buf, need+need/4)
	}
	records := 0
	for start := 0; start < len(ops); records++ {
		h := len(buf)
		buf = append(buf, make([]byte, recordHeaderLen)...)
		end := start
		if total <= maxRecord {
			for ; end < len(ops); end++ {
				prefetchValue(ops, end+valueAhead)
				buf = appendEntry(buf, &ops[end])
			}
		} else {
			for end < len(ops) && (end == start || len(buf)-h-recordHeaderLen+entrySize(&ops[end]) <= maxRecord) {
				prefetchValue(ops, end+valueAhead)
				buf = appendEntry(buf, &ops[end])
				end++
			}
		}
		binary.LittleEndian.PutUint32(buf[h:], uint32(len(buf)-h-recordHeaderLen))
		binary.LittleEndian.PutUint64(buf[h+8:], seq+uint64(records))
		binary.LittleEndian.PutUint64(buf[h+16:], uint64(stampMs))
		binary.LittleEndian.PutUint32(buf[h+4:], crc32.Checksum(buf[h+8:], castagnoli))
		start = end
	}
	return buf, records
}

// valueAhead is how many ops ahead appendRecords starts loading a value.
// A string's value is the store's own heap copy (store.Change views it),
// somewhere cold: copying them one after another took a cache miss each,
// in turn; started this far ahead, the misses overlap.
const valueAhead = 8

// prefetchValue starts loading the first and last cache lines of
// ops[i]'s value, if there is such an op and it has one.
func prefetchValue(ops []Op, i int) {
	if i >= len(ops) {
		return
	}
	if v := ops[i].Value; len(v) > 0 {
		p := uintptr(unsafe.Pointer(unsafe.SliceData(v)))
		prefetch(p)
		prefetch(p + uintptr(len(v)) - 1)
	}
}

// appendLocked writes the encoded records in buf to the current change
// file, creating one named by first when there is none, and syncs it. On
// any failure the file is cut back to its last whole record (removed if it
// has none, so failing retries leave no empty files behind) and closed; the
// next call starts a new file. db.mu must be held. Cost: one write and one
// fdatasync (plus, for a new file, a create and a directory sync).
func (db *DB) appendLocked(buf []byte, first uint64) error {
	if db.mu.cur == nil {
		f, err := db.createChangeFileLocked(first)
		if err != nil {
			return err
		}
		db.mu.cur, db.mu.curSize = f, 0
	}
	_, err := db.mu.cur.Write(buf)
	if err == nil {
		err = db.mu.cur.SyncData()
	}
	if err != nil {
		db.abandonChangeFileLocked()
		return err
	}
	db.mu.curSize += int64(len(buf))
	return nil
}

// abandonChangeFileLocked ends the current change file after a failed
// append: a file without a whole record is removed (and unlisted), any
// other is truncated to its whole records where the filesystem allows
// (vfs files backed by an OS file; a torn tail left behind otherwise is
// skipped by readChangeFile). db.mu must be held; cur is the last listed
// file.
func (db *DB) abandonChangeFileLocked() {
	f, size := db.mu.cur, db.mu.curSize
	db.mu.cur, db.mu.curSize = nil, 0
	path := db.mu.files[len(db.mu.files)-1].path
	if size > 0 {
		if fd := f.Fd(); fd != vfs.InvalidFd {
			if err := syscall.Ftruncate(int(fd), size); err == nil {
				_ = f.Sync()
			}
		}
		_ = f.Close()
		return
	}
	_ = f.Close()
	if err := db.fs.Remove(path); err == nil || errors.Is(err, iofs.ErrNotExist) {
		db.mu.files = db.mu.files[:len(db.mu.files)-1]
	}
}

// createChangeFileLocked creates the change file for first and makes its
// directory entry durable. On failure nothing stays listed, and the file is
// removed if it was created. db.mu must be held.
func (db *DB) createChangeFileLocked(first uint64) (vfs.File, error) {
	path := db.fs.PathJoin(db.dir, changeFileName(first))
	// Listed before it exists, so that a fold removes it even if the
	// create half-succeeded and the removal below fails.
	db.mu.files = append(db.mu.files, changeFile{path: path, first: first})
	unlist := func() {
		if err := db.fs.Remove(path); err == nil || errors.Is(err, iofs.ErrNotExist) {
			db.mu.files = db.mu.files[:len(db.mu.files)-1]
		}
	}
	f, err := db.fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		unlist()
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	if err := db.syncDir(); err != nil {
		_ = f.Close()
		unlist()
		return nil, err
	}
	return f, nil
}

// syncDir makes db.dir's entries (created or removed files) durable.
func (db *DB) syncDir() error {
	d, err := db.fs.OpenDir(db.dir)
	if err != nil {
		return fmt.Errorf("open directory %s: %w", db.dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync directory %s: %w", db.dir, err)
	}
	return nil
}

// endChangeFileLocked closes the current change file, if any; the next
// Write starts a new one. db.mu must be held.
func (db *DB) endChangeFileLocked() {
	if db.mu.cur != nil {
		_ = db.mu.cur.Close()
		db.mu.cur = nil
	}
}

// removeChangeFilesLocked removes the first n listed change files (a base
// now covers all their records; files listed later were started after the
// base's cut). A file that cannot be removed stays listed for the next
// fold; replay skips its records meanwhile. db.mu must be held and none of
// the n files may be the current one.
func (db *DB) removeChangeFilesLocked(n int) {
	kept := db.mu.files[:0]
	for _, f := range db.mu.files[:n] {
		if err := db.fs.Remove(f.path); err != nil && !errors.Is(err, iofs.ErrNotExist) {
			db.log.Warn("persist: cannot remove a folded change file; will retry", "file", f.path, "err", err)
			kept = append(kept, f)
		}
	}
	kept = append(kept, db.mu.files[n:]...)
	clear(db.mu.files[len(kept):])
	db.mu.files = kept
}

// scanChangeFilesLocked reads every change file at Open: it finds the next
// seq and the latest flush stamp above the base, counts the log's bytes,
// removes files with nothing above the base (folded, or torn before their
// first record) and reports torn tails. db.mu must be held.
func (db *DB) scanChangeFilesLocked() error {
	files, err := listChangeFiles(db.fs, db.dir)
	if err != nil {
		return fmt.Errorf("persist: open %s: list change files: %w", db.dir, err)
	}
	var buf []byte
	baseSeq := db.pm.baseSeq
	for _, cf := range files {
		var bytes int64
		var sc fileScan
		sc, buf, err = readChangeFile(db.fs, cf.path, buf, func(seq uint64, stamp int64, payload []byte) error {
			if seq > baseSeq {
				bytes += int64(len(payload))
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("persist: open %s: read %s: %w", db.dir, cf.path, err)
		}
		db.mu.nextSeq = max(db.mu.nextSeq, cf.first+1, sc.lastSeq+1)
		if sc.size == 0 || (sc.records > 0 && sc.lastSeq <= baseSeq) || (sc.records == 0 && cf.first <= baseSeq) {
			if err := db.fs.Remove(cf.path); err != nil {
				db.log.Warn("persist: cannot remove an obsolete change file", "file", cf.path, "err", err)
				db.mu.files = append(db.mu.files, cf)
			}
			continue
		}
		for _, d := range sc.damaged {
			db.log.Warn("persist: skipping a damaged change-log record (checksum or length does not match); later records of the file are replayed",
				"file", cf.path, "offset", d.off, "bytes", d.len)
			db.damagedRecords.Add(1)
			db.damagedBytes.Add(d.len)
			db.needBase.Store(true) // the next fold removes the damaged file
		}
		if sc.records == 0 {
			// Kept (and not replayed) until a fold covers its seqs: its
			// bytes are evidence, not something to delete unseen.
			db.log.Warn("persist: a change file holds no readable record (torn by a crash while its first record was written, or damaged); ignoring it",
				"file", cf.path, "bytes", sc.size)
			db.mu.files = append(db.mu.files, cf)
			continue
		}
		if sc.tail < sc.size {
			db.log.Warn("persist: ignoring the torn tail of a change file (a record cut short by the end of the file: a crash while it was being written)",
				"file", cf.path, "offset", sc.tail, "ignored_bytes", sc.size-sc.tail)
		}
		db.mu.files = append(db.mu.files, cf)
		db.mu.logBytes += bytes
		db.stampFlushed(sc.lastStamp)
	}
	db.logBytes.Store(db.mu.logBytes)
	return nil
}

// replayChangeFilesLocked passes every change-file record above the base
// to apply, in seq order, and returns the payload bytes replayed. db.mu
// must be held.
func (db *DB) replayChangeFilesLocked(apply entryFunc, obj ...ObjectFunc) (int64, error) {
	var (
		buf   []byte
		bytes int64
		err   error
	)
	baseSeq := db.pm.baseSeq
	for _, cf := range db.mu.files {
		_, buf, err = readChangeFile(db.fs, cf.path, buf, func(seq uint64, _ int64, payload []byte) error {
			if seq <= baseSeq {
				return nil
			}
			bytes += int64(len(payload))
			cbErr, formatErr := decodeChunk(payload, apply, obj...)
			if formatErr != nil {
				// The CRC matched, so this was written: corruption,
				// not a torn tail.
				return fmt.Errorf("%w: %s: %s record %d: %v", ErrCorrupt, db.dir, db.fs.PathBase(cf.path), seq, formatErr)
			}
			return cbErr
		})
		if err != nil {
			if errors.Is(err, iofs.ErrNotExist) {
				continue // listed before its create succeeded
			}
			return bytes, err
		}
	}
	return bytes, nil
}
