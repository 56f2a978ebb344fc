package persist

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
)

// Databases (celld's SELECT databases, docs/databases.md). Database 0's
// entries are written exactly as before databases existed, so a data
// directory written by an older celld restores unchanged and one that only
// ever used database 0 stays byte-for-byte what it was. An entry of
// another database is the same entry preceded by a prefix naming its
// persistent id (Op.DB: an id that never changes, so SWAPDB rewrites no
// key):
//
//	database prefix: 'D' uvarint(id)          then one 's', 't' or 'd' entry
//
// The mapping from database number to id, when a SWAPDB made it other than
// the identity, is an 's' entry of the pseudo-database DBMapID with an
// empty key and EncodeDBMap's value; the last one replayed wins.
const entryDB = 'D'

// DBMapID is the pseudo database id under which the database mapping is
// written (Op{DB: DBMapID, Value: EncodeDBMap(perm)}).
const DBMapID = math.MaxUint32

// dbPrefixLen is the size of id's prefix (0 for database 0).
func dbPrefixLen(id uint32) int {
	if id == 0 {
		return 0
	}
	return 1 + uvarintLen(uint64(id))
}

// appendDBPrefix appends id's prefix to b (nothing for database 0).
func appendDBPrefix(b []byte, id uint32) []byte {
	if id == 0 {
		return b
	}
	return binary.AppendUvarint(append(b, entryDB), uint64(id))
}

// readDBPrefix reads the database prefix at chunk[off:], if there is one:
// the id (0 without a prefix) and the prefix's size.
func readDBPrefix(chunk []byte, off int) (id uint32, n int, err error) {
	if chunk[off] != entryDB {
		return 0, 0, nil
	}
	v, m := binary.Uvarint(chunk[off+1:])
	if m <= 0 || v == 0 || v > math.MaxUint32 {
		return 0, 0, fmt.Errorf("bad database prefix at byte %d", off)
	}
	return uint32(v), 1 + m, nil
}

// EncodeDBMap encodes a database mapping (perm[i] is database i's id).
func EncodeDBMap(perm []uint32) []byte {
	b := binary.AppendUvarint(nil, uint64(len(perm)))
	for _, id := range perm {
		b = binary.AppendUvarint(b, uint64(id))
	}
	return b
}

// ErrDBMap: a mapping entry that does not decode.
var ErrDBMap = errors.New("persist: malformed database mapping")

// DecodeDBMap decodes EncodeDBMap's bytes.
func DecodeDBMap(b []byte) ([]uint32, error) {
	n, m := binary.Uvarint(b)
	if m <= 0 || n > uint64(len(b)) {
		return nil, ErrDBMap
	}
	b = b[m:]
	perm := make([]uint32, 0, n)
	for range n {
		v, m := binary.Uvarint(b)
		if m <= 0 || v > math.MaxUint32 {
			return nil, ErrDBMap
		}
		perm = append(perm, uint32(v))
		b = b[m:]
	}
	if len(b) != 0 {
		return nil, ErrDBMap
	}
	return perm, nil
}

// SetDB makes the following Adds write into database id (Op.DB); a base
// starts in database 0.
func (w *BaseWriter) SetDB(id uint32) { w.dbid = id }

// AddDBMap writes the database mapping into the base.
func (w *BaseWriter) AddDBMap(perm []uint32) {
	w.buf = appendDBPrefix(w.buf, DBMapID)
	w.buf = appendSet(w.buf, nil, EncodeDBMap(perm), 0)
	w.added()
}

// pendingKey is a key of the flusher's pending set: the same name in two
// databases is two keys.
type pendingKey struct {
	db  uint32
	key string
}

// compareDBKeys orders keys by database id, then bytewise (Restore).
func compareDBKeys(a, b pendingKey) int {
	if a.db != b.db {
		return cmp.Compare(a.db, b.db)
	}
	return strings.Compare(a.key, b.key)
}
