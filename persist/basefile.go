package persist

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	iofs "io/fs"
	"math"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// The base file (format celld-persist-v5): the full state as of a cut of
// the change log, written whole by WriteBase and never modified after.
//
// It is named base-<cut seq, 16 hex digits>.dat: it covers every change
// record with seq <= cut. It is written as base-<cut>.tmp, fsynced,
// renamed into place and the directory fsynced, so a base file with the
// .dat name is always complete; a crash leaves at most a .tmp, which Open
// removes. The highest-numbered base file is the base; Open and WriteBase
// remove older ones.
//
// Its records have the change log's framing (changelog.go: length, CRC-32C,
// seq, stamp, payload), so a damaged record costs only itself there too:
//
//	seq 1            header: "celld-base-v1" + cut seq (uint64 LE);
//	                 stamp = Options.Now when the rewrite started
//	seq 2, 3, ...    entry chunks of about maxChunk bytes (format.go);
//	                 stamp as the header's
//	seq MaxUint64    trailer: "celld-base-end" + chunks, keys, payload
//	                 bytes (3 × uint64 LE)
//
// A missing trailer (a file cut short after it was renamed into place) or
// a record that fails its checksum is damage: replay loads every intact
// chunk, logs a WARN naming the file and the offset and counts it in
// DB.Damage.
//
// Why a file of celld's own rather than pebble (format v4): pebble v2
// ends the process when its WAL rotation or a MANIFEST write fails (the
// directory turning read-only or full during a fold), in code paths no
// recover can reach. A base is written whole from a snapshot and read
// whole at start-up: it needs neither pebble's point lookups nor its
// compactions, only the temp-file-fsync-rename discipline, and every
// failure of that is an ordinary error returned to the fold.
const (
	baseFilePrefix = "base-"
	baseFileSuffix = ".dat"
	baseTmpSuffix  = ".tmp"

	baseHeaderMagic  = "celld-base-v1"
	baseTrailerMagic = "celld-base-end"
	baseTrailerSeq   = math.MaxUint64
)

// baseFileName is the base name of the base file covering seqs <= cut.
func baseFileName(cut uint64, suffix string) string {
	return fmt.Sprintf("%s%016x%s", baseFilePrefix, cut, suffix)
}

// parseBaseFileName returns the cut named by a base file's (or, with
// suffix baseTmpSuffix, a temp base file's) name.
func parseBaseFileName(name, suffix string) (cut uint64, ok bool) {
	hex, found := strings.CutPrefix(name, baseFilePrefix)
	if !found {
		return 0, false
	}
	hex, found = strings.CutSuffix(hex, suffix)
	if !found || len(hex) != 16 {
		return 0, false
	}
	v, err := strconv.ParseUint(hex, 16, 64)
	return v, err == nil
}

// baseFile writes one base file. Used by one goroutine.
type baseFile struct {
	fs      vfs.FS
	dir     string
	cut     uint64
	stampMs int64
	tmp     string
	f       vfs.File
	bw      *bufio.Writer
	seq     uint64 // the next chunk's record seq
	chunks  int64
	bytes   int64 // payload bytes of the chunks
	hdr     [recordHeaderLen]byte
}

// createBaseFile creates dir/base-<cut>.tmp and writes its header record.
func createBaseFile(fs vfs.FS, dir string, cut uint64, stampMs int64) (*baseFile, error) {
	b := &baseFile{fs: fs, dir: dir, cut: cut, stampMs: stampMs, seq: 2,
		tmp: fs.PathJoin(dir, baseFileName(cut, baseTmpSuffix))}
	f, err := fs.Create(b.tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", b.tmp, err)
	}
	b.f = f
	b.bw = bufio.NewWriterSize(f, 256<<10)
	hdr := binary.LittleEndian.AppendUint64([]byte(baseHeaderMagic), cut)
	if err := b.record(1, hdr); err != nil {
		b.abandon()
		return nil, err
	}
	return b, nil
}

// record writes one record (header and payload) through the buffer.
func (b *baseFile) record(seq uint64, payload []byte) error {
	binary.LittleEndian.PutUint32(b.hdr[0:], uint32(len(payload)))
	binary.LittleEndian.PutUint64(b.hdr[8:], seq)
	binary.LittleEndian.PutUint64(b.hdr[16:], uint64(b.stampMs))
	binary.LittleEndian.PutUint32(b.hdr[4:], crc32Update(crc32Sum(b.hdr[8:]), payload))
	if _, err := b.bw.Write(b.hdr[:]); err != nil {
		return fmt.Errorf("write %s: %w", b.tmp, err)
	}
	if _, err := b.bw.Write(payload); err != nil {
		return fmt.Errorf("write %s: %w", b.tmp, err)
	}
	return nil
}

// chunk writes one chunk of entries. An empty chunk is skipped.
func (b *baseFile) chunk(payload []byte) error {
	if len(payload) == 0 {
		return nil
	}
	if err := b.record(b.seq, payload); err != nil {
		return err
	}
	b.seq++
	b.chunks++
	b.bytes += int64(len(payload))
	return nil
}

// finish writes the trailer, syncs the file, renames it into place and
// syncs the directory: once it returns nil the base file is durable and
// complete. On error the temp file is removed.
func (b *baseFile) finish(keys int64, syncDir func() error) (path string, err error) {
	tr := []byte(baseTrailerMagic)
	tr = binary.LittleEndian.AppendUint64(tr, uint64(b.chunks))
	tr = binary.LittleEndian.AppendUint64(tr, uint64(keys))
	tr = binary.LittleEndian.AppendUint64(tr, uint64(b.bytes))
	err = b.record(baseTrailerSeq, tr)
	if err == nil {
		if err = b.bw.Flush(); err != nil {
			err = fmt.Errorf("write %s: %w", b.tmp, err)
		}
	}
	if err == nil {
		if err = b.f.Sync(); err != nil {
			err = fmt.Errorf("sync %s: %w", b.tmp, err)
		}
	}
	if err == nil {
		err = b.f.Close()
		b.f = nil
	}
	path = b.fs.PathJoin(b.dir, baseFileName(b.cut, baseFileSuffix))
	if err == nil {
		if err = b.fs.Rename(b.tmp, path); err != nil {
			err = fmt.Errorf("rename %s: %w", b.tmp, err)
		}
	}
	if err != nil {
		b.abandon()
		return "", err
	}
	// The rename is done: the file is complete whatever the directory
	// sync says; a failed sync only means the rename may not survive a
	// power loss, so it is reported (the caller keeps the old files).
	return path, syncDir()
}

// abandon closes and removes the temp file (giving a full disk its space
// back). Errors are ignored: Open removes leftover temp files.
func (b *baseFile) abandon() {
	if b.f != nil {
		_ = b.f.Close()
		b.f = nil
	}
	_ = b.fs.Remove(b.tmp)
}

// baseScan is what reading a base file found.
type baseScan struct {
	header  bool  // the header record was intact
	trailer bool  // the trailer record was intact
	stampMs int64 // the header's stamp
	chunks  int64
	damaged []span // records skipped in the middle
	// tail is what follows the last intact record when the trailer is
	// missing (the file was cut short); meaningful when !trailer.
	tail span
}

// readBaseFile calls fn for every intact chunk of the base file at path,
// in order, and reports damage (see the file's layout above). payload is
// only valid during fn. Cost: one sequential read, CRC-32C over it.
func readBaseFile(fs vfs.FS, path string, cut uint64, fn func(payload []byte) error) (baseScan, error) {
	var bs baseScan
	sc, _, err := readChangeFile(fs, path, nil, func(seq uint64, stamp int64, payload []byte) error {
		switch {
		case seq == 1:
			if len(payload) != len(baseHeaderMagic)+8 || string(payload[:len(baseHeaderMagic)]) != baseHeaderMagic {
				return fmt.Errorf("%w: %s is not a base file (bad header)", ErrCorrupt, path)
			}
			if got := binary.LittleEndian.Uint64(payload[len(baseHeaderMagic):]); got != cut {
				return fmt.Errorf("%w: %s says it covers seq %d, its name %d", ErrCorrupt, path, got, cut)
			}
			bs.header, bs.stampMs = true, stamp
			return nil
		case seq == baseTrailerSeq:
			bs.trailer = true
			return nil
		}
		bs.chunks++
		if fn == nil {
			return nil
		}
		return fn(payload)
	})
	if err != nil {
		return bs, err
	}
	// What follows the last intact record is the tail, reported as a cut
	// (the trailer must be the last record): a whole but damaged record
	// there is part of it, not counted twice.
	for _, d := range sc.damaged {
		if d.off < sc.valid {
			bs.damaged = append(bs.damaged, d)
		}
	}
	bs.tail = span{sc.valid, sc.size - sc.valid}
	return bs, nil
}

// readBaseHeader reads only the header record of the base file at path:
// its stamp. ok is false when the header is damaged.
func readBaseHeader(fs vfs.FS, path string, cut uint64) (stampMs int64, ok bool, err error) {
	f, err := fs.Open(path)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	buf := make([]byte, recordHeaderLen+len(baseHeaderMagic)+8)
	if _, err := f.ReadAt(buf, 0); err != nil {
		return 0, false, nil // too short: damaged
	}
	n := binary.LittleEndian.Uint32(buf[0:])
	payload := buf[recordHeaderLen:]
	if int(n) != len(payload) || binary.LittleEndian.Uint64(buf[8:]) != 1 ||
		crc32Update(crc32Sum(buf[8:recordHeaderLen]), payload) != binary.LittleEndian.Uint32(buf[4:]) ||
		string(payload[:len(baseHeaderMagic)]) != baseHeaderMagic ||
		binary.LittleEndian.Uint64(payload[len(baseHeaderMagic):]) != cut {
		return 0, false, nil
	}
	return int64(binary.LittleEndian.Uint64(buf[16:])), true, nil
}

// dirLayout is what Open finds in the data directory.
type dirLayout struct {
	bases  []uint64 // cuts of the base-*.dat files
	tmps   []string // names of base-*.tmp files
	pebble []string // names of pebble's files (a v1-v4 directory)
	marker bool     // pebble's marker.manifest.* is among them
	change bool     // change files exist
}

// scanLayout lists dir.
func scanLayout(fs vfs.FS, dir string) (dirLayout, error) {
	var l dirLayout
	names, err := fs.List(dir)
	if err != nil {
		return l, err
	}
	for _, name := range names {
		if cut, ok := parseBaseFileName(name, baseFileSuffix); ok {
			l.bases = append(l.bases, cut)
			continue
		}
		if _, ok := parseBaseFileName(name, baseTmpSuffix); ok {
			l.tmps = append(l.tmps, name)
			continue
		}
		if isChangeFileName(name) {
			l.change = true
			continue
		}
		if isPebbleFile(name) {
			l.pebble = append(l.pebble, name)
			if strings.HasPrefix(name, "marker.manifest.") {
				l.marker = true
			}
		}
	}
	return l, nil
}

// isPebbleFile reports whether name is one of pebble's files (tables,
// WALs, manifests, options, markers), not its LOCK (which persist keeps
// using as the directory lock).
func isPebbleFile(name string) bool {
	return numberedFile(name, ".sst") || numberedFile(name, ".log") || numberedFile(name, ".blob") ||
		strings.HasPrefix(name, "MANIFEST-") || strings.HasPrefix(name, "OPTIONS-") ||
		strings.HasPrefix(name, "marker.")
}

// removeQuietly removes dir/name, ignoring a missing file; it reports
// other failures.
func removeQuietly(fs vfs.FS, dir, name string) error {
	if err := fs.Remove(fs.PathJoin(dir, name)); err != nil && !errors.Is(err, iofs.ErrNotExist) {
		return err
	}
	return nil
}

func crc32Sum(b []byte) uint32              { return crc32.Checksum(b, castagnoli) }
func crc32Update(c uint32, b []byte) uint32 { return crc32.Update(c, castagnoli, b) }
