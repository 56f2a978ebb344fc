// Package persist stores celld's limiter state durably: for every key, the
// value the server holds (the GCRA theoretical arrival time, TAT, as a decimal
// byte string, or another kind's encoded value) and an optional absolute
// expiry. It does three things: Open/Replay at start-up, a Flusher that
// commits the keys changed in each window as one synced record, and Close.
//
// The in-memory table lives elsewhere; persist never reads individual keys on
// the request path.
//
// # On-disk layout (format celld-persist-v5)
//
// The state is a base plus a log, like a snapshot plus a redo log, both in
// plain files of celld's own in the data directory:
//
//   - the change log (changelog.go): append-only changes-<seq>.log files,
//     one record per window, each one write and one fdatasync;
//   - the base (basefile.go): base-<cut>.dat, the full state as of the
//     log's seq cut, written whole by WriteBase from the live store into a
//     temp file, fsynced, renamed into place, the directory fsynced.
//
// Records of both hold entries (format.go): a set (key, ExpireAtMs, value;
// a value that is a plain TAT is stored as 8 binary bytes) or a delete
// (key), and other kinds' tags. The state is the base's entries, then
// every change record with seq > the base's cut, in seq order; a later
// entry for a key wins. ExpireAtMs 0 means "no expiry"; any other value is
// an absolute Unix time in milliseconds (negative values are kept and are
// simply always expired).
//
// The log is folded away by WriteBase once it outgrows the base (BaseDue),
// beside the window writes: cut the log (end the current change file; the
// base covers every record up to the cut), write the new base file from a
// snapshot, rename it into place (the atomic switch), then remove the older
// base and the change files ended at the cut. A crash before the rename
// leaves the old base and log in charge (the temp file is removed by the
// next Open); a crash after it leaves files that Open removes.
//
// Earlier formats kept the base (and, in v3, the log; in v1, one record
// per key) in pebble v2. Open migrates such a directory once: it opens
// pebble read-only (no pebble write can fail, so none can end the
// process), copies its base, v3 log chunks and v1 records into a base file
// as they are, then removes pebble's files. pebble's directory lock
// (LOCK) remains the directory's lock. Why celld stopped writing through
// pebble: see basefile.go and docs/durability.md.
package persist

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Sentinel errors. Errors returned by this package wrap one of these (test
// with errors.Is) together with the directory and the underlying cause.
var (
	// ErrLocked means the data directory is held by another DB: another
	// process, or another Open in this process. The LOCK file is the
	// arbiter.
	ErrLocked = errors.New("persist: data directory is locked")
	// ErrCorrupt means the stored data could not be decoded: a record
	// whose checksum matches does not have the documented layout, a base
	// file's header disagrees with its name, or the directory lacks the
	// files its data needs (a base, pebble's manifest marker).
	ErrCorrupt = errors.New("persist: data directory is corrupt")
	// ErrFormat means the directory holds a pebble database written by
	// something other than a known version of persist.
	ErrFormat = errors.New("persist: unknown on-disk format")
	// ErrClosed is returned by every method called after Close.
	ErrClosed = errors.New("persist: db is closed")
	// ErrPebbleFatal wraps a fatal error (pebble's Logger.Fatalf) or a panic
	// raised inside pebble while Open was migrating an old directory (pebble
	// is opened read-only then, and never otherwise).
	ErrPebbleFatal = errors.New("persist: pebble fatal error")
	// ErrUnusable means pebble did not open an old directory within
	// Options.OpenTimeout during its migration.
	ErrUnusable = errors.New("persist: storage engine unusable")
)

// Defaults for Options fields left at zero.
const (
	DefaultCacheSize    = 8 << 20
	DefaultFoldMinBytes = 32 << 20
	DefaultOpenTimeout  = 10 * time.Second
	DefaultMinFreeBytes = 4 << 20
)

// Options configures Open. The zero value is valid: real disk, slog.Default,
// and the documented defaults.
type Options struct {
	// FS is the filesystem. nil means vfs.Default (the real disk). Tests
	// use vfs.NewMem, vfs.NewCrashableMem or an errorfs wrapper.
	FS vfs.FS
	// Logger receives persist's (and, during a migration, pebble's) log
	// lines. nil means slog.Default(). pebble's informational lines are
	// logged at Debug.
	Logger *slog.Logger
	// CacheSize is the size in bytes of pebble's block cache while Open
	// migrates a pebble directory. 0 means DefaultCacheSize (8 MiB).
	CacheSize int64
	// Now is the wall clock Write stamps into every record (see
	// DB.LastFlushedAt). nil means time.Now. Tests inject a clock.
	Now func() time.Time
	// FoldMinBytes is the log size below which BaseDue stays false however
	// small the base. 0 means DefaultFoldMinBytes (32 MiB): rewriting a
	// small base more often costs CPU under load (100k hot keys at 600k
	// calls/s log ~13 MB/s) and shortens a restart by well under a second.
	// Tests set it low to fold often.
	FoldMinBytes int64
	// OpenTimeout bounds pebble.Open when Open migrates a pebble
	// directory. 0 means DefaultOpenTimeout (10 s).
	OpenTimeout time.Duration
	// MinFreeBytes is the free space Open requires on the directory's
	// filesystem (where the filesystem reports it). 0 means
	// DefaultMinFreeBytes (4 MiB); negative disables the check.
	MinFreeBytes int64
}

// Validate reports whether o is usable. Open calls it.
func (o Options) Validate() error {
	if o.CacheSize < 0 {
		return fmt.Errorf("persist: Options.CacheSize %d is negative", o.CacheSize)
	}
	if o.FoldMinBytes < 0 {
		return fmt.Errorf("persist: Options.FoldMinBytes %d is negative", o.FoldMinBytes)
	}
	if o.OpenTimeout < 0 {
		return fmt.Errorf("persist: Options.OpenTimeout %v is negative", o.OpenTimeout)
	}
	return nil
}

func (o *Options) withDefaults() {
	if o.FS == nil {
		o.FS = vfs.Default
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.CacheSize == 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.FoldMinBytes == 0 {
		o.FoldMinBytes = DefaultFoldMinBytes
	}
	if o.OpenTimeout == 0 {
		o.OpenTimeout = DefaultOpenTimeout
	}
	if o.MinFreeBytes == 0 {
		o.MinFreeBytes = DefaultMinFreeBytes
	}
}

// Op is one change to write: Delete=true removes Key; otherwise Key is set to
// Value with ExpireAtMs (absolute Unix milliseconds, 0 = no expiry). With
// IsTAT the value is TAT's decimal text and Value is ignored: it is stored
// in 8 bytes, and Replay and Restore give it back as text.
//
// Ownership: once an Op is handed to persist (returned from
// FlusherConfig.Drain or passed to DB.Write) persist may keep Key and Value
// until the op is durable, and treats them as immutable. Callers must pass
// copies (or bytes they never modify again). persist never modifies them.
type Op struct {
	Key, Value []byte
	TAT        uint64
	IsTAT      bool
	// Verbatim: Value is known not to be a canonical decimal (a string
	// the store keeps verbatim), so it is written as an 's' entry without
	// being tested for one. Were it one after all, the entry still
	// replays as the same value, only in 19 bytes more than a 't' entry.
	Verbatim   bool
	ExpireAtMs int64
	Delete     bool
	// Window: Value is a CL.WINDOW state, stored as a 'w' entry and
	// given back as KindWindow by ReplayAll (window.go).
	Window bool
	// Kind, when not 0, makes the op an object entry (object.go): the
	// key holds a value of that kind whose whole content is Object.
	//
	// For an object op, TAT is the generation of the image in Object (0
	// writes it as before deltas existed), and Value, when not nil, is a
	// delta entry's payload, written after the image (delta.go); an object
	// op with a Value and no Object is a delta only. (The fields are
	// reused so that an Op, which the pending set holds per key while the
	// disk fails, stays 80 bytes.)
	Kind   byte
	Object []byte
	// DB is the persistent id of the key's database (databases.go); 0,
	// database 0's, is written exactly as before databases existed.
	DB uint32
}

// RestoreStats reports what Replay or Restore did.
type RestoreStats struct {
	// Loaded is, for Replay, the number of live set entries passed to fn
	// (a key set in the base and again in the log counts twice); for
	// Restore, the number of keys passed to fn.
	Loaded int64
	// Expired is the number of set entries skipped because ExpireAtMs <=
	// nowMs (Replay passes them to fn as deletions). They stay on disk until
	// the next WriteBase, which BaseDue then asks for.
	Expired int64
	// Deleted is the number of delete entries replayed.
	Deleted int64
	// LogBytes is the size of the log chunks replayed on top of the base;
	// BaseBytes the size of the base (v1 records included).
	LogBytes, BaseBytes int64
	// DamagedRecords and DamagedBytes count change-log records skipped
	// because they failed their checksum (or their length was impossible)
	// while intact records followed them in the same file: damage, not a
	// torn tail. Each is logged at WARN with its file and offset.
	DamagedRecords, DamagedBytes int64
	// Duration is the wall time the scan took.
	Duration time.Duration
}

// Damage is what replay skipped in the change log (see RestoreStats).
type Damage struct {
	Records, Bytes int64
}

// Damage returns what Open found damaged in the change log (Replay skips
// the same records). Safe for
// concurrent use; O(1).
func (db *DB) Damage() Damage {
	return Damage{Records: db.damagedRecords.Load(), Bytes: db.damagedBytes.Load()}
}

// DB is the durable key → (value, expiry) store.
//
// Durability contract: after Write returns nil the ops survive kill -9 and
// power loss (their record is written and fdatasynced, and a new change
// file's directory entry is synced before its first record). With the Flusher, at most the last Interval of
// changes is lost on kill -9 (while writes are failing, everything since the
// last successful flush: Status.PendingKeys and LastSuccessAt say how much).
// After Flusher.Stop returns nil nothing is lost.
//
// All methods are safe for concurrent use. Write and WriteBase do not wait
// for each other except for the log's cut and the final file removals
// (see WriteBase); Replay, Restore and Count hold both locks for their
// whole scan. A DB is created by Open; the zero value is not usable.
//
// Failure handling (see fault_test.go). Every disk operation is a plain
// file operation whose failure is an error returned to the caller; there
// is no storage engine that could end the process or wedge. A change-log
// write or fdatasync that fails returns the error and ends the file (cut
// back to its last whole record); the next Write starts a new one. A base
// rewrite that fails removes its temp file and returns the error; the old
// base and log stay in charge and the Flusher retries later.
type DB struct {
	dir         string
	fs          vfs.FS
	log         *slog.Logger
	cacheSize   int64
	openTimeout time.Duration
	now         func() time.Time
	foldMin     int64

	// flushedAtMs is the "flushed_at" stamp of the latest committed Write
	// or base (read from disk by Open, then updated by each successful
	// Write); 0 when none was ever recorded.
	flushedAtMs atomic.Int64

	// logBytes mirrors mu.logBytes for LogBytes.
	logBytes atomic.Int64

	// baseBytes is the current base's size and needBase asks for a
	// WriteBase regardless of sizes (expired records on disk, a damaged or
	// migrated base): read by BaseDue without any lock.
	baseBytes atomic.Int64
	needBase  atomic.Bool
	// closed is set by Close (under both mutexes).
	closed atomic.Bool
	// abortBase makes a running and every later WriteBase stop at its next
	// chunk (AbortBases; shutdown).
	abortBase atomic.Bool

	// pm guards the base: WriteBase holds it for the whole rewrite, Replay
	// for its scan. Write never takes it, so a slow base rewrite never
	// delays the change log. Lock order: pm, then mu.
	pm struct {
		sync.Mutex
		// lock is the directory lock (pebble's LOCK file), held from Open
		// to Close.
		lock *pebble.Lock
		// baseSeq is the current base file's cut (every record with seq <=
		// baseSeq is in it); basePath its path.
		baseSeq  uint64
		basePath string
		// baseBuf is WriteBase's chunk buffer, kept between calls.
		baseBuf []byte
	}

	// mu guards the change log (changelog.go): Write holds it for one
	// append and sync; WriteBase only for its cut and for removing the
	// files its base covers.
	mu struct {
		sync.Mutex
		// nextSeq is the seq the next log record gets; never reused, even
		// after a failed Write (its records may have reached the disk).
		nextSeq uint64
		// logBytes is the size of the log records after the base (as far
		// as this DB knows: Open counts those it read, Write adds).
		logBytes int64

		// cur is the change file Writes append to; nil until the next
		// Write creates one (see changelog.go). curSize is how many bytes
		// of whole records it holds: a failed append is cut back to it.
		cur     vfs.File
		curSize int64
		// files lists the change files on disk, oldest first, cur last.
		files []changeFile
		// logBuf is Write's reusable record buffer.
		logBuf []byte
		// logDeletes counts the delete ops written since the base.
		logDeletes int64
	}

	// baseKeys (the base's key count) and logDeletes (mirrors
	// mu.logDeletes) let BaseDue fold a base most of whose keys are gone.
	baseKeys, logDeletes atomic.Int64

	// damagedRecords and damagedBytes count what Open's scan of the change
	// log and Replay's read of the base found damaged (see Damage).
	damagedRecords, damagedBytes atomic.Int64
	// baseDamageSeen is set once Replay reported the base's damage
	// (guarded by pm).
	baseDamageSeen bool
}

// Open opens (creating if needed) the database in dir, migrating a
// directory written by an older celld (pebble, formats v1-v4) to a base
// file first.
//
// If another process (or another DB in this process) has dir open, Open
// fails with an error wrapping ErrLocked and naming dir. A directory whose
// data cannot be trusted (base missing beside change files, pebble tables
// without their manifest marker, a pebble that reports corruption) is
// refused with an error wrapping ErrCorrupt that names --recover=skip. Any
// other failure names dir and wraps the cause. Open reads every change
// file once (and, for a migration, pebble's data); the base itself is read
// by Replay.
func Open(dir string, opts Options) (*DB, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.withDefaults()
	db := &DB{
		dir:         dir,
		fs:          opts.FS,
		log:         opts.Logger.With("component", "persist", "dir", dir),
		cacheSize:   opts.CacheSize,
		openTimeout: opts.OpenTimeout,
		now:         opts.Now,
		foldMin:     opts.FoldMinBytes,
	}
	if err := db.fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("persist: open %s: create directory: %w", dir, err)
	}
	// Make the directory's own entry durable (it may have just been
	// created), as pebble did.
	if d, err := db.fs.OpenDir(db.fs.PathDir(dir)); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	lock, err := pebble.LockDirectory(dir, db.fs)
	if err != nil {
		if isLockConflict(err) {
			return nil, fmt.Errorf("%w: %s is held by another process (or another Open in this one): %w", ErrLocked, dir, err)
		}
		return nil, fmt.Errorf("persist: open %s: lock: %w", dir, err)
	}
	db.pm.lock = lock
	if err := db.open(opts); err != nil {
		_ = lock.Close()
		return nil, err
	}
	return db, nil
}

// open is Open's work under the directory lock.
func (db *DB) open(opts Options) error {
	if err := db.checkUsable(opts); err != nil {
		return err
	}
	l, err := scanLayout(db.fs, db.dir)
	if err != nil {
		return fmt.Errorf("persist: open %s: list: %w", db.dir, err)
	}
	for _, name := range l.tmps { // bases a crash interrupted
		if err := removeQuietly(db.fs, db.dir, name); err != nil {
			db.log.Warn("persist: cannot remove an unfinished base file", "file", name, "err", err)
		}
	}
	switch {
	case len(l.bases) > 0:
		slices.Sort(l.bases)
		cut := l.bases[len(l.bases)-1]
		for _, old := range l.bases[:len(l.bases)-1] {
			if err := removeQuietly(db.fs, db.dir, baseFileName(old, baseFileSuffix)); err != nil {
				db.log.Warn("persist: cannot remove a replaced base file", "file", baseFileName(old, baseFileSuffix), "err", err)
			}
		}
		if len(l.pebble) > 0 {
			// A migration that was cut short after its base file was
			// renamed into place: that file holds everything pebble did.
			db.removePebbleFiles(l.pebble)
		}
		db.setBase(cut)
	case len(l.pebble) > 0:
		if !l.marker {
			var example string
			for _, name := range l.pebble {
				if !strings.HasPrefix(name, "marker.") {
					example = name
				}
			}
			if example != "" {
				return fmt.Errorf("%w: %s holds data files (%s, ...) but no pebble manifest marker (marker.manifest.*): "+
					"the storage engine's metadata is missing; refusing to start an empty database over the data "+
					"(--recover=skip moves the directory aside and starts empty)", ErrCorrupt, db.dir, example)
			}
		}
		if err := db.migrate(l); err != nil {
			return err
		}
	case l.change:
		return fmt.Errorf("%w: %s holds change files (changes-*.log) but no base file (base-*.dat): "+
			"the base is missing; refusing to replay the log over an empty state "+
			"(--recover=skip moves the directory aside and starts empty)", ErrCorrupt, db.dir)
	default:
		// A new directory: an empty base makes it recognisable (and its
		// loss detectable) from the start.
		bf, err := createBaseFile(db.fs, db.dir, 0, 0)
		if err != nil {
			return fmt.Errorf("persist: open %s: %w", db.dir, err)
		}
		if _, err := bf.finish(0, db.syncDir); err != nil {
			return fmt.Errorf("persist: open %s: write the initial base: %w", db.dir, err)
		}
		db.setBase(0)
	}
	stamp, ok, err := readBaseHeader(db.fs, db.pm.basePath, db.pm.baseSeq)
	if err != nil {
		return fmt.Errorf("persist: open %s: read base %s: %w", db.dir, db.pm.basePath, err)
	}
	if !ok {
		// Not even its first record reads: the file is not a base (or is
		// garbage); replaying "what is left" would be an empty state.
		return fmt.Errorf("%w: %s: the base file %s has no valid header record: "+
			"refusing to start from it (--recover=skip moves the directory aside and starts empty)",
			ErrCorrupt, db.dir, db.fs.PathBase(db.pm.basePath))
	}
	db.flushedAtMs.Store(stamp)
	return db.scanChangeFilesLocked()
}

// setBase makes base-<cut>.dat the current base (Open).
func (db *DB) setBase(cut uint64) {
	db.pm.baseSeq = cut
	db.pm.basePath = db.fs.PathJoin(db.dir, baseFileName(cut, baseFileSuffix))
	db.mu.nextSeq = max(db.mu.nextSeq, cut+1)
	if info, err := db.fs.Stat(db.pm.basePath); err == nil {
		db.baseBytes.Store(info.Size())
	}
}

// isLockConflict tells a lock held elsewhere apart from, say, a permission
// problem creating the LOCK file (which comes back as an *fs.PathError).
func isLockConflict(err error) bool {
	var pe *iofs.PathError
	if errors.As(err, &pe) {
		return false
	}
	return errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) ||
		strings.Contains(err.Error(), "lock held by current process")
}

// checkUsable is Open's check, under the directory lock, that the
// directory takes a synced write and has room: failing here, with one
// line naming the directory and the cause, beats failing at the first
// flush.
func (db *DB) checkUsable(opts Options) error {
	dir := db.dir
	if u, err := db.fs.GetDiskUsage(dir); err == nil && opts.MinFreeBytes > 0 && u.AvailBytes < uint64(opts.MinFreeBytes) {
		return fmt.Errorf("persist: open %s: only %d bytes free on its filesystem, need at least %d: %w",
			dir, u.AvailBytes, opts.MinFreeBytes, syscall.ENOSPC)
	}
	if err := db.probe(); err != nil {
		return fmt.Errorf("persist: open %s: the directory does not accept a synced write: %w", dir, err)
	}
	return nil
}

// numberedFile reports whether name is pebble's <digits><suffix> (a table
// or a WAL), so that a stray file of the operator's is not taken for data.
func numberedFile(name, suffix string) bool {
	num, ok := strings.CutSuffix(name, suffix)
	if !ok || num == "" {
		return false
	}
	for _, c := range num {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// isChangeFileName reports whether name is a change file's.
func isChangeFileName(name string) bool {
	_, ok := parseChangeFileName(name)
	return ok
}

// LastFlushedAt returns the wall-clock time (Options.Now, millisecond
// precision) stamped into the latest committed Write or base: after Open,
// the latest on disk; afterwards, this DB's latest successful Write. ok is
// false when nothing was ever recorded in the directory. Every record on
// disk was written at or before it by the clock that wrote it: a restart
// that reads a clock earlier than this knows the clock stepped back by at
// least the difference. Safe for concurrent use; O(1).
func (db *DB) LastFlushedAt() (t time.Time, ok bool) {
	ms := db.flushedAtMs.Load()
	if ms == 0 {
		return time.Time{}, false
	}
	return time.UnixMilli(ms), true
}

// Dir returns the directory passed to Open.
func (db *DB) Dir() string { return db.dir }

// probeName is the scratch file probe writes.
const probeName = "persist-probe.tmp"

// probe creates, writes, syncs and removes a small file in db.dir, to check
// that the disk accepts synced writes. Cost: one small fsync.
func (db *DB) probe() error {
	name := db.fs.PathJoin(db.dir, probeName)
	f, err := db.fs.Create(name, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	var buf [4096]byte
	_, err = f.Write(buf[:])
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if rerr := db.fs.Remove(name); err == nil {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	return nil
}

// Close ends the current change file and releases the directory lock. It
// does not flush anything: stop the Flusher first. A base rewrite in
// progress gives up at its next chunk. Calling Close again returns
// ErrClosed. Safe to call concurrently with other methods (they then fail
// with ErrClosed).
func (db *DB) Close() error {
	db.abortBase.Store(true) // a running WriteBase gives up at its next chunk
	db.pm.Lock()
	defer db.pm.Unlock()
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed.Load() {
		return ErrClosed
	}
	db.closed.Store(true)
	db.endChangeFileLocked()
	if err := db.pm.lock.Close(); err != nil {
		return fmt.Errorf("persist: close %s: release lock: %w", db.dir, err)
	}
	return nil
}

// AbortBases makes a WriteBase in progress, and every later one, give up
// at its next chunk with ErrAborted (the old base and log stay in charge).
// For shutdown: the final flush must not wait for a fold. Safe for
// concurrent use.
func (db *DB) AbortBases() { db.abortBase.Store(true) }

// ErrAborted is returned by a WriteBase stopped by AbortBases or Close.
var ErrAborted = errors.New("persist: base rewrite aborted (shutting down)")
