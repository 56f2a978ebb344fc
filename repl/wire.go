// Package repl is celld's replication stream: a shard's leader ships the
// effects of its writes — each changed key's current state (key, value,
// expiry), not the commands — to its followers, after a snapshot, and
// followers acknowledge by sequence number. See docs/replication.md.
//
// The wire (one TCP connection per follower, opened by the follower to
// the leader's replication address) is a sequence of frames:
//
//	frame  = type:byte  len:uvarint  payload[len]
//
//	H  hello     F→L  "celld-repl/1" epoch:uvarint
//	W  welcome   L→F  epoch:uvarint
//	X  refusal   L→F  text (then the leader closes)
//	S  snapshot  L→F  entry*
//	Z  synced    L→F  seq:uvarint          (the snapshot covers rounds ≤ seq)
//	B  batch     L→F  seq:uvarint entry*   (the effects drained in round seq)
//	P  ping      L→F  (nothing)            (every 100 ms: the link is alive)
//	A  ack       F→L  seq:uvarint          (applied everything up to seq)
//
//	entry = db:uvarint op:byte klen:uvarint key rest
//	  op 'd' delete:  (nothing)
//	  op 't' TAT:     tat:uvarint exp:varint
//	  op 's' string:  exp:varint len:uvarint text
//	  op 'w' window:  exp:varint len:uvarint state
//	  op 'o' object:  kind:byte exp:varint len:uvarint image
//
// Sequence numbers are the leader's drain rounds: strictly increasing,
// with gaps (a round with no effect sends nothing).
package repl

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/celld/celld/kinds"
	"github.com/celld/celld/store"
)

const (
	frameHello    = 'H'
	frameWelcome  = 'W'
	frameRefusal  = 'X'
	frameSnapshot = 'S'
	frameSynced   = 'Z'
	frameBatch    = 'B'
	framePing     = 'P'
	frameAck      = 'A'

	magic = "celld-repl/1"

	// maxFrame bounds one frame's payload: a reader refuses a larger
	// length instead of allocating it (a corrupt or hostile stream).
	maxFrame = 256 << 20
)

var errProtocol = errors.New("repl: protocol error")

// appendFrameHeader starts a frame of type t whose payload follows; the
// payload's length is patched by finishFrame. It returns the offset to
// patch.
func startFrame(b []byte, t byte) ([]byte, int) {
	b = append(b, t, 0, 0, 0, 0, 0) // room for a 5-byte uvarint length
	return b, len(b) - 5
}

// finishFrame writes the payload length (after at) as a fixed 5-byte
// uvarint (continuation bits set on the first four), so no bytes move.
func finishFrame(b []byte, at int) []byte {
	n := uint64(len(b) - at - 5)
	for i := 0; i < 4; i++ {
		b[at+i] = byte(n) | 0x80
		n >>= 7
	}
	b[at+4] = byte(n)
	return b
}

func frame(b []byte, t byte, payload []byte) []byte {
	b = append(b, t)
	b = binary.AppendUvarint(b, uint64(len(payload)))
	return append(b, payload...)
}

// appendEntry encodes one change of database db.
func appendEntry(b []byte, db int, c store.Change) []byte {
	b = binary.AppendUvarint(b, uint64(db))
	op := byte('t')
	switch {
	case c.Deleted:
		op = 'd'
	case c.Kind == store.KindWindow:
		op = 'w'
	case c.Kind != store.KindString:
		op = 'o'
	case !c.IsTAT:
		op = 's'
	}
	b = append(b, op)
	b = binary.AppendUvarint(b, uint64(len(c.Key)))
	b = append(b, c.Key...)
	switch op {
	case 't':
		b = binary.AppendUvarint(b, c.TAT)
		b = binary.AppendVarint(b, c.ExpireAtMs)
	case 's', 'w':
		b = binary.AppendVarint(b, c.ExpireAtMs)
		b = binary.AppendUvarint(b, uint64(len(c.Text)))
		b = append(b, c.Text...)
	case 'o':
		b = append(b, byte(c.Kind))
		b = binary.AppendVarint(b, c.ExpireAtMs)
		b = binary.AppendUvarint(b, uint64(len(c.Image)))
		b = append(b, c.Image...)
	}
	return b
}

// appendTAT encodes a plain TAT's change of database db: appendEntry of
// Change{Key: key, TAT: tat, IsTAT: true, ExpireAtMs: exp}.
func appendTAT(b []byte, db int, key []byte, tat uint64, exp int64) []byte {
	b = binary.AppendUvarint(b, uint64(db))
	b = append(b, 't')
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	b = binary.AppendUvarint(b, tat)
	return binary.AppendVarint(b, exp)
}

// decoder reads entries from a payload.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) byte1() byte {
	if len(d.b) == 0 {
		d.fail()
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = errProtocol
	}
	d.b = nil
}

// tatEntry reads one entry as entry does, returning a plain TAT's fields
// (isTAT true) without building a store.Change; for any other kind it
// only skips the entry (key is its key, the rest zero).
func (d *decoder) tatEntry() (db int, key []byte, tat uint64, exp int64, isTAT bool) {
	b := d.b
	db = int(d.uvarint())
	op := d.byte1()
	key = d.bytes()
	if op == 't' {
		tat = d.uvarint()
		exp = d.varint()
		return db, key, tat, exp, d.err == nil
	}
	d.b = b
	db, c := d.entry()
	return db, c.Key, 0, 0, false
}

// entry decodes the next entry; its byte slices alias the payload.
func (d *decoder) entry() (db int, c store.Change) {
	db = int(d.uvarint())
	op := d.byte1()
	c.Key = d.bytes()
	switch op {
	case 'd':
		c.Deleted = true
	case 't':
		c.TAT, c.IsTAT = d.uvarint(), true
		c.ExpireAtMs = d.varint()
	case 's':
		c.ExpireAtMs = d.varint()
		c.Text = d.bytes()
	case 'w':
		c.Kind = store.KindWindow
		c.ExpireAtMs = d.varint()
		c.Text = d.bytes()
	case 'o':
		c.Kind = store.Kind(d.byte1())
		c.ExpireAtMs = d.varint()
		c.Image = d.bytes()
	default:
		d.fail()
	}
	return db, c
}

// decodeObject turns an object entry's image into the store's object.
func decodeObject(kind store.Kind, image []byte) (store.Object, error) {
	switch kind {
	case store.KindHash:
		o, err := kinds.DecodeHash(image)
		return o, err
	case store.KindList:
		o, err := kinds.DecodeList(image)
		return o, err
	case store.KindZSet:
		o, err := kinds.DecodeZSet(image)
		return o, err
	}
	return nil, fmt.Errorf("repl: unknown object kind %d", kind)
}

// readFrame reads one frame into buf (grown as needed) and returns its
// type and payload (aliasing buf).
func readFrame(r *bufio.Reader, buf []byte) (byte, []byte, []byte, error) {
	t, err := r.ReadByte()
	if err != nil {
		return 0, nil, buf, err
	}
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return 0, nil, buf, err
	}
	if n > maxFrame {
		return 0, nil, buf, fmt.Errorf("%w: frame of %d bytes", errProtocol, n)
	}
	if uint64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		return 0, nil, buf, err
	}
	return t, buf, buf, nil
}

// greet opens a session on c: it sends a hello frame of type t (payload
// hello) within two seconds and reads the peer's answer. On a welcome it
// returns the session's reader, the welcome's payload and the read buffer
// (both valid until the next readFrame); on a refusal, refused is the
// peer's reason. Used by a follower (frameHello) and by a slot move's
// importer (frameMoveHello); the caller clears c's deadline.
func greet(c net.Conn, t byte, hello []byte) (r *bufio.Reader, welcome, buf []byte, refused string, err error) {
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write(frame(nil, t, hello)); err != nil {
		return nil, nil, nil, "", err
	}
	r = bufio.NewReaderSize(c, 256<<10)
	ft, p, buf, err := readFrame(r, nil)
	if err != nil {
		return nil, nil, nil, "", err
	}
	switch ft {
	case frameRefusal:
		return nil, nil, nil, string(p), nil
	case frameWelcome:
		return r, p, buf, "", nil
	default:
		return nil, nil, nil, "", errProtocol
	}
}
