package server

// Integer arguments follow one of three rules, each a named function:
//
//   - parseInt64 (cmd_throttle.go): redis-cell's rule for CL.THROTTLE's
//     numbers (spec section 2: strconv.ParseInt's syntax — "+15", "0015" and
//     "-0" parse). It is on CL.THROTTLE's hot path and stays as it is.
//   - parseRedisInt: Redis's string2ll, for every Redis command's integer
//     argument (EXPIRE's seconds, SET's EX, SELECT, EVAL's numkeys, SCAN's
//     COUNT, HELLO, CLIENT TRACKING REDIRECT, CLUSTER slots ...).
//   - parseScanCursor: SCAN's cursor, read with strtoul as Redis reads it.
//
// All three are pure, allocation-free and safe for concurrent use.

// parseRedisInt reads b as Redis's string2ll does: an optional '-' then
// ASCII digits, the first of them not '0' unless the whole number is "0";
// no '+', no spaces, no "-0", no leading zeros; within int64.
func parseRedisInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	if len(b) == 1 && b[0] == '0' {
		return 0, true
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || b[0] < '1' || b[0] > '9' {
		return 0, false
	}
	var n uint64
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		if n > (1<<64-1)/10 {
			return 0, false
		}
		n *= 10
		if n > 1<<64-1-uint64(ch-'0') {
			return 0, false
		}
		n += uint64(ch - '0')
	}
	if neg {
		if n > 1<<63 {
			return 0, false
		}
		return -int64(n), true // n == 1<<63 wraps to MinInt64, as wanted
	}
	if n > 1<<63-1 {
		return 0, false
	}
	return int64(n), true
}

// parseScanCursor reads a SCAN cursor as Redis's parseScanCursorOrReply
// does, with strtoul in base 10: an optional '+' or '-' then digits, all
// of b consumed; a '-' negates modulo 2^64 ("-1" is 2^64-1, "-0" is 0); a
// value above 2^64-1 is an error (ERANGE); the empty string is cursor 0 (no
// digits, nothing left over), and a leading space is refused.
func parseScanCursor(b []byte) (uint64, bool) {
	if len(b) == 0 {
		return 0, true
	}
	neg := false
	if b[0] == '+' || b[0] == '-' {
		neg = b[0] == '-'
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, false // "+" or "-": no digits, the sign is left over
	}
	var n uint64
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		if n > (1<<64-1)/10 {
			return 0, false
		}
		n *= 10
		if n > 1<<64-1-uint64(ch-'0') {
			return 0, false
		}
		n += uint64(ch - '0')
	}
	if neg {
		n = -n
	}
	return n, true
}
