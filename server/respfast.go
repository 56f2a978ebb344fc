package server

// readMultibulk is redcon.ReadNextCommand's parse of one whole multibulk
// command, "*<n>\r\n" then n bulks "$<len>\r\n<payload>\r\n", taken in a
// single pass over the headers: each length's digits are read where its
// line is scanned (not found first and then converted by strconv.Atoi), and
// the arguments are appended to argsbuf as ReadNextCommand appends them.
//
// It answers only when the command is complete and every header is plain
// (1 to 9 digits, then "\r\n"; a count of at least 1) and every payload is
// followed by "\r\n": then ok is true and args and rest are exactly what
// ReadNextCommand returns (TestReadMultibulkMatchesRedcon). For anything
// else (an incomplete command, "*0", a sign, a long or malformed header,
// a protocol error) ok is false and nothing is consumed: the caller asks
// ReadNextCommand, which knows every rule and error text.
//
// Pure; no allocation while argsbuf has room. Cost: one pass over the
// header bytes, the payloads skipped by length.
func readMultibulk(packet []byte, argsbuf [][]byte) (args [][]byte, rest []byte, ok bool) {
	if len(packet) == 0 || packet[0] != '*' {
		return nil, nil, false
	}
	count, i, ok := plainHeader(packet, 0)
	if !ok || count == 0 {
		return nil, nil, false
	}
	args = argsbuf[:0]
	for ; count > 0; count-- {
		// "$<1 to 9 digits>\r\n", read inline: plainHeader's rule.
		if len(packet)-i < 4 || packet[i] != '$' {
			return nil, nil, false
		}
		n := int(packet[i+1]) - '0'
		if uint(n) > 9 {
			return nil, nil, false
		}
		j := i + 2
		for ; j < len(packet) && j-i <= 10; j++ { // a 10th digit already fails
			d := int(packet[j]) - '0'
			if uint(d) > 9 {
				break
			}
			n = n*10 + d
		}
		if j-i > 10 || len(packet)-j < n+4 || packet[j] != '\r' || packet[j+1] != '\n' {
			return nil, nil, false // a long, cut or odd header, or a short payload
		}
		i = j + 2
		if packet[i+n] != '\r' || packet[i+n+1] != '\n' {
			return nil, nil, false
		}
		args = append(args, packet[i:i+n])
		i += n + 2
	}
	return args, packet[i:], true
}

// plainHeader reads the header line at b[at:]: one type byte, then 1 to 9
// digits, then "\r\n". It returns the number and the index after the
// line, or ok false when the line is anything else or not whole in b.
func plainHeader(b []byte, at int) (n, end int, ok bool) {
	i := at + 1
	for ; i < len(b) && i-at <= 10; i++ { // a 10th digit already fails
		d := b[i] - '0'
		if d > 9 {
			break
		}
		n = n*10 + int(d)
	}
	if nd := i - at - 1; nd == 0 || nd > 9 || i+1 >= len(b) || b[i] != '\r' || b[i+1] != '\n' {
		return 0, 0, false
	}
	return n, i + 2, true
}
