// Package persist stores celld's limiter state durably: for every key, the
// value the server holds (the GCRA theoretical arrival time, TAT, as a decimal
// byte string) and an optional absolute expiry. It does three things:
// Open/Replay at start-up, a Flusher that commits the keys changed in each
// window as one synced record, and Close.
//
// The in-memory table lives elsewhere; persist never reads individual keys on
// the request path.
//
// # On-disk layout (format celld-persist-v4)
//
// The state is a base plus a log, like a snapshot plus a redo log. The log
// is a series of append-only change files (changelog.go), one record per
// window, each one write and one fdatasync. The base and the metadata live
// in pebble v2, in the same directory:
//
//	'b' + gen (8 bytes) + index (4 bytes)      → base chunk: generation gen of
//	                                             the full state, written by
//	                                             WriteBase from the live store
//	'm' + name                                 → metadata:
//	    "m"+"format"     = "celld-persist-v4" (v3 and v2 directories are
//	                       read and restamped v4, v1 ones migrated)
//	    "m"+"flushed_at" = 8 bytes, big-endian int64: the wall clock (Unix
//	                       ms, Options.Now) of the latest WriteBase (each
//	                       change record carries its Write's; see
//	                       DB.LastFlushedAt)
//	    "m"+"base"       = gen, seq, bytes (3 × 8 bytes, big-endian): the
//	                       current base generation, the last log seq folded
//	                       into it, and its size
//	'l' + seq (8 bytes, big-endian)            → log chunk of a v3 directory
//	                                             (the log lived in pebble),
//	                                             replayed before the change
//	                                             files, removed by the first
//	                                             WriteBase
//	'k' + raw key                              → a celld-persist-v1 record
//	                                             (8-byte big-endian expiry +
//	                                             value), read as part of the
//	                                             base until the first WriteBase
//	                                             deletes them
//
// Records and chunks hold entries (format.go): a set (key, ExpireAtMs,
// value; a value that is a plain TAT is stored as 8 binary bytes) or a
// delete (key). The state is: v1 records, then the base's entries, then
// every v3 log chunk and change record with seq > the base's seq, in seq
// order; a later entry for a key wins. ExpireAtMs 0 means "no expiry"; any
// other value is an absolute Unix time in milliseconds (negative values are
// kept and are simply always expired).
//
// Why not one pebble key per limiter key: at 270k CL.THROTTLE/s over 100k
// keys a 100 ms window holds ~24k distinct keys, and inserting them one by
// one into pebble's memtable (then flushing and compacting them) cost a
// quarter of the server's CPU. Why not the log in pebble either (format
// v3): every log byte was copied into a memtable, flushed and compacted only
// to be range-deleted by the next fold, ~0.25-0.3 µs of CPU per call. The
// log is folded away by WriteBase, which rewrites the whole state from
// memory once the log outgrows the base (BaseDue), beside the window
// writes and in one atomic switch: cut the log (end the current change
// file; the base will cover every record up to the cut), write the new
// generation's chunks, then in one synced batch point "m"+"base" at it
// (with the cut's seq) and range-delete the old generation, any v3 log and
// any v1 records; then remove the change files ended at the cut, flush
// pebble's memtable and compact the base range, so the old generation's
// space is given back. A crash before that batch leaves the old base and
// log in charge (the half-written generation is ignored and cleared by the
// next WriteBase); a crash before the removals leaves files that replay
// skips and the next Open removes.
package persist

import (
	"encoding/binary"
	"errors"
	"fmt"
	iofs "io/fs"
	"log/slog"
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
	// process, or another Open in this process. pebble's LOCK file is the
	// arbiter.
	ErrLocked = errors.New("persist: data directory is locked")
	// ErrCorrupt means the stored data could not be decoded: pebble reported
	// corruption, or a record does not have the layout documented on the
	// package.
	ErrCorrupt = errors.New("persist: data directory is corrupt")
	// ErrFormat means the directory holds a pebble database written by
	// something other than this version of persist.
	ErrFormat = errors.New("persist: unknown on-disk format")
	// ErrClosed is returned by every method called after Close.
	ErrClosed = errors.New("persist: db is closed")
	// ErrPebbleFatal wraps a fatal error (pebble's Logger.Fatalf) or a panic
	// raised inside pebble while persist was calling it. The pebble instance
	// that raised it is discarded and a fresh one is opened on the next call.
	ErrPebbleFatal = errors.New("persist: pebble fatal error")
	// ErrUnusable means a pebble instance failed and could not be closed
	// (pebble can leave its commit pipeline locked after a WAL error), so its
	// lock on the directory cannot be released and no new instance can be
	// opened in this process. Every later WriteBase and Replay fails with
	// it, so the log is no longer folded; Writes still append to the change
	// log. A restart clears it. Memory state is unaffected.
	ErrUnusable = errors.New("persist: storage engine unusable until restart")
)

const (
	recordPrefix = 'k' // namespace of v1 per-key records (read, never written)
	basePrefix   = 'b' // namespace of base chunks
	logPrefix    = 'l' // namespace of log chunks
	metaPrefix   = 'm' // namespace of metadata keys

	expiryLen = 8 // bytes of the ExpireAtMs header in a v1 record value

	formatVersion   = "celld-persist-v4"
	formatVersionV3 = "celld-persist-v3" // opened, then restamped as v4 (v3 has no change files)
	formatVersionV2 = "celld-persist-v2" // opened, then restamped as v4 (v2 has no 't' entries)
	formatVersionV1 = "celld-persist-v1" // opened, then restamped as v4

)

var (
	formatKey   = []byte{metaPrefix, 'f', 'o', 'r', 'm', 'a', 't'}
	flushedKey  = []byte("mflushed_at")
	baseKey     = []byte("mbase")
	recordLower = []byte{recordPrefix}
	recordUpper = []byte{recordPrefix + 1}
)

// Defaults for Options fields left at zero.
const (
	DefaultMemTableSize = 2 << 20
	DefaultCacheSize    = 8 << 20
	DefaultCloseTimeout = 10 * time.Second
	DefaultFoldMinBytes = 32 << 20
	DefaultOpenTimeout  = 10 * time.Second
	DefaultMinFreeBytes = 4 << 20
)

// Options configures Open. The zero value is valid: real disk, slog.Default,
// and the documented defaults.
type Options struct {
	// FS is the filesystem pebble uses. nil means vfs.Default (the real disk).
	// Tests use vfs.NewMem, vfs.NewCrashableMem or an errorfs wrapper.
	FS vfs.FS
	// Logger receives persist's and pebble's log lines. nil means
	// slog.Default(). pebble's informational lines are logged at Debug.
	Logger *slog.Logger
	// MemTableSize is the size in bytes of one pebble memtable. 0 means
	// DefaultMemTableSize (2 MiB). Only base rewrites go through pebble
	// (the change log does not), so bigger memtables buy little; and each
	// costs disk as well as RSS: pebble keeps the WAL of every memtable
	// plus three recycled WAL files, each about a memtable's size (with
	// 8 MiB, 32 MiB of WAL files beside a 29 MB base).
	MemTableSize uint64
	// CacheSize is the size in bytes of pebble's block cache, used by Restore
	// and Count. 0 means DefaultCacheSize (8 MiB).
	CacheSize int64
	// CloseTimeout bounds how long persist waits for a failed pebble instance
	// to close before declaring it wedged (see ErrUnusable). 0 means
	// DefaultCloseTimeout (10 s).
	CloseTimeout time.Duration
	// Now is the wall clock Write stamps into every batch (see
	// DB.LastFlushedAt). nil means time.Now. Tests inject a clock.
	Now func() time.Time
	// FoldMinBytes is the log size below which BaseDue stays false however
	// small the base. 0 means DefaultFoldMinBytes (32 MiB): rewriting a
	// small base more often costs CPU under load (100k hot keys at 600k
	// calls/s log ~13 MB/s) and shortens a restart by well under a second.
	// Tests set it low to fold often.
	FoldMinBytes int64
	// OpenTimeout bounds pebble.Open (at Open and when a failed instance is
	// reopened): on a full disk pebble retries flushing its WAL forever. 0
	// means DefaultOpenTimeout (10 s).
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
	if o.CloseTimeout < 0 {
		return fmt.Errorf("persist: Options.CloseTimeout %v is negative", o.CloseTimeout)
	}
	if o.MemTableSize >= 4<<30 {
		return fmt.Errorf("persist: Options.MemTableSize %d must be < 4 GiB", o.MemTableSize)
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
	if o.MemTableSize == 0 {
		o.MemTableSize = DefaultMemTableSize
	}
	if o.CacheSize == 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.CloseTimeout == 0 {
		o.CloseTimeout = DefaultCloseTimeout
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
	ExpireAtMs int64
	Delete     bool
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
// All methods are safe for concurrent use; they are serialised by an
// internal mutex (Restore and Count hold it for their whole scan, so a
// concurrent Write waits for them). A DB is created by Open; the zero value is
// not usable.
//
// Failure handling (see fault_test.go). A change-log write or fdatasync
// that fails returns the error and ends the file; the next Write starts a
// new one (a record the failure may have torn is never appended to). Only
// WriteBase, Replay and Open use pebble, and there pebble v2.1.7 behaves as
// follows:
//
//   - A WAL write or fsync that fails during a commit makes pebble's log
//     writer error sticky and the commit path call Logger.Fatalf, whose
//     default is os.Exit(1). persist installs a logger whose Fatalf panics;
//     WriteBase recovers the panic, returns an error wrapping ErrPebbleFatal
//     and closes the failed instance. The next call probes the directory with a
//     small synced write and, once that succeeds, opens a fresh instance
//     (replaying the WAL) under the same directory lock, which persist holds
//     throughout so no other process can slip in. The Flusher retries the rewrite later; Writes go on meanwhile.
//   - A failure to create the next WAL while pebble rotates it (when the
//     memtable fills: the first memtable of an instance is 256 KiB and they
//     double up to MemTableSize, so a base rewrite soon after (re)opening
//     rotates) panics after pebble has released a
//     mutex that a deferred call then unlocks again: the Go runtime aborts
//     the process ("fatal error: sync: unlock of unlocked mutex"), which no
//     recover can catch. A failed MANIFEST update in pebble's background
//     flushes and compactions panics in pebble's own goroutine, which also
//     ends the process. In both cases everything Write had acknowledged is
//     on disk and a restart recovers it. The probe above keeps persist from
//     driving pebble into these paths while the disk is known to be
//     failing, and a base rewrite checks before each of its pebble writes
//     that the directory can create a file and has room for a memtable
//     flush (guardPebbleWrite), stopping otherwise: what is left is a
//     failure that starts within microseconds of that check.
//   - If a failed instance cannot be closed within Options.CloseTimeout
//     (pebble panicked while holding its commit lock), or a reopen does not
//     finish within Options.OpenTimeout, the DB becomes unable to rewrite
//     the base: see ErrUnusable. Writes still work.
type DB struct {
	dir          string
	fs           vfs.FS
	log          *slog.Logger
	memTableSize uint64
	cacheSize    int64
	closeTimeout time.Duration
	openTimeout  time.Duration
	now          func() time.Time
	foldMin      int64
	plog         *pebbleLogger

	// flushedAtMs is the "flushed_at" stamp of the latest committed Write
	// (read from disk by Open, then updated by each successful Write); 0
	// when none was ever recorded.
	flushedAtMs atomic.Int64

	// reopens counts pebble instances opened after the first one.
	reopens atomic.Int64

	// logBytes mirrors mu.logBytes for LogBytes.
	logBytes atomic.Int64

	// baseBytes is the current base's size and needBase asks for a
	// WriteBase regardless of sizes (expired or v1 records on disk): read
	// by BaseDue without any lock.
	baseBytes atomic.Int64
	needBase  atomic.Bool
	// closed is set by Close (under both mutexes).
	closed atomic.Bool
	// abortBase makes a running and every later WriteBase stop at its next
	// chunk (AbortBases; shutdown).
	abortBase atomic.Bool

	// pm guards pebble and the base: WriteBase holds it for the whole
	// rewrite, Replay for its scan. Write never takes it, so a slow or
	// wedged pebble never delays the change log. Lock order: pm, then mu.
	pm struct {
		sync.Mutex
		// lock is pebble's directory lock, held from Open to Close and
		// passed to every pebble.Open via Options.Lock.
		lock *pebble.Lock
		// pdb is the live pebble instance; nil after a failure until the
		// next call reopens it.
		pdb *pebble.DB
		// unusable is set when a failed instance could not be closed (or
		// reopened in time).
		unusable error
		// baseGen and baseSeq mirror "m"+"base" (with baseBytes).
		baseGen, baseSeq uint64
		// legacy is true while v1 records may exist.
		legacy bool
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
		// as this DB knows: Replay counts those it read, Write adds).
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
	// log found damaged (see Damage).
	damagedRecords, damagedBytes atomic.Int64
}

// Open opens (creating if needed) the database in dir.
//
// If another process (or another DB in this process) has dir open, Open
// fails with an error wrapping ErrLocked and naming dir. If pebble reports
// corruption the error wraps ErrCorrupt; any other failure names dir and
// wraps the cause. Open does I/O proportional to the WAL it replays.
func Open(dir string, opts Options) (*DB, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.withDefaults()
	db := &DB{
		dir:          dir,
		fs:           opts.FS,
		log:          opts.Logger.With("component", "persist", "dir", dir),
		memTableSize: opts.MemTableSize,
		cacheSize:    opts.CacheSize,
		closeTimeout: opts.CloseTimeout,
		openTimeout:  opts.OpenTimeout,
		now:          opts.Now,
		foldMin:      opts.FoldMinBytes,
	}
	db.plog = &pebbleLogger{l: db.log}
	if err := db.fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("persist: open %s: create directory: %w", dir, err)
	}
	lock, err := pebble.LockDirectory(dir, db.fs)
	if err != nil {
		if isLockConflict(err) {
			return nil, fmt.Errorf("%w: %s is held by another process (or another Open in this one): %w", ErrLocked, dir, err)
		}
		return nil, fmt.Errorf("persist: open %s: lock: %w", dir, err)
	}
	db.pm.lock = lock
	hasData, err := db.checkUsable(opts)
	if err != nil {
		_ = lock.Close()
		return nil, err
	}
	pdb, err := db.openPebble(hasData)
	if err != nil {
		_ = lock.Close()
		return nil, err
	}
	for _, step := range []func(*pebble.DB) error{db.checkFormat, db.readFlushedAt, db.readBase, db.scanChangeFiles} {
		if err := step(pdb); err != nil {
			_ = safeClose(pdb)
			_ = lock.Close()
			return nil, err
		}
	}
	db.pm.pdb = pdb
	return db, nil
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

// checkUsable is Open's check, under the directory lock, of what pebble
// would otherwise find out by hanging or by starting over: a directory that
// does not take a synced write, a full disk, or pebble's metadata gone from
// under its tables. It reports whether the directory holds data.
func (db *DB) checkUsable(opts Options) (hasData bool, err error) {
	dir := db.dir
	if u, err := db.fs.GetDiskUsage(dir); err == nil && opts.MinFreeBytes > 0 && u.AvailBytes < uint64(opts.MinFreeBytes) {
		return false, fmt.Errorf("persist: open %s: only %d bytes free on its filesystem, need at least %d: %w",
			dir, u.AvailBytes, opts.MinFreeBytes, syscall.ENOSPC)
	}
	if err := db.probe(); err != nil {
		return false, fmt.Errorf("persist: open %s: the directory does not accept a synced write: %w", dir, err)
	}
	return db.checkMetadata()
}

// checkMetadata refuses a directory that holds data files (pebble tables,
// WALs, manifests, change files) but no pebble manifest marker: pebble
// would create an empty database there and delete the tables as
// obsolete. It reports whether the directory holds any data, so that
// openPebble can tell pebble the database must exist.
func (db *DB) checkMetadata() (hasData bool, err error) {
	names, err := db.fs.List(db.dir)
	if err != nil {
		return false, fmt.Errorf("persist: open %s: list: %w", db.dir, err)
	}
	marker := false
	var example string
	for _, name := range names {
		switch {
		case strings.HasPrefix(name, "marker.manifest."):
			marker = true
		case numberedFile(name, ".sst"), numberedFile(name, ".log"), strings.HasPrefix(name, "MANIFEST-"),
			strings.HasPrefix(name, "OPTIONS-"), isChangeFileName(name):
			hasData = true
			example = name
		}
	}
	if hasData && !marker {
		return true, fmt.Errorf("%w: %s holds data files (%s, ...) but no pebble manifest marker (marker.manifest.*): "+
			"the storage engine's metadata is missing; refusing to start an empty database over the data "+
			"(--recover=skip moves the directory aside and starts empty)", ErrCorrupt, db.dir, example)
	}
	return hasData, nil
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

// openPebble opens a pebble instance on db.dir using the lock db holds.
// mustExist makes a missing database an error (the directory holds data).
// Panics (including Fatalf) raised by pebble.Open are returned as errors.
// It waits at most openTimeout: pebble.Open retries a failing flush of its
// WAL forever (a full disk); then it returns an error wrapping ErrUnusable
// and naming pebble's last error, and leaves the attempt to finish (and be
// closed) in the background.
func (db *DB) openPebble(mustExist bool) (*pebble.DB, error) {
	popts := &pebble.Options{
		FS:               db.fs,
		Lock:             db.pm.lock,
		Logger:           db.plog,
		ErrorIfNotExists: mustExist,
		MemTableSize:     db.memTableSize,
		CacheSize:        db.cacheSize,
		// Fewer I/O round trips (each costs VM exits on a virtual disk):
		// sync a table once when written, not every 512 KiB, and let L0
		// gather more files before compacting, since most of the log they
		// hold is range-deleted by the next fold anyway.
		BytesPerSync:          64 << 20,
		L0CompactionThreshold: 16,
		L0StopWritesThreshold: 64,
		EventListener: &pebble.EventListener{
			// pebble's default calls Logger.Fatalf, which would panic in
			// whichever goroutine found the corruption (possibly a
			// background compaction). The error still reaches the reader.
			DataCorruption: func(info pebble.DataCorruptionInfo) {
				db.log.Error("persist: pebble detected data corruption", "path", info.Path, "err", info.Details)
			},
		},
	}
	// No block compression: the data is a log of recent changes and a
	// base that is rewritten whole, both short-lived; snappy cost ~3% of a
	// loaded server's CPU in flushes and compactions, for ~2x on disk.
	popts.ApplyCompressionSettings(func() pebble.DBCompressionSettings { return pebble.DBCompressionNone })
	type result struct {
		pdb *pebble.DB
		err error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.err = callPebble(func() error {
			var e error
			r.pdb, e = pebble.Open(db.dir, popts)
			return e
		})
		done <- r
	}()
	timer := time.NewTimer(db.openTimeout)
	defer timer.Stop()
	var r result
	select {
	case r = <-done:
	case <-timer.C:
		go func() {
			if r := <-done; r.pdb != nil {
				_ = safeClose(r.pdb)
			}
		}()
		return nil, fmt.Errorf("%w: open %s: pebble did not open within %v (last pebble error: %s)",
			ErrUnusable, db.dir, db.openTimeout, db.lastPebbleError())
	}
	if r.err != nil {
		err := r.err
		if pebble.IsCorruptionError(err) || errors.Is(err, pebble.ErrDBDoesNotExist) {
			return nil, fmt.Errorf("%w: open %s: %w (--recover=skip moves the directory aside and starts empty)", ErrCorrupt, db.dir, err)
		}
		return nil, fmt.Errorf("persist: open %s: %w", db.dir, err)
	}
	return r.pdb, nil
}

// lastPebbleError is the text of pebble's latest logged error, or "none".
func (db *DB) lastPebbleError() string {
	if v, ok := db.plog.last.Load().(string); ok {
		return v
	}
	return "none"
}

// checkFormat stamps a new database with formatVersion, restamps a v1 one
// (whose records Replay still reads, until the first WriteBase folds them
// into a base), and refuses one stamped with anything else. Restamping keeps
// an older celld, which would not see the log, from opening the directory.
func (db *DB) checkFormat(pdb *pebble.DB) error {
	return callPebble(func() error {
		v, closer, err := pdb.Get(formatKey)
		switch {
		case errors.Is(err, pebble.ErrNotFound):
			if err := pdb.Set(formatKey, []byte(formatVersion), pebble.Sync); err != nil {
				return fmt.Errorf("persist: open %s: write format marker: %w", db.dir, err)
			}
			return nil
		case err != nil:
			if pebble.IsCorruptionError(err) {
				return fmt.Errorf("%w: open %s: read format marker: %w", ErrCorrupt, db.dir, err)
			}
			return fmt.Errorf("persist: open %s: read format marker: %w", db.dir, err)
		}
		defer closer.Close()
		switch string(v) {
		case formatVersion:
			return nil
		case formatVersionV3, formatVersionV2:
			if err := pdb.Set(formatKey, []byte(formatVersion), pebble.Sync); err != nil {
				return fmt.Errorf("persist: open %s: restamp format marker: %w", db.dir, err)
			}
			return nil
		case formatVersionV1:
			db.pm.legacy = true
			if err := pdb.Set(formatKey, []byte(formatVersion), pebble.Sync); err != nil {
				return fmt.Errorf("persist: open %s: restamp format marker: %w", db.dir, err)
			}
			return nil
		}
		return fmt.Errorf("%w: %s holds format %q, want %q", ErrFormat, db.dir, v, formatVersion)
	})
}

// readBase loads "m"+"base" and finds the next log seq.
func (db *DB) readBase(pdb *pebble.DB) error {
	return callPebble(func() error {
		v, closer, err := pdb.Get(baseKey)
		switch {
		case errors.Is(err, pebble.ErrNotFound):
		case err != nil:
			if pebble.IsCorruptionError(err) {
				return fmt.Errorf("%w: open %s: read base: %w", ErrCorrupt, db.dir, err)
			}
			return fmt.Errorf("persist: open %s: read base: %w", db.dir, err)
		default:
			defer closer.Close()
			if len(v) != 24 {
				return fmt.Errorf("%w: %s: base marker has %d bytes, want 24", ErrCorrupt, db.dir, len(v))
			}
			db.pm.baseGen = binary.BigEndian.Uint64(v)
			db.pm.baseSeq = binary.BigEndian.Uint64(v[8:])
			db.baseBytes.Store(int64(binary.BigEndian.Uint64(v[16:])))
		}
		db.mu.nextSeq = db.pm.baseSeq + 1
		it, err := pdb.NewIter(&pebble.IterOptions{LowerBound: []byte{logPrefix}, UpperBound: []byte{logPrefix + 1}})
		if err != nil {
			return err
		}
		if it.Last() {
			k := it.Key()
			if len(k) != 9 {
				_ = it.Close()
				return fmt.Errorf("%w: %s: log key %q is not 9 bytes", ErrCorrupt, db.dir, k)
			}
			db.mu.nextSeq = max(db.mu.nextSeq, binary.BigEndian.Uint64(k[1:])+1)
		}
		return it.Close()
	})
}

// scanChangeFiles is scanChangeFilesLocked as an Open step (Open is not
// shared yet, so no lock is needed).
func (db *DB) scanChangeFiles(*pebble.DB) error { return db.scanChangeFilesLocked() }

// readFlushedAt loads the "flushed_at" stamp into db.flushedAtMs. A missing
// stamp (a directory never written to, or written before the stamp existed)
// leaves it 0; a malformed one is ErrCorrupt.
func (db *DB) readFlushedAt(pdb *pebble.DB) error {
	return callPebble(func() error {
		v, closer, err := pdb.Get(flushedKey)
		switch {
		case errors.Is(err, pebble.ErrNotFound):
			return nil
		case err != nil:
			if pebble.IsCorruptionError(err) {
				return fmt.Errorf("%w: open %s: read flush time: %w", ErrCorrupt, db.dir, err)
			}
			return fmt.Errorf("persist: open %s: read flush time: %w", db.dir, err)
		}
		defer closer.Close()
		if len(v) != 8 {
			return fmt.Errorf("%w: %s: flush time has %d bytes, want 8", ErrCorrupt, db.dir, len(v))
		}
		db.flushedAtMs.Store(int64(binary.BigEndian.Uint64(v)))
		return nil
	})
}

// LastFlushedAt returns the wall-clock time (Options.Now, millisecond
// precision) stamped into the latest committed Write: after Open, the one
// on disk; afterwards, this DB's latest successful Write. ok is false when
// no Write was ever recorded in the directory. Because the stamp is
// committed in the same synced batch as the ops, every record on disk was
// written at or before it by the clock that wrote it: a restart that reads
// a clock earlier than this knows the clock stepped back by at least the
// difference. Safe for concurrent use; O(1).
func (db *DB) LastFlushedAt() (t time.Time, ok bool) {
	ms := db.flushedAtMs.Load()
	if ms == 0 {
		return time.Time{}, false
	}
	return time.UnixMilli(ms), true
}

// Dir returns the directory passed to Open.
func (db *DB) Dir() string { return db.dir }

// Reopens returns how many times a failed pebble instance has been replaced
// by a fresh one. Safe to call concurrently; O(1).
func (db *DB) Reopens() int64 { return db.reopens.Load() }

// instanceLocked returns the live pebble instance, opening a fresh one if
// the previous one failed. db.mu must be held.
func (db *DB) instanceLocked() (*pebble.DB, error) {
	if db.closed.Load() {
		return nil, ErrClosed
	}
	if db.pm.unusable != nil {
		return nil, db.pm.unusable
	}
	if db.pm.pdb != nil {
		return db.pm.pdb, nil
	}
	// Reopening replays the WAL, rotates it, and may flush a memtable in the
	// background: all things pebble cannot survive failing (see DB). Only
	// do it once the directory accepts a synced write again.
	if err := db.probe(); err != nil {
		return nil, fmt.Errorf("persist: %s still failing, not reopening the storage engine: %w", db.dir, err)
	}
	pdb, err := db.openPebble(true)
	if err != nil {
		if errors.Is(err, ErrUnusable) {
			db.pm.unusable = err
			db.log.Error("persist: storage engine could not be reopened; base rewrites are disabled until restart (the change log goes on)", "err", err)
		}
		return nil, fmt.Errorf("persist: reopen after failure: %w", err)
	}
	db.pm.pdb = pdb
	db.reopens.Add(1)
	db.log.Info("persist: reopened storage engine after failure")
	return pdb, nil
}

// probeName is the scratch file probe writes; pebble ignores unknown files.
const probeName = "persist-probe.tmp"

// probe creates, writes, syncs and removes a small file in db.dir, to check
// that the disk accepts synced writes before a failed pebble instance is
// replaced. Cost: one small fsync.
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

// discardLocked drops the current pebble instance after it failed with
// cause. It tries to close it (releasing its hold on the directory lock);
// if Close does not return within closeTimeout the instance is wedged and
// the DB becomes unusable. db.mu must be held.
func (db *DB) discardLocked(cause error) {
	pdb := db.pm.pdb
	db.pm.pdb = nil
	if pdb == nil {
		return
	}
	done := make(chan error, 1)
	go func() { done <- safeClose(pdb) }()
	timer := time.NewTimer(db.closeTimeout)
	defer timer.Stop()
	select {
	case err := <-done:
		if err != nil {
			db.log.Debug("persist: closing failed storage engine instance", "err", err)
		}
	case <-timer.C:
		db.pm.unusable = fmt.Errorf("%w: closing the failed pebble instance did not finish within %v (cause: %w)", ErrUnusable, db.closeTimeout, cause)
		db.log.Error("persist: storage engine wedged; durable writes are disabled until restart", "cause", cause)
	}
}

// Close closes the pebble instance and releases the directory lock. It does
// not flush anything: stop the Flusher first. Calling Close again returns
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
	var err error
	if db.pm.unusable != nil {
		// The wedged instance still holds a reference on the lock; closing
		// ours does not release the file lock, process exit does.
		err = db.pm.unusable
	} else if db.pm.pdb != nil {
		if cerr := db.closeBounded(db.pm.pdb); cerr != nil {
			err = fmt.Errorf("persist: close %s: %w", db.dir, cerr)
		}
	}
	db.pm.pdb = nil
	if lerr := db.pm.lock.Close(); lerr != nil && err == nil {
		err = fmt.Errorf("persist: close %s: release lock: %w", db.dir, lerr)
	}
	return err
}

// closeBounded closes pdb, waiting at most closeTimeout: pebble's Close
// waits for its background flushes and compactions, which retry forever on
// a failing disk. On timeout the instance is left to the process's exit.
func (db *DB) closeBounded(pdb *pebble.DB) error {
	done := make(chan error, 1)
	go func() { done <- safeClose(pdb) }()
	timer := time.NewTimer(db.closeTimeout)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
		return fmt.Errorf("%w: pebble did not close within %v (last pebble error: %s)", ErrUnusable, db.closeTimeout, db.lastPebbleError())
	}
}

// AbortBases makes a WriteBase in progress, and every later one, give up
// at its next chunk with ErrAborted (the old base and log stay in charge).
// For shutdown: the final flush must not wait for a fold. Safe for
// concurrent use.
func (db *DB) AbortBases() { db.abortBase.Store(true) }

// ErrAborted is returned by a WriteBase stopped by AbortBases or Close.
var ErrAborted = errors.New("persist: base rewrite aborted (shutting down)")

// safeClose closes pdb, turning a panic into an error.
func safeClose(pdb *pebble.DB) error {
	return callPebble(pdb.Close)
}

// callPebble runs f, converting a panic (pebble panics on some I/O errors,
// and persist's logger panics on Fatalf) into an error wrapping
// ErrPebbleFatal.
func callPebble(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			switch r := r.(type) {
			case pebbleFatal:
				err = fmt.Errorf("%w: %s", ErrPebbleFatal, r.msg)
			case error:
				err = fmt.Errorf("%w: panic: %w", ErrPebbleFatal, r)
			default:
				err = fmt.Errorf("%w: panic: %v", ErrPebbleFatal, r)
			}
		}
	}()
	return f()
}

// pebbleFatal is the panic value raised by pebbleLogger.Fatalf.
type pebbleFatal struct{ msg string }

func (p pebbleFatal) Error() string { return "pebble fatal: " + p.msg }

// pebbleLogger adapts slog to pebble.Logger. Fatalf panics instead of
// exiting: persist recovers the panic when it happens in a goroutine that is
// calling into persist. In pebble's own background goroutines (e.g. a
// MANIFEST sync failing during a compaction) the panic terminates the
// process, as pebble's default os.Exit(1) would, but with a stack trace.
//
// pebble retries a failing background flush in a tight loop, logging each
// attempt: Errorf logs at most one line per second and counts the rest
// (the next line says how many were dropped). Safe for concurrent use.
type pebbleLogger struct {
	l    *slog.Logger
	last atomic.Value // string: the latest Errorf text

	mu         sync.Mutex
	lastLogged time.Time
	dropped    int
}

func (p *pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug("pebble: " + strings.TrimRight(fmt.Sprintf(format, args...), "\n"))
}

func (p *pebbleLogger) Errorf(format string, args ...any) {
	msg := strings.TrimRight(fmt.Sprintf(format, args...), "\n")
	p.last.Store(msg)
	p.mu.Lock()
	now := time.Now()
	if now.Sub(p.lastLogged) < time.Second {
		p.dropped++
		p.mu.Unlock()
		return
	}
	dropped := p.dropped
	p.lastLogged, p.dropped = now, 0
	p.mu.Unlock()
	if dropped > 0 {
		p.l.Error("pebble: "+msg, "similar_lines_dropped", dropped)
		return
	}
	p.l.Error("pebble: " + msg)
}

func (p *pebbleLogger) Fatalf(format string, args ...any) {
	msg := strings.TrimRight(fmt.Sprintf(format, args...), "\n")
	p.last.Store(msg)
	p.l.Error("pebble fatal: " + msg)
	panic(pebbleFatal{msg})
}
