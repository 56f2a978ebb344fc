package persist

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// Defaults for FlusherConfig fields left at zero.
const (
	DefaultInterval   = 100 * time.Millisecond
	DefaultMaxBackoff = 5 * time.Second
)

// FlusherConfig configures NewFlusher.
type FlusherConfig struct {
	// Interval is the flush window: every Interval the Flusher drains the
	// dirty ops and commits them with one synced batch. 0 means
	// DefaultInterval (100 ms). It bounds what kill -9 can lose.
	Interval time.Duration
	// MaxBackoff caps the delay between write retries while the disk is
	// failing (the delay starts at Interval and doubles). Drain keeps being
	// called every Interval regardless. 0 means DefaultMaxBackoff (5 s).
	MaxBackoff time.Duration
	// Drain returns the ops accumulated since its previous call (the
	// in-memory side swaps its per-shard dirty sets), appended to buf, which
	// it may grow. It is called once per window and by FlushNow (unless
	// DrainPiece is set, which is then called instead), always from
	// one goroutine at a time, never while a write is in progress, and never
	// with any persist lock held that the data path could need. nowMs is
	// Now() in Unix milliseconds. Required.
	//
	// Ownership of the returned ops' Key and Value passes to persist (see Op).
	Drain func(nowMs int64, buf []Op) []Op
	// DrainPiece, when set, is what the loop's windows drain with instead
	// of Drain: like Drain, but it may stop early, returning a piece of
	// the window's ops and more=true, to keep a window's buffers bounded
	// (the server does under --maxmemory). The loop writes each piece as
	// one synced record as soon as it is drained and drains again while
	// more is true, so the window still ends with every change made
	// before it began on disk; each piece costs a write and a sync. While
	// writes fail, or while they back off, a window drains one piece:
	// the rest waits where it is. FlushNow drains and writes its pieces
	// the same way, until more is false. Same calling rules and
	// ownership as Drain; Drain is then not called.
	DrainPiece func(nowMs int64, buf []Op) (ops []Op, more bool)
	// Encode, when set, is what windows and FlushNow drain with instead
	// of Drain and DrainPiece: it hands every change since its previous
	// call to e (its Add methods: Delete, TAT, Text, ...), which encodes
	// each one straight into the change log's record buffer, so that a
	// change costs no Op and no copy of its key (the server's path). It
	// may stop early and say more, with DrainPiece's piece rules. Same
	// calling rules as Drain; e retains nothing of the caller's after
	// each Add returns. Drain, DrainPiece and Release are then not called.
	Encode func(nowMs int64, e *Encoder) (more bool)
	// Release, when set, is called with the ops of a Drain once persist
	// keeps no reference to their bytes, so their memory may be reused:
	// right after the drain, once they are encoded into the log's buffer.
	// Called with the Flusher's lock held, from the goroutine that drained.
	Release func(ops []Op)
	// Idle, when set, is called from the loop when the changes stop: after
	// a few windows without any (not again until changes resume). The
	// server uses it to give a burst's memory back.
	Idle func()
	// Snapshot, when set, writes the full state into w (w.Add for every
	// live key, w.Spill between batches of them, without holding locks the
	// data path needs during Spill). The loop starts it through
	// DB.WriteBase, in a goroutine of its own, when DB.BaseDue says the log
	// should be folded and the latest window write succeeded; windows go
	// on being drained and written while it runs (see DB.WriteBase for why
	// the result is still exact). One at a time. nil: the log is never
	// folded (tests only; the log then grows without bound).
	Snapshot func(nowMs int64, w *BaseWriter) error
	// Now is the clock used for nowMs and Status timestamps. nil means
	// time.Now. Retry pacing always uses the real clock.
	Now func() time.Time
	// Logger receives state-change messages (first failure, recovery). nil
	// means slog.Default().
	Logger *slog.Logger
}

// Validate reports whether c is usable. NewFlusher panics if it is not.
func (c FlusherConfig) Validate() error {
	if c.Drain == nil && c.Encode == nil {
		return errors.New("persist: FlusherConfig.Drain or Encode is required")
	}
	if c.Interval < 0 {
		return fmt.Errorf("persist: FlusherConfig.Interval %v is negative", c.Interval)
	}
	if c.MaxBackoff < 0 {
		return fmt.Errorf("persist: FlusherConfig.MaxBackoff %v is negative", c.MaxBackoff)
	}
	return nil
}

// Status is a snapshot of the Flusher's health, for INFO persistence and
// metrics.
type Status struct {
	// LastFlushOK is false while the most recent write attempt failed. It is
	// true before the first attempt.
	LastFlushOK bool
	// LastFlushErr is the most recent attempt's error text, "" when OK.
	LastFlushErr string
	// LastFlushAt is when the most recent write attempt started (zero if none).
	LastFlushAt time.Time
	// LastSuccessAt is when the most recent successful write started (zero
	// if none).
	LastSuccessAt time.Time
	// LastFlushDuration is how long the most recent attempt took.
	LastFlushDuration time.Duration
	// LastFlushKeys is how many ops the most recent attempt wrote (or tried to).
	LastFlushKeys int
	// PendingKeys is the number of drained ops not yet durable (distinct
	// keys). Ops still in the in-memory dirty sets are not counted.
	PendingKeys int
	// Flushes counts write attempts; FlushErrors counts the failed ones.
	Flushes, FlushErrors int64
	// ConsecutiveErrors is the number of failed attempts since the last
	// success.
	ConsecutiveErrors int
	// NextRetryAt is, while failing, the earliest time the loop will try
	// again (FlushNow does not wait for it). Zero when OK.
	NextRetryAt time.Time
	// Bases counts successful base rewrites (log folds), BaseErrors the
	// failed ones; LastBase is the latest successful one's figures and
	// LastBaseErr the latest failure's text ("" once one succeeds).
	Bases, BaseErrors int64
	LastBase          BaseStats
	LastBaseErr       string
	// BaseRunning is true while a base rewrite runs, since BaseStartedAt.
	BaseRunning   bool
	BaseStartedAt time.Time
	// PendingBytes estimates the heap the pending set holds (its keys,
	// values, map entries and the drain buffers kept: notePendingLocked).
	PendingBytes int64
}

// Flusher runs the every-window flush loop: each Interval it drains the
// changes (Encode, or Drain's ops) into an Encoder, i.e. straight into the
// change log's records, and writes them as one synced batch
// (DB.WriteEncoded) when nothing older is pending, the usual case. When a
// write fails, or older changes are pending, the drained changes are
// decoded into a pending set keyed by key (a newer op for a key replaces
// an older pending one), which is written with DB.Write. On success
// the pending set is cleared; on failure it is kept, the failure is logged
// once (on the state change) and shown in Status, and the write is retried
// with exponential backoff capped at MaxBackoff. Drain keeps being called
// every window while failing, so the data path never waits for the disk. A write that overruns the window
// coalesces with the next one: ticks do not queue up. Each write also
// stamps the wall-clock flush time (DB.LastFlushedAt); a window with nothing
// pending writes nothing, so idling costs no fsync and leaves the stamp at
// the last flush that had changes. After a window's write, when DB.BaseDue
// says the log has outgrown the base, the loop starts folding it, in a
// goroutine of its own, by rewriting the base from FlusherConfig.Snapshot
// (DB.WriteBase): the fold never holds back the next window's write, which
// goes to the change log while pebble works. FlushNow never folds, so SAVE
// and shutdown cost one synced batch. With FlusherConfig.DrainPiece a
// window (and FlushNow) is drained and written piece by piece, one synced
// batch each, so that its buffers hold one piece at a time.
//
// A pending set left by failed writes is written back in pieces of at most
// pieceBytes, each its own synced record, so that a disk that frees less
// space than the whole backlog needs still takes part of it; pending ops
// hold copies of their keys and values (~200 B per key plus the bytes:
// pendingHeap), not the drains' blocks, so memory during an outage grows
// with the number of distinct keys changed, not with the number of changes.
//
// Start, FlushNow, Stop and Status are safe for concurrent use. A Flusher
// must be created with NewFlusher.
type Flusher struct {
	db         *DB
	interval   time.Duration
	maxBackoff time.Duration
	drain      func(nowMs int64, buf []Op) []Op
	drainPiece func(nowMs int64, buf []Op) ([]Op, bool)
	encode     func(nowMs int64, e *Encoder) bool
	snapshot   func(nowMs int64, w *BaseWriter) error
	release    func(ops []Op)
	onIdle     func()
	now        func() time.Time
	log        *slog.Logger

	// mu serialises drain+write between the loop and FlushNow. The fields
	// below it are guarded by it.
	mu      sync.Mutex
	pending map[pendingKey]Op
	// enc holds the latest drain's changes, encoded as log records, when
	// nothing older was pending (the usual case): they are written as
	// they are (DB.WriteEncoded), skipping the pending map. Non-empty only
	// between a drain and the write after it; a failed write decodes its
	// changes into pending (mergeFreshLocked), as does a drain while
	// older changes are pending.
	enc      Encoder
	buf      []Op // reused Drain buffer (Drain and DrainPiece only)
	batch    []Op // reused piece of a backlog write
	piece    int  // the current piece size limit (0: pieceBytes)
	failures int  // consecutive failed writes
	retryAt  time.Time
	// pendingBytes is the key and value bytes held by pending.
	pendingBytes int64
	// pendingPeak is the most ops pending has held since it was made
	// (notePendingLocked's estimate: a map keeps its peak's tables).
	pendingPeak int

	// baseRetryAt (Unix ns) delays the next WriteBase after a failed one;
	// folding is set while a fold goroutine runs; foldWG waits for it.
	baseRetryAt atomic.Int64
	folding     atomic.Bool
	foldWG      sync.WaitGroup
	// idle counts consecutive loop windows that drained nothing.
	idle int

	// statusMu guards status; it is never held across I/O, so Status does
	// not wait for a write in progress.
	statusMu sync.Mutex
	status   Status
	// pendingBytesEstimate is Status.PendingBytes, kept outside statusMu.
	pendingBytesEstimate atomic.Int64

	life    sync.Mutex // guards running, stopped
	running bool
	stopped bool
	stop    chan struct{}
	done    chan struct{}
}

// NewFlusher returns a Flusher writing to db. It panics if cfg is invalid
// (see FlusherConfig.Validate): configuration is a programming error here.
// The loop does not run until Start.
func NewFlusher(db *DB, cfg FlusherConfig) *Flusher {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Flusher{
		db:         db,
		interval:   cfg.Interval,
		maxBackoff: cfg.MaxBackoff,
		drain:      cfg.Drain,
		drainPiece: cfg.DrainPiece,
		encode:     cfg.Encode,
		snapshot:   cfg.Snapshot,
		release:    cfg.Release,
		onIdle:     cfg.Idle,
		now:        cfg.Now,
		log:        cfg.Logger.With("component", "persist.flusher", "dir", db.dir),
		pending:    make(map[pendingKey]Op),
		status:     Status{LastFlushOK: true},
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
	}
}

// Start starts the loop goroutine. Calling it again, or after Stop, does
// nothing.
func (f *Flusher) Start() {
	f.life.Lock()
	defer f.life.Unlock()
	if f.running || f.stopped {
		return
	}
	f.running = true
	go f.loop()
}

func (f *Flusher) loop() {
	defer close(f.done)
	// A Ticker drops ticks its reader is too slow for, so an overrunning
	// write is followed by one window's worth of ops, not a queue of ticks.
	t := time.NewTicker(f.interval)
	defer t.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-t.C:
			f.tick()
		}
	}
}

// tick is one window of the loop: always drain, write unless backing off
// (with DrainPiece: piece by piece, each written as drained), then fold
// the log into a new base if it is due.
func (f *Flusher) tick() {
	f.mu.Lock()
	defer f.mu.Unlock()
	more := f.drainLocked()
	if len(f.pending)+f.enc.Len() == 0 {
		f.idleLocked()
	} else {
		f.idle = 0
	}
	if len(f.pending)+f.enc.Len() == 0 || time.Now().Before(f.retryAt) {
		f.setPending(len(f.pending))
		more = false // backing off: the rest waits in the store
	} else if f.writeLocked() != nil {
		return
	}
	// The window's further pieces (DrainPiece), each written as drained.
	for more {
		more = f.drainLocked()
		if len(f.pending)+f.enc.Len() > 0 && f.writeLocked() != nil {
			return
		}
	}
	f.maybeBaseLocked()
}

// idleTrim is how many consecutive windows without changes end a busy
// period: the buffers it grew are then dropped (see idleLocked).
const idleTrim = 5

// idleLocked counts a window without changes. The idleTrim-th one in a
// row drops the buffers that windows reuse (the drain's op slice, the
// DB's batch and base buffers) and calls FlusherConfig.Idle, so that a
// burst's buffers do not stay on the heap while nothing happens. Once per
// busy-to-idle transition. f.mu must be held.
func (f *Flusher) idleLocked() {
	f.idle++
	if f.idle != idleTrim {
		return
	}
	f.buf = nil
	f.enc = Encoder{} // empty: the window drained nothing
	f.db.dropBuffers()
	if f.onIdle != nil {
		f.onIdle()
	}
}

// maybeBaseLocked starts a fold (a base rewrite, in its own goroutine)
// when the log is due for one, none is running, and the latest write
// succeeded (a disk that is failing writes would fail the rewrite too; and
// nothing is pending then, see DB.WriteBase). f.mu must be held.
func (f *Flusher) maybeBaseLocked() {
	if f.snapshot == nil || len(f.pending) > 0 || f.failures > 0 || f.folding.Load() ||
		time.Now().UnixNano() < f.baseRetryAt.Load() || !f.db.BaseDue() {
		return
	}
	f.folding.Store(true)
	f.foldWG.Add(1)
	go f.fold()
}

// fold rewrites the base (see maybeBaseLocked) and reports it in Status.
func (f *Flusher) fold() {
	defer f.foldWG.Done()
	defer f.folding.Store(false)
	start := f.now()
	f.statusMu.Lock()
	f.status.BaseRunning, f.status.BaseStartedAt = true, start
	f.statusMu.Unlock()
	nowMs := start.UnixMilli()
	st, err := f.db.WriteBase(func(w *BaseWriter) error { return f.snapshot(nowMs, w) })
	f.statusMu.Lock()
	f.status.BaseRunning = false
	switch {
	case err == nil:
		f.status.Bases++
		f.status.LastBase = st
		f.status.LastBaseErr = ""
	case errors.Is(err, ErrAborted):
	default:
		f.status.BaseErrors++
		f.status.LastBaseErr = err.Error()
	}
	f.statusMu.Unlock()
	if err != nil && !errors.Is(err, ErrAborted) {
		// The log and the old base stay in charge; retry after MaxBackoff
		// (so this logs at most once per MaxBackoff).
		f.baseRetryAt.Store(time.Now().Add(f.maxBackoff).UnixNano())
		f.log.Error("persist: rewriting the base failed; keeping the log", "err", err)
	}
}

// FlushNow drains and writes synchronously, ignoring any retry backoff, and
// returns the write's error (nil when nothing was pending). When it returns
// nil, every op Drain had produced before the call is durable. Used by SAVE
// and by shutdown; safe to call concurrently with the loop and with itself
// (calls are serialised). Cost: one Drain plus one synced batch (with
// DrainPiece: one per piece).
func (f *Flusher) FlushNow() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for {
		more := f.drainLocked()
		if len(f.pending)+f.enc.Len() == 0 {
			f.setPending(0)
		} else if err := f.writeLocked(); err != nil {
			return err
		}
		if !more {
			return nil
		}
	}
}

// Stop stops the loop (waiting for a write in progress), aborts a fold in
// progress (DB.AbortBases: the final flush does not wait for it), does a
// final FlushNow, waits for the fold to give up, and returns the flush's
// error. It does not close the DB. Calling Stop again just flushes again.
func (f *Flusher) Stop() error {
	f.life.Lock()
	if !f.stopped {
		f.stopped = true
		close(f.stop)
	}
	running := f.running
	f.life.Unlock()
	f.db.AbortBases()
	if running {
		<-f.done
	}
	err := f.FlushNow()
	f.foldWG.Wait()
	return err
}

// Status returns a snapshot of the Flusher's health. Safe to call
// concurrently; O(1); never waits for I/O.
func (f *Flusher) Status() Status {
	f.statusMu.Lock()
	s := f.status
	f.statusMu.Unlock()
	s.PendingBytes = f.pendingBytesEstimate.Load()
	return s
}

// drainLocked drains a window (or a piece of one) into f.enc and, when
// older changes are pending, decodes them into the pending set. It
// returns the drain's more. f.mu must be held.
func (f *Flusher) drainLocked() (more bool) {
	if len(f.pending) == 0 && f.enc.Len() == 0 {
		return f.encodeLocked()
	}
	f.mergeFreshLocked() // an unwritten drain joins pending first
	more = f.encodeLocked()
	f.mergeFreshLocked()
	return more
}

// encodeLocked resets f.enc and fills it with the changes since the last
// drain: from Encode, or from Drain or DrainPiece's ops, encoded (and then
// released). It returns the drain's more. f.mu must be held.
func (f *Flusher) encodeLocked() (more bool) {
	f.enc.Reset()
	nowMs := f.now().UnixMilli()
	if f.encode != nil {
		return f.encode(nowMs, &f.enc)
	}
	var ops []Op
	if f.drainPiece != nil {
		ops, more = f.drainPiece(nowMs, f.buf[:0])
	} else {
		ops = f.drain(nowMs, f.buf[:0])
	}
	for i := range ops {
		f.enc.Op(&ops[i])
	}
	if f.release != nil && len(ops) > 0 {
		f.release(ops) // encoded: their bytes may be reused
	}
	clear(ops) // drop references so the reused buffer doesn't pin them
	f.buf = keepOps(ops)
	return more
}

// putPendingLocked puts a copy of op into pending, replacing an older op
// for the same key. The copy's key and value share one allocation, and the
// map key is that copy (no second string). f.mu must be held. Cost: one
// allocation and a map write per op: the failure path only.
func (f *Flusher) putPendingLocked(op *Op) {
	k := pendingKey{op.DB, unsafe.String(unsafe.SliceData(op.Key), len(op.Key))}
	src := *op
	if old, ok := f.pending[k]; ok {
		f.pendingBytes -= int64(opBytes(&old))
		delete(f.pending, k)
		src = mergeDelta(old, src) // delta.go: a delta extends what is pending
	}
	c := src
	kl := len(src.Key)
	b := make([]byte, opBytes(&src))
	copy(b, src.Key)
	c.Key = b[:kl:kl]
	rest := b[kl:]
	cut := func(v []byte) []byte {
		if v == nil {
			return nil
		}
		n := copy(rest, v)
		v, rest = rest[:n:n], rest[n:]
		return v
	}
	c.Value = nil
	if len(src.Value) > 0 || (src.Kind != 0 && src.Value != nil) { // an object's delta, even empty
		c.Value = cut(src.Value)
	}
	c.Object = cut(src.Object)
	f.pending[pendingKey{c.DB, unsafe.String(unsafe.SliceData(c.Key), kl)}] = c
	f.pendingBytes += int64(len(b))
}

// opBytes is the bytes a pending op holds: its key, value (or delta) and
// image.
func opBytes(op *Op) int { return len(op.Key) + len(op.Value) + len(op.Object) }

// notePendingLocked publishes the pending set's size to Status: while
// anything is pending, pendingHeap's estimate of the map, the copies and
// the buffers the backlog keeps alive. The failure path only: O(1).
func (f *Flusher) notePendingLocked() {
	n := len(f.pending)
	if n == 0 {
		f.pendingBytesEstimate.Store(0)
		return
	}
	f.pendingPeak = max(f.pendingPeak, n)
	bufs := int64(cap(f.buf)+cap(f.batch)) * int64(unsafe.Sizeof(Op{}))
	f.pendingBytesEstimate.Store(pendingHeap(n, f.pendingPeak, f.pendingBytes) + bufs)
}

// pendingHeap estimates the heap of a pending set of n ops whose copies
// hold bytes bytes, in a map that once held peak (a Go map does not
// shrink): the map's slots and the copies rounded to their allocation.
// The map is Go's swiss table:
// up to 1024 slots (104 B of pendingKey and Op, and a control byte) per
// table, a table split in two when it is 7/8 full, so that a big map's
// tables average ln 2 of that: 1024/621 slots per entry (173 B; measured
// 173-285 B from 50,000 to 500,000 entries); a small one doubles from 8
// slots at 7/8.
func pendingHeap(n, peak int, bytes int64) int64 {
	const slot = int64(unsafe.Sizeof(pendingKey{})+unsafe.Sizeof(Op{})) + 1
	var slots int64
	if peak > 896 {
		slots = int64(peak) * 1024 / 621
	} else {
		slots = 8
		for slots*7/8 < int64(peak) {
			slots *= 2
		}
	}
	// A copy is one allocation of its key and value bytes, rounded up to
	// a size class: 8 B more on average.
	return slots*slot + bytes + int64(n)*8
}

// keepOps returns ops[:0] for reuse by the next drain, or nil when a bulk
// window made it so large that keeping it would pin megabytes of heap.
func keepOps(ops []Op) []Op {
	if cap(ops) > maxKeepOps {
		return nil
	}
	return ops[:0]
}

// maxKeepOps is the largest Drain buffer (in ops) kept between windows.
const maxKeepOps = 128 << 10

// mergeFreshLocked moves the changes encoded in f.enc into pending (each
// decoded and copied: a newer op for a key replaces an older one) and
// empties f.enc. f.mu must be held. The failure path only: one map write
// and one allocation per change.
func (f *Flusher) mergeFreshLocked() {
	if f.enc.Len() == 0 {
		return
	}
	f.enc.EachOp(f.putPendingLocked)
	f.enc.Reset()
	f.notePendingLocked()
}

// pieceBytes is the most a pending backlog's write puts in one synced
// record (see Flusher); after a failed piece the next attempt's pieces are
// a quarter as big, down to minPieceBytes, and grow back as they succeed.
// Variables only so that tests can make them small.
var (
	pieceBytes    = 1 << 20
	minPieceBytes = 16 << 10
)

// writeLocked writes f.enc as one synced batch, or the pending set in
// pieces of at most pieceBytes (each synced; a piece that succeeds leaves
// the pending set even if a later one fails), and updates the status.
// f.mu must be held.
func (f *Flusher) writeLocked() error {
	startWall := f.now()
	start := time.Now()
	var (
		n   int
		err error
	)
	if len(f.pending) == 0 {
		n = f.enc.Len()
		err = f.db.WriteEncoded(&f.enc)
		if err == nil {
			f.enc.Reset()
		} else {
			f.mergeFreshLocked()
		}
	} else { // then f.enc is empty: drainLocked merged it
		// Pieces are gathered from the map as they are written: no copy
		// of the whole backlog.
		n = len(f.pending)
		if f.piece == 0 {
			f.piece = pieceBytes
		}
		for len(f.pending) > 0 {
			piece, size := f.batch[:0], 0
			for _, op := range f.pending {
				if len(piece) > 0 && size+entrySize(&op) > f.piece {
					break
				}
				piece = append(piece, op)
				size += entrySize(&op)
			}
			f.batch = piece
			if err = f.db.Write(piece); err != nil {
				// Maybe the disk has room for less: try smaller pieces
				// next time (down to minPieceBytes).
				f.piece = max(f.piece/4, minPieceBytes)
				break
			}
			f.piece = min(f.piece*2, pieceBytes)
			for i := range piece {
				op := &piece[i]
				f.pendingBytes -= int64(opBytes(op))
				delete(f.pending, pendingKey{op.DB, unsafe.String(unsafe.SliceData(op.Key), len(op.Key))})
			}
		}
		clear(f.batch)
		f.batch = f.batch[:0]
		if len(f.pending) == 0 {
			f.pending = make(map[pendingKey]Op) // a map keeps its peak size
			f.pendingPeak = 0
			f.pendingBytes = 0
		}
		f.notePendingLocked()
	}
	took := time.Since(start)

	f.statusMu.Lock()
	defer f.statusMu.Unlock()
	st := &f.status
	st.Flushes++
	st.LastFlushAt = startWall
	st.LastFlushDuration = took
	st.LastFlushKeys = n
	if err == nil {
		if f.failures > 0 {
			f.log.Info("persist: flush recovered", "failed_attempts", f.failures, "keys", n, "took", took)
		}
		f.failures = 0
		f.retryAt = time.Time{}
		st.LastFlushOK = true
		st.LastFlushErr = ""
		st.LastSuccessAt = startWall
		st.ConsecutiveErrors = 0
		st.NextRetryAt = time.Time{}
		st.PendingKeys = 0
		return nil
	}
	f.failures++
	backoff := f.backoff()
	f.retryAt = time.Now().Add(backoff)
	st.FlushErrors++
	st.ConsecutiveErrors = f.failures
	st.NextRetryAt = startWall.Add(took + backoff)
	st.PendingKeys = len(f.pending)
	st.LastFlushOK = false
	st.LastFlushErr = err.Error()
	// Log state changes only, not every retry.
	switch {
	case f.failures == 1:
		f.log.Error("persist: flush failed; keeping ops pending and retrying", "err", err, "pending", len(f.pending))
	}
	return err
}

// backoff returns the delay before the next retry after f.failures
// consecutive failures: Interval, 2×Interval, 4×Interval, … up to MaxBackoff.
func (f *Flusher) backoff() time.Duration {
	d := f.interval
	for i := 1; i < f.failures && d < f.maxBackoff; i++ {
		d *= 2
	}
	return min(d, f.maxBackoff)
}

func (f *Flusher) setPending(n int) {
	f.statusMu.Lock()
	f.status.PendingKeys = n
	f.statusMu.Unlock()
}
