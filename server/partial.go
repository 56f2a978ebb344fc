package server

// partialScan follows a multibulk command that is still arriving, at the
// front of a connection's unparsed input (connState.buf[start:end]), so
// that parseBatch need not parse it again from its start after every read:
// redcon.ReadNextCommand is stateless, and a command of n arguments read in
// r pieces would cost O(n·r) — quadratic for a large command arriving in
// the guard's 64 KiB pieces. Once parseBatch has found the first command of
// a batch incomplete, it sets waiting; complete then reads on from where it
// stopped (headers only, payloads skipped by length), and parseBatch calls
// the real parser once the command is whole. A command that is not well
// formed is left to the real parser, which reports it (the guard has
// normally refused it already). Owned by the connection's goroutine.
//
// Cost: nothing for commands that arrive whole; a partial command's header
// bytes are scanned once in total, plus one full parse when it completes.
type partialScan struct {
	waiting bool // the command at buf[start:] was found incomplete
	started bool // its "*<n>" header has been read
	pos     int  // offset from buf[start] of the next header to read
	left    int  // arguments not yet seen whole
}

// complete reports whether the partial command at the front of packet may
// now be whole (or is malformed): then the scan ends and the caller parses
// it. packet starts at the same command on every call; only its end grows.
func (p *partialScan) complete(packet []byte) bool {
	if !p.started {
		n, next, ok := scanHeader(packet, 0, '*')
		if !ok || n <= 0 {
			return p.done(next >= 0 || !ok) // malformed, or nothing to wait for
		}
		if next < 0 {
			return false
		}
		p.started, p.pos, p.left = true, next, n
	}
	for p.left > 0 {
		if p.pos >= len(packet) {
			return false
		}
		n, next, ok := scanHeader(packet, p.pos, '$')
		if !ok || n < 0 {
			return p.done(true)
		}
		if next < 0 || next+n+2 > len(packet) {
			return false
		}
		p.pos = next + n + 2
		p.left--
	}
	return p.done(true)
}

// done ends the scan and returns v.
func (p *partialScan) done(v bool) bool {
	if v {
		*p = partialScan{}
	}
	return v
}

// scanHeader reads a "<kind><digits>\r\n" line at b[at:]. next is the
// offset after it, or -1 when the line has not ended yet (ok is then true
// if what is there may still become valid). A malformed line is ok=false.
func scanHeader(b []byte, at int, kind byte) (n, next int, ok bool) {
	if b[at] != kind {
		return 0, 0, false
	}
	i := at + 1
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		if i-at > 18 {
			return 0, 0, false
		}
		n = n*10 + int(b[i]-'0')
	}
	if i+1 >= len(b) {
		if i < len(b) && b[i] != '\r' {
			return 0, 0, false
		}
		return n, -1, true
	}
	if i == at+1 || b[i] != '\r' || b[i+1] != '\n' {
		return 0, 0, false
	}
	return n, i + 2, true
}
