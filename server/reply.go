package server

import (
	"strconv"

	"github.com/tidwall/redcon"
)

// Reply encoding. Every command appends its reply to the connection's output
// buffer through these helpers; they know the two protocol versions so that
// handlers say "null" or "map" once and RESP2/RESP3 framing follows from
// the client's HELLO. None of them allocates beyond growing the buffer.

// The plain encodings are redcon's (the protocol library the server
// already uses to parse); these short names keep call sites readable.

func appendInt(b []byte, n int64) []byte         { return redcon.AppendInt(b, n) }
func appendArray(b []byte, n int) []byte         { return redcon.AppendArray(b, n) }
func appendBulk(b []byte, s []byte) []byte       { return redcon.AppendBulk(b, s) }
func appendBulkString(b []byte, s string) []byte { return redcon.AppendBulkString(b, s) }

// appendHeader appends a RESP aggregate or bulk header of any kind ('%',
// '~', '|' for RESP3 maps, sets and attributes as well as '*' and '$').
func appendHeader(b []byte, kind byte, n int) []byte {
	b = append(b, kind)
	b = strconv.AppendInt(b, int64(n), 10)
	return append(b, '\r', '\n')
}

// appendSimple appends a status reply; s must not contain CR or LF.
func appendSimple(b []byte, s string) []byte {
	b = append(b, '+')
	b = append(b, s...)
	return append(b, '\r', '\n')
}

const replyOK = "+OK\r\n"

// appendError appends an error reply. msg is the full text after '-' (with
// its own prefix, e.g. "ERR ..." or "Cell error: ..."). As Redis does, CR and
// LF at either end are trimmed and those inside become spaces, so no error
// can break the framing.
func appendError(b []byte, msg string) []byte {
	for len(msg) > 0 && (msg[0] == '\r' || msg[0] == '\n') {
		msg = msg[1:]
	}
	for len(msg) > 0 && (msg[len(msg)-1] == '\r' || msg[len(msg)-1] == '\n') {
		msg = msg[:len(msg)-1]
	}
	b = append(b, '-')
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		b = append(b, c)
	}
	return append(b, '\r', '\n')
}

// cString returns s cut at its first NUL, as C's %s prints it.
func cString(s []byte) []byte {
	for i, c := range s {
		if c == 0 {
			return s[:i]
		}
	}
	return s
}

// Protocol-dependent shapes.

func (c *client) appendNull(b []byte) []byte {
	if c.resp3 {
		return append(b, "_\r\n"...)
	}
	return append(b, "$-1\r\n"...)
}

func (c *client) appendNullArray(b []byte) []byte {
	if c.resp3 {
		return append(b, "_\r\n"...)
	}
	return append(b, "*-1\r\n"...)
}

// appendMap appends a map header of n pairs (RESP3) or an array of 2n
// elements (RESP2).
func (c *client) appendMap(b []byte, n int) []byte {
	if c.resp3 {
		return appendHeader(b, '%', n)
	}
	return appendArray(b, 2*n)
}

// appendSet appends a set header (RESP3) or an array header (RESP2).
func (c *client) appendSet(b []byte, n int) []byte {
	if c.resp3 {
		return appendHeader(b, '~', n)
	}
	return appendArray(b, n)
}

// appendVerbatim appends a verbatim string (RESP3 "=", format txt) or a bulk
// string (RESP2), as Redis does for INFO and CLIENT INFO/LIST.
func (c *client) appendVerbatim(b []byte, s string) []byte {
	if !c.resp3 {
		return appendBulkString(b, s)
	}
	b = appendHeader(b, '=', len(s)+4)
	b = append(b, "txt:"...)
	b = append(b, s...)
	return append(b, '\r', '\n')
}
