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

func decode(b []byte) (any, []byte, error) {
	i := 0
	for i < len(b) && b[i] != '\r' {
		i++
	}
	if i+1 >= len(b) {
		return nil, nil, errProtocol
	}
	line, rest := string(b[1:i]), b[i+2:]
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
		if err != nil || n < -1 || len(rest) < n+2 {
			return nil, nil, errProtocol
		}
		if n < 0 {
			return nil, rest, nil
		}
		return string(rest[:n]), rest[n+2:], nil
	case '*':
		n, err := strconv.Atoi(line)
		if err != nil || n < -1 {
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
