package sidecar

import (
	"errors"
	"strconv"
)

// parseValue decodes one RESP2 value (for CLUSTER SLOTS): arrays as []any,
// strings as string, integers as int64, errors as error, nulls as nil.
func parseValue(b []byte) (any, int, error) {
	n, err := replyEnd(b)
	if err != nil {
		return nil, 0, err
	}
	if n == 0 {
		return nil, 0, errProtocol
	}
	v, _, err := decode(b[:n])
	return v, n, err
}

// decode decodes the value at b[0]; b is a reply framer.next accepted,
// so lines are found as the framer finds them (the first '\n', after a
// '\r'): a '\r' inside a simple string must not be taken as its end,
// which would read what follows it as values of their own (a count that
// allocated a table of that size, a length past the buffer).
func decode(b []byte) (any, []byte, error) {
	nl := lineEnd(b)
	if nl < 2 || b[nl-1] != '\r' {
		return nil, nil, errProtocol
	}
	line, rest := string(b[1:nl-1]), b[nl+1:]
	switch b[0] {
	case '+':
		return line, rest, nil
	case '-':
		return errors.New(line), rest, nil
	case ':':
		n, err := strconv.ParseInt(line, 10, 64)
		return n, rest, err
	case '$':
		n, err := strconv.Atoi(line)
		if err != nil || n < -1 || (n >= 0 && n > len(rest)-2) {
			return nil, nil, errProtocol
		}
		if n < 0 {
			return nil, rest, nil
		}
		return string(rest[:n]), rest[n+2:], nil
	case '*':
		n, err := strconv.Atoi(line)
		// Every element takes at least 3 bytes ("+\r\n"): a larger
		// count is not this reply's, and is not allocated.
		if err != nil || n < -1 || n > len(rest)/3 {
			return nil, nil, errProtocol
		}
		if n < 0 {
			return nil, rest, nil
		}
		out := make([]any, n)
		for k := range out {
			out[k], rest, err = decode(rest)
			if err != nil {
				return nil, nil, err
			}
		}
		return out, rest, nil
	}
	return nil, nil, errProtocol
}
