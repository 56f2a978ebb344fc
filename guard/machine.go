package guard

import (
	"bytes"
	"sync/atomic"
)

// state is where the machine is in the request stream.
type state uint8

const (
	stIdle      state = iota // between commands: '*' starts a multibulk, anything else an inline line
	stMbLine                 // after '*': reading the argument count
	stMbLF                   // the count line ended with '\r'; '\n' must follow
	stBulkStart              // the next byte must be the '$' of a bulk header
	stBulkLine               // after '$': reading the bulk length
	stBulkLF                 // the length line ended with '\r'; '\n' must follow
	stPayload                // skipping the bulk's payload bytes
	stPayloadCR              // the payload must be followed by '\r'
	stPayloadLF              // ... and then '\n'
	stInline                 // inside an inline line, waiting for '\n'
)

// holdMax bounds the bytes of an undecided header line carried from one
// Read to the next. The longest header still valid before its "\r\n" is
// "*-9223372036854775808" (21 bytes); with its '\r', 22.
const holdMax = 32

// machine is the incremental validator: it is fed the request stream in
// arbitrary fragments through scan and keeps O(1) state between them
// (the hold array is its only buffer, 32 bytes). It decides, byte by byte,
// what redcon may see:
//
//   - header lines ("*<n>\r\n", "$<n>\r\n") are held back until their
//     "\r\n" has arrived and their number is checked, so redcon never sees
//     a bad or ignored one; "*0\r\n" and other counts <= 0, which Redis
//     ignores but redcon rejects, are dropped;
//   - bulk payloads and inline lines pass through as they arrive, except
//     that the byte completing a rejected frame (the last '\n') is never
//     passed, so redcon never parses a rejected command;
//   - once a violation is certain the machine stops passing bytes and
//     keeps counting only until Redis would have decided which error to
//     report (a header line's '\r', or MaxInline bytes without one).
//
// A machine is used by one goroutine; only authed may change concurrently.
type machine struct {
	lim    Limits
	authed *atomic.Bool // nil: always authenticated

	st      state
	verdict verdict // final; once set, scan does nothing
	got     byte    // the byte found instead of '$' (vExpectedDollar)

	// The header or inline line in progress.
	pend    verdict // violation already certain, reported when the line ends
	lineLen int     // bytes of the line so far, its '\n' excluded
	num     uint64  // the digits read so far
	ndig    uint8   // how many digits
	neg     bool    // a leading '-'
	zero    bool    // the first digit was '0' (no digit may follow)

	// The multibulk command in progress.
	argsLeft int   // bulks still expected
	arg      int   // index of the current bulk
	remain   int64 // payload bytes of the current bulk still expected
	cmdSize  int64 // declared bytes of the command so far
	capture  bool  // copying the current payload into a0

	// The first argument's first bytes, lower-cased, for the POST / Host:
	// check; a0n is its length, or -1 once it is longer than a0.
	a0  [5]byte
	a0n int

	// The inline tokenizer, mirroring redcon's splitting of an inline line.
	quote  byte // the open quote character, or 0
	esc    bool // a backslash inside quotes
	inTok  bool // inside an unquoted word
	closed bool // a quote just closed: a space or the end must follow
	cr     bool // a '\r' not yet known to end the line
	ntok   int  // words completed

	hold  [holdMax]byte
	nhold int

	commands uint64 // commands passed on so far (inline blank lines included)
}

func (m *machine) isAuthed() bool { return m.authed == nil || m.authed.Load() }

// argLimit is the argument-count bound in force now.
func (m *machine) argLimit() int {
	if m.isAuthed() {
		return m.lim.MaxArgs
	}
	return m.lim.UnauthMaxArgs
}

// scanMode tells scan where it may end its output.
type scanMode uint8

const (
	// cutAtBoundary: when a command completed in buf and another one has
	// begun after it, the output ends at the last command boundary and
	// the begun command is left unscanned (rest < len(buf)) for the
	// caller to feed again. redcon's Reader grows its buffer whenever a
	// read fills it and ends inside a command, without ever compacting
	// the commands before that command: a pipeline whose reads keep
	// ending mid-command (say, 4 KiB commands) would double the buffer
	// again and again, far beyond MaxQueryBuffer. Output that is either
	// whole commands or part of a single command keeps that buffer below
	// about twice the largest command.
	cutAtBoundary scanMode = iota
	// stopAfterCommand: scanning stops after the first complete command
	// (unauthenticated connections, whose limits may change with it).
	stopAfterCommand
)

// scan validates buf in place. buf[:from] are the held bytes of an undecided
// header line (the previous scan's m.hold, already accounted for in the
// state); buf[from:] is new input. The bytes that may be passed on are
// compacted to buf[:n] (usually in place, without copying). buf[rest:] is
// input not scanned (or scanned and then given back, see cutAtBoundary), for
// the caller to feed again later; its bytes are never part of buf[:n]. Bytes
// of an undecided header at the end of buf are copied to m.hold.
//
// Cost: one pass over header and inline bytes; bulk payloads are skipped by
// length. No allocation.
func (m *machine) scan(buf []byte, from int, mode scanMode) (n, rest int) {
	stopAfterCommand := mode == stopAfterCommand
	w := 0  // buf[:w] is decided output
	hs := 0 // start of the header line in progress
	r := from
	// bw, br: the output and input ends of the last command completed in
	// this scan. Output is compacted in place, so the input after br is
	// intact only while no gap has opened between w and r after it: a
	// command that completes with a gap (after an ignored "*0" line) ends
	// the scan at once, and an ignored line after a completed command ends
	// it before that line.
	bw, br := 0, 0
	for r < len(buf) && m.verdict == vNone {
		switch m.st {
		case stIdle:
			if buf[r] != '*' {
				m.startInline()
				m.st = stInline
				continue
			}
			hs = r
			if v, end, ok := shortNumberLine(buf, r); ok {
				// Fast path: the whole "*<n>\r\n" is here.
				m.num, m.neg, r = v, false, end
				m.lineLen = end - hs - 2
			} else {
				m.startLine()
				r++
				m.st = stMbLine
				continue
			}
			fallthrough

		case stMbLF: // reached directly by the fast path, or with '\r' read
			if m.st == stMbLF {
				if buf[r] != '\n' {
					m.verdict = vInvalidMultibulk
					return w, r
				}
				r++
			}
			if m.neg || m.num == 0 {
				// A count <= 0: Redis ignores the line; so do we.
				m.st = stIdle
				if bw > 0 {
					// Dropping it would open a gap between output
					// and input after the boundary, and the bytes
					// given back must stay intact: stop before it.
					return bw, br
				}
				continue
			}
			if v := m.multibulkHeader(r - hs); v != vNone {
				m.verdict = v
				return w, r
			}
			w = commit(buf, w, hs, r)
			m.st = stBulkStart

		case stMbLine, stBulkLine:
			for r < len(buf) && buf[r] != '\r' {
				c := buf[r]
				r++
				m.lineLen++
				if m.lineLen > m.lim.MaxInline {
					if m.st == stMbLine {
						m.verdict = vTooBigMultibulk
					} else {
						m.verdict = vTooBigBulk
					}
					return w, r
				}
				if m.pend == vNone {
					m.digit(c)
				}
			}
			if r == len(buf) {
				break
			}
			r++ // the '\r'
			if m.pend == vNone && (m.ndig == 0 || m.neg && m.zero) {
				m.pend = m.invalidLength()
			}
			if m.pend != vNone {
				m.verdict = m.pend
				return w, r
			}
			if m.st == stMbLine {
				m.st = stMbLF
			} else {
				m.st = stBulkLF
			}

		case stBulkStart:
			if w == r && m.arg > 0 && m.argsLeft > 1 {
				// A run of whole short arguments, output in place
				// (shortBulks): none is the command's first (captured)
				// or last (which completes the command).
				if r = m.shortBulks(buf, r); r == len(buf) {
					w = r
					break
				}
				w = r
			}
			c := buf[r]
			hs = r
			if c == '$' {
				// "$<d>\r\n" and "$<dd>\r\n" (no leading zero), the
				// commonest headers, read here without a call: what
				// shortNumberLine answers for them.
				var v uint64
				var end int
				ok := false
				if r+4 < len(buf) {
					b := buf[r : r+5 : r+5]
					d1, d2 := uint64(b[1]-'0'), uint64(b[2]-'0')
					if d1 <= 9 && b[2] == '\r' && b[3] == '\n' {
						v, end, ok = d1, r+4, true
					} else if d1-1 < 9 && d2 <= 9 && b[3] == '\r' && b[4] == '\n' {
						v, end, ok = d1*10+d2, r+5, true
					}
				}
				if !ok {
					v, end, ok = shortNumberLine(buf, r)
				}
				if ok {
					// Fast path: the whole "$<n>\r\n" is here.
					m.num, m.neg, r = v, false, end
					if v := m.bulkHeader(r - hs); v != vNone {
						m.verdict = v
						return w, r
					}
					w = commit(buf, w, hs, r)
					m.st = stPayload
					continue
				}
			}
			m.startLine()
			if c == '\r' {
				m.got = c
				m.verdict = vExpectedDollar
				return w, r + 1
			}
			r++
			if c != '$' {
				m.got = c
				m.pend = vExpectedDollar
			}
			m.st = stBulkLine

		case stBulkLF:
			if buf[r] != '\n' {
				m.verdict = vInvalidBulk
				return w, r
			}
			r++
			if v := m.bulkHeader(r - hs); v != vNone {
				m.verdict = v
				return w, r
			}
			w = commit(buf, w, hs, r)
			m.st = stPayload

		case stPayload:
			k := len(buf) - r
			if int64(k) >= m.remain+2 && buf[r+int(m.remain)] == '\r' && buf[r+int(m.remain)+1] == '\n' {
				// Fast path: the payload and its "\r\n" are here.
				end := r + int(m.remain) + 2
				m.capturePayload(buf[r : end-2])
				m.remain = 0
				done, v := m.argDone()
				if v != vNone {
					m.verdict = v
					return commit(buf, w, r, end-1), end
				}
				w = commit(buf, w, r, end)
				r = end
				if !done {
					m.st = stBulkStart
					continue
				}
				m.st = stIdle
				m.commands++
				bw, br = w, r
				if stopAfterCommand || w != r {
					return w, r
				}
				continue
			}
			if int64(k) > m.remain {
				k = int(m.remain)
			}
			m.capturePayload(buf[r : r+k])
			w = commit(buf, w, r, r+k)
			r += k
			m.remain -= int64(k)
			if m.remain == 0 {
				m.st = stPayloadCR
			}

		case stPayloadCR:
			if buf[r] != '\r' {
				m.verdict = vInvalidBulk
				return w, r
			}
			w = commit(buf, w, r, r+1)
			r++
			m.st = stPayloadLF

		case stPayloadLF:
			if buf[r] != '\n' {
				m.verdict = vInvalidBulk
				return w, r
			}
			r++
			done, v := m.argDone()
			if v != vNone {
				m.verdict = v
				return w, r
			}
			w = commit(buf, w, r-1, r)
			if !done {
				m.st = stBulkStart
				continue
			}
			m.st = stIdle
			m.commands++
			bw, br = w, r
			if stopAfterCommand || w != r {
				return w, r
			}

		case stInline:
			start := r
			live := m.pend == vNone // the line's bytes may still be passed
			for r < len(buf) {
				if m.pend != vNone {
					// The line is refused already: only its end matters.
					i := bytes.IndexByte(buf[r:], '\n')
					if i < 0 {
						i = len(buf) - r
					}
					if m.lineLen+i > m.lim.MaxInline {
						m.verdict = vTooBigInline
						return w, r + m.lim.MaxInline - m.lineLen + 1
					}
					m.lineLen += i
					r += i
					break
				}
				c := buf[r]
				if c == '\n' {
					break
				}
				if m.plain() && !inlineSpecial[c] {
					// Fast path: a run of ordinary bytes inside a word.
					j := r + 1
					for j < len(buf) && !inlineSpecial[buf[j]] {
						j++
					}
					if m.lineLen+j-r > m.lim.MaxInline {
						m.verdict = vTooBigInline
						r += m.lim.MaxInline - m.lineLen + 1
						return commit(buf, w, start, r-1), r
					}
					m.lineLen += j - r
					m.inTok = true
					r = j
					continue
				}
				r++
				m.lineLen++
				if m.lineLen > m.lim.MaxInline {
					m.verdict = vTooBigInline
					return commit(buf, w, start, r-1), r
				}
				m.inlineByte(c)
				if m.pend != vNone {
					w = commit(buf, w, start, r-1)
					live = false
				}
			}
			if r == len(buf) {
				if live {
					w = commit(buf, w, start, r)
				}
				break
			}
			// The line is complete.
			if v := m.endInline(); v != vNone {
				if live {
					w = commit(buf, w, start, r)
				}
				m.verdict = v
				return w, r + 1
			}
			r++
			w = commit(buf, w, start, r)
			m.st = stIdle
			m.commands++
			bw, br = w, r
			if stopAfterCommand || w != r {
				return w, r
			}
		}
	}
	if m.verdict == vNone && bw > 0 && m.st != stIdle {
		// A command completed here and another has begun: give the begun
		// one back (see cutAtBoundary). At a boundary the machine's state
		// is just stIdle; everything else is reset when the command's
		// first byte is scanned again.
		m.st, m.pend, m.nhold = stIdle, vNone, 0
		return bw, br
	}
	if m.verdict == vNone && m.pend == vNone {
		switch m.st {
		case stMbLine, stMbLF, stBulkLine, stBulkLF:
			// An undecided header: keep its bytes for the next scan.
			m.nhold = copy(m.hold[:], buf[hs:r])
			if m.nhold != r-hs { // cannot happen: digit() bounds the line
				m.verdict = m.invalidLength()
			}
		}
	}
	return w, r
}

// commit appends buf[a:b] to the output buf[:w] and returns the new w. a >= w
// always; bytes move only after an ignored "*0\r\n" has opened a gap.
func commit(buf []byte, w, a, b int) int {
	if w != a {
		copy(buf[w:], buf[a:b])
	}
	return w + b - a
}

// shortBulks is scan's fast path through a run of whole arguments
// "$<n>\r\n<payload>\r\n" with n of one or two digits (no leading zero)
// inside buf from r, while output is in place (no gap to compact): the
// middle arguments of a command, CL.THROTTLE's limits or CL.MTHROTTLE's
// keys and limits, each read here with no state change but a few counters,
// where the state machine takes four steps an argument. It stops before
// the command's last argument (argDone's checks run on the general path),
// and before any argument it would not pass whole by the rules bulkHeader
// applies: a length over UnauthMaxBulk (which is at most MaxBulk, so the
// authentication state need not be known), or one that takes the
// command's declared size past MaxQueryBuffer. Such an argument, and
// anything not in that exact shape, is left to the general path, which
// sees the state as if it had read the run itself. It returns the index
// after the last argument read (r when none). Requires m.arg > 0, so no
// argument read here is captured. No allocation.
func (m *machine) shortBulks(buf []byte, r int) int {
	size, left := m.cmdSize, m.argsLeft
	maxLen, maxSize := uint64(m.lim.UnauthMaxBulk), m.lim.MaxQueryBuffer
	start := r
	for left > 1 && r+4 < len(buf) {
		b := buf[r : r+5 : r+5]
		if b[0] != '$' {
			break
		}
		var v uint64
		var h int
		if d1 := uint64(b[1] - '0'); d1 <= 9 && b[2] == '\r' && b[3] == '\n' {
			v, h = d1, 4
		} else if d2 := uint64(b[2] - '0'); d1-1 < 9 && d2 <= 9 && b[3] == '\r' && b[4] == '\n' {
			v, h = d1*10+d2, 5
		} else {
			break
		}
		end := r + h + int(v) // the payload's "\r\n"
		if v > maxLen || end+1 >= len(buf) || buf[end] != '\r' || buf[end+1] != '\n' {
			break
		}
		ns := size + int64(h) + int64(v) + 2 + ArgOverhead
		if ns > maxSize {
			break
		}
		size, left, r = ns, left-1, end+2
	}
	if r != start {
		m.arg += m.argsLeft - left
		m.cmdSize, m.argsLeft = size, left
		m.remain, m.capture = 0, false
	}
	return r
}

// shortNumberLine is the fast path for a header line wholly inside buf:
// buf[r] is '*' or '$', then 1 to 18 digits without a leading zero (or just
// "0"), then "\r\n". It returns the number and the index after the '\n'.
// Anything else (a sign, a long or split line, junk) is left to the
// byte-by-byte path, which knows all the rules.
func shortNumberLine(buf []byte, r int) (v uint64, end int, ok bool) {
	i := r + 1
	for ; i < len(buf) && i-r <= 18; i++ {
		d := buf[i] - '0'
		if d > 9 {
			break
		}
		v = v*10 + uint64(d)
	}
	nd := i - r - 1
	if nd == 0 || nd > 18 || buf[r+1] == '0' && nd > 1 || i+1 >= len(buf) || buf[i] != '\r' || buf[i+1] != '\n' {
		return 0, 0, false
	}
	return v, i + 2, true
}

// multibulkHeader checks a positive count read into m.num (hdr is the
// header's length with its "\r\n") and starts the command.
func (m *machine) multibulkHeader(hdr int) verdict {
	if m.num > uint64(m.lim.MaxArgs) {
		return vInvalidMultibulk
	}
	if m.num > uint64(m.lim.UnauthMaxArgs) && !m.isAuthed() {
		return vUnauthMultibulk
	}
	m.argsLeft = int(m.num)
	m.arg = 0
	m.a0n = -1
	m.cmdSize = int64(hdr)
	return vNone
}

// bulkHeader checks a bulk length read into m.num and m.neg (hdr is the
// header's length with its "\r\n") and starts the payload.
func (m *machine) bulkHeader(hdr int) verdict {
	if m.neg || m.num > uint64(m.lim.MaxBulk) {
		return vInvalidBulk
	}
	if m.num > uint64(m.lim.UnauthMaxBulk) && !m.isAuthed() {
		return vUnauthBulk
	}
	m.cmdSize += int64(hdr) + int64(m.num) + 2 + ArgOverhead
	if m.cmdSize > m.lim.MaxQueryBuffer {
		return vQueryBuffer
	}
	m.remain = int64(m.num)
	m.capture = m.arg == 0 && m.num <= uint64(len(m.a0))
	if m.capture {
		m.a0n = 0
	}
	return vNone
}

// capturePayload keeps the first argument's bytes for the POST / Host: check.
func (m *machine) capturePayload(b []byte) {
	if !m.capture {
		return
	}
	for _, c := range b {
		m.a0[m.a0n] = lower(c)
		m.a0n++
	}
}

// argDone records the end of a bulk (its "\r\n" included). It reports
// whether that completed the command and, if so, whether the command must be
// refused.
func (m *machine) argDone() (done bool, v verdict) {
	m.capture = false
	m.arg++
	m.argsLeft--
	if m.argsLeft > 0 {
		return false, vNone
	}
	if m.isSecurity() {
		return true, vSecurity
	}
	return true, vNone
}

// inlineSpecial marks the bytes the inline tokenizer must look at one by
// one; others inside an unquoted word are skipped in runs.
var inlineSpecial = [256]bool{' ': true, '"': true, '\'': true, '\r': true, '\n': true}

// plain reports whether the tokenizer is in an unquoted stretch where an
// ordinary byte only extends the current word and need not be recorded.
func (m *machine) plain() bool {
	return m.quote == 0 && !m.cr && !m.closed && (m.ntok > 0 || m.a0n < 0)
}

// startLine resets the per-line state.
func (m *machine) startLine() {
	m.pend = vNone
	m.lineLen = 1 // the '*' or '$' (or, for inline, corrected by startInline)
	m.num, m.ndig, m.neg, m.zero = 0, 0, false, false
}

func (m *machine) invalidLength() verdict {
	if m.st == stMbLine || m.st == stMbLF {
		return vInvalidMultibulk
	}
	return vInvalidBulk
}

// digit consumes one byte of a header's number, which must read like Redis's
// string2ll accepts it: an optional '-', then "0" or a digit 1-9 followed by
// digits, at most 19 of them (more cannot fit an int64). Anything else makes
// the length invalid; the verdict waits for the line's '\r'.
func (m *machine) digit(c byte) {
	switch {
	case c >= '0' && c <= '9':
		if m.zero || m.ndig == 19 {
			m.pend = m.invalidLength()
			return
		}
		if m.ndig == 0 && c == '0' {
			m.zero = true
		}
		m.num = m.num*10 + uint64(c-'0')
		m.ndig++
		if m.ndig == 19 && (m.num > 1<<63 || m.num == 1<<63 && !m.neg) {
			m.pend = m.invalidLength() // outside int64
		}
	case c == '-' && m.lineLen == 2:
		m.neg = true
	default:
		m.pend = m.invalidLength()
	}
}

// startInline resets the inline tokenizer; the line's first byte has not
// been consumed yet.
func (m *machine) startInline() {
	m.lineLen = 0
	m.quote, m.esc, m.inTok, m.closed, m.cr = 0, false, false, false, false
	m.ntok = 0
	m.a0n = 0
}

// inlineByte feeds one byte of an inline line (not its '\n') to a tokenizer
// that splits the way redcon's Reader does: words separated by ' ', a quote
// allowed only at a word's start, \n \r \t escapes inside quotes, a closing
// quote followed by a space or the end of the line. A '\r' is held back one
// byte: right before the '\n' it ends the line instead.
func (m *machine) inlineByte(c byte) {
	if m.cr {
		m.cr = false
		m.token('\r')
		if m.pend != vNone {
			return
		}
	}
	if c == '\r' {
		m.cr = true
		return
	}
	m.token(c)
}

func (m *machine) token(c byte) {
	if m.closed {
		m.closed = false
		if c != ' ' {
			m.pend = vUnbalanced
		}
		return
	}
	if m.quote != 0 {
		switch {
		case m.esc:
			m.esc = false
			switch c {
			case 'n':
				c = '\n'
			case 'r':
				c = '\r'
			case 't':
				c = '\t'
			}
			m.word(c)
		case c == m.quote:
			m.quote = 0
			m.closed = true
			m.endWord()
		case c == '\\':
			m.esc = true
		default:
			m.word(c)
		}
		return
	}
	switch c {
	case ' ':
		if m.inTok {
			m.inTok = false
			m.endWord()
		}
	case '"', '\'':
		if m.inTok {
			m.pend = vUnbalanced
			return
		}
		m.quote = c
	default:
		m.inTok = true
		m.word(c)
	}
}

// word records one byte of the current word.
func (m *machine) word(c byte) {
	if m.ntok != 0 || m.a0n < 0 {
		return
	}
	if m.a0n == len(m.a0) {
		m.a0n = -1
		return
	}
	m.a0[m.a0n] = lower(c)
	m.a0n++
}

func (m *machine) endWord() {
	m.ntok++
	if m.ntok > m.argLimit() {
		m.pend = vTooBigInline
	}
}

// endInline decides a complete inline line (its '\n' has arrived).
func (m *machine) endInline() verdict {
	if m.pend != vNone {
		return m.pend
	}
	// A pending '\r' is the line's own "\r\n" ending: dropped, as redcon does.
	if m.quote != 0 {
		return vUnbalanced
	}
	if m.inTok {
		m.inTok = false
		m.endWord()
		if m.pend != vNone {
			return m.pend
		}
	}
	if m.ntok > 0 && m.isSecurity() {
		return vSecurity
	}
	return vNone
}

// isSecurity reports whether the first argument is POST or Host: (any case),
// the commands Redis's processCommand hands to securityWarningCommand.
func (m *machine) isSecurity() bool {
	switch m.a0n {
	case 4:
		return string(m.a0[:4]) == "post"
	case 5:
		return string(m.a0[:5]) == "host:"
	}
	return false
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
