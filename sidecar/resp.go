package sidecar

import (
	"bytes"
	"errors"
	"strconv"

	"github.com/celld/celld/server"
)

// The wire format the sidecar speaks to its owners: commands encoded as
// RESP arrays of bulk strings, and replies framed, not interpreted, so that
// an owner's reply (errors included) reaches the client byte for byte.

// errProtocol is an owner reply that is not RESP: the connection is broken.
var errProtocol = errors.New("sidecar: protocol error in owner reply")

// maxReplyDepth bounds the nesting of an owner's reply (a deeper one is
// treated as a protocol error, not followed into unbounded recursion).
const maxReplyDepth = 64

// replyEnd returns the length of the first complete RESP2 or RESP3 value
// in b, 0 when b holds only part of one, or errProtocol. It copies nothing.
// A one-shot framer: a reader that gets a reply in pieces keeps a framer
// between reads instead, so that a large reply is scanned once.
func replyEnd(b []byte) (int, error) {
	var f framer
	return f.next(b)
}

// maxCount bounds an aggregate's element count and a bulk string's length
// (1 TiB: far above what any owner can send; it keeps the arithmetic on
// them from overflowing). A larger one is a protocol error.
const maxCount = 1 << 40

// framer finds where replies end in a stream that arrives in pieces,
// resumably: between calls it keeps how far the current reply has been
// scanned and, for each aggregate still open, how many elements it still
// expects. So a reply of N elements costs one pass however many reads
// bring it (re-scanning from its first byte after every read made it
// O(N^2 / read size)). Used by one reader at a time; no allocation.
type framer struct {
	off   int                // bytes of the current reply scanned (complete values)
	depth int                // aggregates open
	left  [maxReplyDepth]int // elements still expected, per open aggregate
	// bulkLeft (drop only): bytes of a bulk string's payload and CRLF
	// still to come, the string's header and first bytes already dropped.
	bulkLeft int
}

// next returns the length of the reply that starts at b[0] once it is
// complete (and resets for the next one), 0 while b holds only part of it,
// or errProtocol. Between calls b must start at the same reply and may
// only have grown (the caller may move the bytes, not change them).
func (f *framer) next(b []byte) (int, error) {
	for {
		if f.off >= len(b) {
			return 0, nil
		}
		rest := b[f.off:]
		nl := lineEnd(rest)
		if nl < 0 {
			return 0, nil
		}
		if nl < 2 || rest[nl-1] != '\r' {
			return 0, errProtocol
		}
		line := rest[1 : nl-1]
		size := nl + 1 // bytes of this value once complete
		open := 0      // elements of an aggregate this value opens
		switch rest[0] {
		case '+', '-', ':', '_', ',', '#', '(':
		case '$', '!', '=': // bulk string, bulk error, verbatim string
			n, ok := lineInt(line)
			if !ok || n < -1 || n > maxCount {
				// Past maxCount, size+n+2 could overflow (a length
				// near 2^63 indexed before the buffer: a panic).
				return 0, errProtocol
			}
			if n >= 0 {
				if len(rest) < size+n+2 {
					return 0, nil
				}
				if rest[size+n] != '\r' || rest[size+n+1] != '\n' {
					return 0, errProtocol
				}
				size += n + 2
			}
		case '*', '~', '>', '%', '|':
			n, ok := lineInt(line)
			if !ok || n < -1 || n > maxCount {
				return 0, errProtocol
			}
			switch rest[0] {
			case '%':
				n *= 2
			case '|':
				// An attribute precedes the value it describes:
				// both are one reply.
				n = 2*n + 1
			}
			if n > 0 {
				if f.depth >= maxReplyDepth {
					return 0, errProtocol
				}
				open = n
			}
		default:
			return 0, errProtocol
		}
		f.off += size
		if open > 0 {
			f.left[f.depth] = open
			f.depth++
			continue
		}
		if f.completed() {
			n := f.off
			f.off = 0
			return n, nil
		}
	}
}

// completed counts a value as complete, and so every aggregate it
// completes; it reports whether the reply is then complete.
func (f *framer) completed() bool {
	for f.depth > 0 {
		f.left[f.depth-1]--
		if f.left[f.depth-1] > 0 {
			break
		}
		f.depth--
	}
	return f.depth == 0
}

// drop frames the reply that starts at b[0] as next does, for a reader
// that discards it as it comes (a reply larger than Config.ReplyLimit):
// it returns how many bytes at the front of b are done with (scanned
// values, and the part of a bulk string that has come, however large
// the string) and whether the reply ends there. The caller removes those
// bytes from b before the next call (b then starts mid-reply, which the
// framer's state covers); after done, b[n:] is the next reply and the
// framer is reset for it. Called once a reply is past the limit, with b
// holding the part not yet dropped; no allocation.
func (f *framer) drop(b []byte) (n int, done bool, err error) {
	if f.bulkLeft > 0 {
		k := min(f.bulkLeft, len(b))
		f.bulkLeft -= k
		if f.bulkLeft > 0 {
			return k, false, nil
		}
		if f.completed() {
			return k, true, nil
		}
		n, b = k, b[k:]
	}
	end, err := f.next(b)
	switch {
	case err != nil:
		return 0, false, err
	case end > 0:
		return n + end, true, nil
	}
	// b[f.off:] is the start of a value not complete yet: a bulk string
	// whose header is here is dropped as far as it has come.
	rest := b[f.off:]
	if len(rest) > 0 && (rest[0] == '$' || rest[0] == '!' || rest[0] == '=') {
		if nl := lineEnd(rest); nl >= 2 && rest[nl-1] == '\r' {
			if size, ok := lineInt(rest[1 : nl-1]); ok && size >= 0 {
				// next has seen the header and found size+2 bytes
				// not all here (else it would have framed them).
				whole := nl + 1 + size + 2
				f.bulkLeft = whole - len(rest)
				n += len(b)
				f.off = 0
				return n, false, nil
			}
		}
	}
	n += f.off
	f.off = 0
	return n, false, nil
}

// refusedUnrun reports whether an owner's reply refuses a command it did
// not run because it cannot decide its slot now: -TRYAGAIN (an HA leader
// fenced: its lease is not confirmed, as while etcd is down) or
// -CLUSTERDOWN (the slot has no leader). The command was not applied, so
// the fallback may answer it (refusedByOwner).
func refusedUnrun(reply []byte) bool {
	return len(reply) > 0 && reply[0] == '-' &&
		(bytes.HasPrefix(reply, []byte("-TRYAGAIN ")) || bytes.HasPrefix(reply, []byte("-CLUSTERDOWN ")))
}

// isPush reports whether an owner's reply is a RESP3 push ('>'): an
// out-of-band message (an invalidation, a Pub/Sub message), never the
// answer to a request, since the sidecar forwards no command whose reply
// is a push (celld has no Pub/Sub; CLIENT TRACKING is refused). Readers
// skip one, as a RESP3 client does; handed to the oldest request it
// answered that one wrongly, and every later request with the reply of
// the one before it.
func isPush(reply []byte) bool { return len(reply) > 0 && reply[0] == '>' }

// replyOverLimit is the outcome of a request whose reply passed
// Config.ReplyLimit and was dropped as it came: n bytes of it had come
// when it ended.
type replyOverLimit struct{ n int64 }

func (e *replyOverLimit) Error() string {
	return "sidecar: owner reply of " + strconv.FormatInt(e.n, 10) + " bytes dropped past the output limit"
}

// shrinkTo drops b's first n bytes. A buffer grown past keep (for a large
// reply) is replaced by one of keep bytes when the rest fits in it.
func shrinkTo(b []byte, n, keep int) []byte {
	rest := b[n:]
	if cap(b) <= keep || len(rest) > keep {
		return b[:copy(b, rest)]
	}
	nb := make([]byte, len(rest), keep)
	copy(nb, rest)
	return nb
}

// growTo is the next capacity of a reader's buffer of capacity c: twice
// c (at least least), but with a reply limit (Config.ReplyLimit) not much
// past it: a reply that passes the limit is dropped, so the buffer need
// not hold more than the limit and a read.
func growTo(c, least int, limit int64) int {
	n := max(2*c, least)
	if limit > 0 && int64(n) >= limit {
		n = max(int(min(limit, 1<<40))+64<<10, c+64<<10)
	}
	return n
}

// lineEnd returns the index of the first '\n' in b, or -1. Owner replies
// are mostly short lines (":99\r\n", "*5\r\n": a CL.THROTTLE reply is
// six of them), for which a plain loop over the first bytes is cheaper
// than bytes.IndexByte's call and set-up; longer lines go to IndexByte.
func lineEnd(b []byte) int {
	n := min(len(b), 16)
	for i, c := range b[:n] {
		if c == '\n' {
			return i
		}
	}
	if n == len(b) {
		return -1
	}
	if i := bytes.IndexByte(b[n:], '\n'); i >= 0 {
		return n + i
	}
	return -1
}

// lineInt parses a length or count line as strconv.Atoi does (the same
// numbers and the same refusals): a plain loop for an optional '-' and up
// to 18 digits (no overflow possible), strconv.Atoi for anything else.
// Tested against strconv.Atoi by TestLineInt.
func lineInt(line []byte) (int, bool) {
	d := line
	if len(d) > 0 && d[0] == '-' {
		d = d[1:]
	}
	if len(d) == 0 || len(d) > 18 {
		return atoi(line)
	}
	n := 0
	for _, c := range d {
		if c < '0' || c > '9' {
			return atoi(line) // "+5" is Atoi's too
		}
		n = n*10 + int(c-'0')
	}
	if len(d) < len(line) {
		n = -n
	}
	return n, true
}

func atoi(line []byte) (int, bool) {
	n, err := strconv.Atoi(string(line))
	return n, err == nil
}

// appendCommand encodes args as a RESP array of bulk strings.
func appendCommand(b []byte, args ...[]byte) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	return b
}

// appendForward appends the command of req (not a transaction): the
// client's own bytes when they are the canonical encoding of its Args (a
// copy, no re-encoding), else Args encoded. Canonical: the length
// appendCommand would produce matches, which a RESP array the parser took
// can only do when no count carries a sign or a leading zero (any such
// form is longer), so an upstream with a stricter parser (Redis refuses
// "$03") never sees what it would refuse. Cost: one pass over the
// argument lengths and one copy.
func appendForward(b []byte, req *server.ForwardReq) []byte {
	if raw := req.Raw; len(raw) > 0 && len(raw) == commandLen(req.Args) {
		return append(b, raw...)
	}
	return appendCommand(b, req.Args...)
}

// commandLen is the length of appendCommand(nil, args...).
func commandLen(args [][]byte) int {
	n := 3 + decLen(len(args))
	for _, a := range args {
		n += 5 + decLen(len(a)) + len(a)
	}
	return n
}

// decLen is the number of decimal digits of n >= 0.
func decLen(n int) int {
	d := 1
	for n >= 10 {
		n /= 10
		d++
	}
	return d
}

// appendStrings is appendCommand for string arguments (set-up commands).
func appendStrings(b []byte, args ...string) []byte {
	bs := make([][]byte, len(args))
	for i, a := range args {
		bs[i] = []byte(a)
	}
	return appendCommand(b, bs...)
}

// appendError appends a RESP error reply; CR and LF in msg become spaces.
func appendError(b []byte, msg string) []byte {
	b = append(b, '-')
	for i := 0; i < len(msg); i++ {
		ch := msg[i]
		if ch == '\r' || ch == '\n' {
			ch = ' '
		}
		b = append(b, ch)
	}
	return append(b, '\r', '\n')
}

// redirect parses "-MOVED <slot> <addr>" or "-ASK <slot> <addr>": ask
// tells which, ok is false for any other reply.
func redirect(reply []byte) (addr string, ask, ok bool) {
	var rest []byte
	switch {
	case bytes.HasPrefix(reply, []byte("-MOVED ")):
		rest = reply[len("-MOVED "):]
	case bytes.HasPrefix(reply, []byte("-ASK ")):
		rest, ask = reply[len("-ASK "):], true
	default:
		return "", false, false
	}
	rest = bytes.TrimRight(rest, "\r\n")
	_, a, found := bytes.Cut(rest, []byte(" "))
	if !found || len(a) == 0 {
		return "", false, false
	}
	return string(a), ask, true
}
