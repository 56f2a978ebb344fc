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
func replyEnd(b []byte) (int, error) { return valueEnd(b, 0) }

func valueEnd(b []byte, depth int) (int, error) {
	if depth > maxReplyDepth {
		return 0, errProtocol
	}
	if len(b) == 0 {
		return 0, nil
	}
	nl := bytes.IndexByte(b, '\n')
	if nl < 0 {
		return 0, nil
	}
	if nl < 2 || b[nl-1] != '\r' {
		return 0, errProtocol
	}
	line := b[1 : nl-1]
	head := nl + 1
	switch b[0] {
	case '+', '-', ':', '_', ',', '#', '(':
		return head, nil
	case '$', '!', '=': // bulk string, bulk error, verbatim string
		n, err := strconv.Atoi(string(line))
		if err != nil || n < -1 {
			return 0, errProtocol
		}
		if n == -1 {
			return head, nil
		}
		if len(b) < head+n+2 {
			return 0, nil
		}
		if b[head+n] != '\r' || b[head+n+1] != '\n' {
			return 0, errProtocol
		}
		return head + n + 2, nil
	case '*', '~', '>', '%', '|':
		n, err := strconv.Atoi(string(line))
		if err != nil || n < -1 {
			return 0, errProtocol
		}
		if n == -1 {
			return head, nil
		}
		if n > len(b) {
			return 0, nil // each element takes 3 bytes at least: not all here yet
		}
		if b[0] == '%' || b[0] == '|' {
			n *= 2
		}
		off := head
		for range n {
			m, err := valueEnd(b[off:], depth+1)
			if err != nil || m == 0 {
				return 0, err
			}
			off += m
		}
		if b[0] == '|' {
			// An attribute precedes the value it describes: both are
			// one reply.
			m, err := valueEnd(b[off:], depth+1)
			if err != nil || m == 0 {
				return 0, err
			}
			off += m
		}
		return off, nil
	}
	return 0, errProtocol
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
