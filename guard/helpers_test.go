package guard

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/tidwall/redcon"
)

// fakeConn is a net.Conn whose Read returns the given chunks one per call,
// then io.EOF, and which records what is written to it.
type fakeConn struct {
	chunks [][]byte
	mu     sync.Mutex
	wrote  bytes.Buffer
	closed int
}

func (f *fakeConn) Read(p []byte) (int, error) {
	for len(f.chunks) > 0 && len(f.chunks[0]) == 0 {
		f.chunks = f.chunks[1:]
	}
	if len(f.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, f.chunks[0])
	f.chunks[0] = f.chunks[0][n:]
	return n, nil
}

func (f *fakeConn) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.wrote.Write(p)
}

func (f *fakeConn) written() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.wrote.String()
}

func (f *fakeConn) Close() error                       { f.closed++; return nil }
func (f *fakeConn) LocalAddr() net.Addr                { return fakeAddr("local") }
func (f *fakeConn) RemoteAddr() net.Addr               { return fakeAddr("remote:1") }
func (f *fakeConn) SetDeadline(t time.Time) error      { return nil }
func (f *fakeConn) SetReadDeadline(t time.Time) error  { return nil }
func (f *fakeConn) SetWriteDeadline(t time.Time) error { return nil }

type fakeAddr string

func (a fakeAddr) Network() string { return "fake" }
func (a fakeAddr) String() string  { return string(a) }

// loopConn is a net.Conn whose Read returns data over and over, forever; for
// benchmarks.
type loopConn struct {
	fakeConn
	data []byte
	off  int
}

func (l *loopConn) Read(p []byte) (int, error) {
	n := copy(p, l.data[l.off:])
	l.off += n
	if l.off == len(l.data) {
		l.off = 0
	}
	return n, nil
}

// Ways to cut an input into the chunks the socket delivers.
func whole(in []byte) [][]byte { return [][]byte{bytes.Clone(in)} }

func byteByByte(in []byte) [][]byte {
	out := make([][]byte, len(in))
	for i := range in {
		out[i] = []byte{in[i]}
	}
	return out
}

func randomSplits(in []byte, seed uint64) [][]byte {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var out [][]byte
	for len(in) > 0 {
		n := 1 + rng.IntN(min(len(in), 1+rng.IntN(40)))
		out = append(out, bytes.Clone(in[:n]))
		in = in[n:]
	}
	return out
}

// result is everything observable about one guarded connection.
type result struct {
	out   []byte // what Read returned, concatenated
	reply string // what the guard wrote to the client
	err   error  // the error that ended the reading (io.EOF or *Error)
	hooks int    // OnSecurityWarning calls
	viols int    // OnViolation calls
}

// feed runs chunks through a Conn, reading with buffers of readSize bytes,
// until Read fails.
func feed(chunks [][]byte, lim Limits, authed bool, readSize int) result {
	var res result
	fc := &fakeConn{chunks: chunks}
	c := NewConn(fc, lim,
		RequireAuth(!authed),
		OnSecurityWarning(func(string) { res.hooks++ }),
		OnViolation(func(string, *Error) { res.viols++ }),
	)
	p := make([]byte, readSize)
	for {
		n, err := c.Read(p)
		if n == 0 && err == nil {
			panic("Read returned 0, nil")
		}
		res.out = append(res.out, p[:n]...)
		if err != nil {
			res.err = err
			break
		}
	}
	// Reading again must give the same error and write nothing more.
	if _, err := c.Read(p); !errors.Is(err, res.err) && err != res.err {
		panic("second Read after the end returned " + err.Error())
	}
	res.reply = fc.written()
	return res
}

// refResult is what the reference parser says about a whole input.
type refResult struct {
	complete []byte // the accepted commands, ignored headers dropped
	commands int    // how many commands redcon must parse from complete
	tail     int    // input[tail:] is the incomplete or rejected remainder
	v        verdict
	got      byte
}

// reference is a deliberately simple, whole-input implementation of the
// rules the guard enforces, written independently of the machine: it finds
// line ends with bytes.IndexByte, parses numbers with strconv, and splits
// inline lines the way redcon does.
func reference(in []byte, lim Limits, authed bool) refResult {
	lim = lim.withDefaults()
	maxArgs, maxBulk := lim.MaxArgs, lim.MaxBulk
	if !authed {
		maxArgs, maxBulk = lim.UnauthMaxArgs, lim.UnauthMaxBulk
	}
	var res refResult
	pos := 0
	stop := func(v verdict) refResult {
		res.tail, res.v = pos, v
		return res
	}
	for pos < len(in) {
		if in[pos] != '*' {
			i := bytes.IndexByte(in[pos:], '\n')
			if i < 0 {
				if len(in)-pos > lim.MaxInline {
					return stop(vTooBigInline)
				}
				return stop(vNone)
			}
			if i > lim.MaxInline {
				return stop(vTooBigInline)
			}
			line := in[pos : pos+i]
			line = bytes.TrimSuffix(line, []byte("\r"))
			args, v := refSplit(line, maxArgs)
			if v != vNone {
				return stop(v)
			}
			if len(args) > 0 && refSecurity(args[0]) {
				return stop(vSecurity)
			}
			if len(args) > 0 {
				res.commands++
			}
			res.complete = append(res.complete, in[pos:pos+i+1]...)
			pos += i + 1
			continue
		}
		i := bytes.IndexByte(in[pos:], '\r')
		if i < 0 {
			if len(in)-pos > lim.MaxInline {
				return stop(vTooBigMultibulk)
			}
			return stop(vNone)
		}
		if i > lim.MaxInline {
			return stop(vTooBigMultibulk)
		}
		count, ok := refString2ll(in[pos+1 : pos+i])
		if !ok {
			return stop(vInvalidMultibulk)
		}
		q := pos + i + 1
		if q >= len(in) {
			return stop(vNone)
		}
		if in[q] != '\n' {
			return stop(vInvalidMultibulk)
		}
		q++
		if count <= 0 {
			pos = q
			continue
		}
		if count > int64(lim.MaxArgs) {
			return stop(vInvalidMultibulk)
		}
		if count > int64(maxArgs) {
			return stop(vUnauthMultibulk)
		}
		size := int64(q - pos)
		var arg0 []byte
		for j := int64(0); j < count; j++ {
			if q >= len(in) {
				return stop(vNone)
			}
			if in[q] == '\r' {
				res.got = '\r'
				return stop(vExpectedDollar)
			}
			i := bytes.IndexByte(in[q:], '\r')
			if i < 0 {
				if len(in)-q > lim.MaxInline {
					return stop(vTooBigBulk)
				}
				return stop(vNone)
			}
			if i > lim.MaxInline {
				return stop(vTooBigBulk)
			}
			if in[q] != '$' {
				res.got = in[q]
				return stop(vExpectedDollar)
			}
			n, ok := refString2ll(in[q+1 : q+i])
			if !ok {
				return stop(vInvalidBulk)
			}
			if q+i+1 >= len(in) {
				return stop(vNone)
			}
			if in[q+i+1] != '\n' {
				return stop(vInvalidBulk)
			}
			if n < 0 || n > lim.MaxBulk {
				return stop(vInvalidBulk)
			}
			if n > maxBulk {
				return stop(vUnauthBulk)
			}
			size += int64(i+2) + n + 2 + ArgOverhead
			if size > lim.MaxQueryBuffer {
				return stop(vQueryBuffer)
			}
			p := q + i + 2
			end := p + int(n)
			if end >= len(in) {
				return stop(vNone)
			}
			if in[end] != '\r' {
				return stop(vInvalidBulk)
			}
			if end+1 >= len(in) {
				return stop(vNone)
			}
			if in[end+1] != '\n' {
				return stop(vInvalidBulk)
			}
			if j == 0 {
				arg0 = in[p:end]
			}
			q = end + 2
		}
		if refSecurity(arg0) {
			return stop(vSecurity)
		}
		res.commands++
		res.complete = append(res.complete, in[pos:q]...)
		pos = q
	}
	return stop(vNone)
}

// refString2ll parses like Redis's string2ll: optional '-', no '+', no
// leading zeros, no "-0", within int64.
func refString2ll(b []byte) (int64, bool) {
	s := string(b)
	if s == "" || s[0] == '+' || s == "-0" {
		return 0, false
	}
	digits := s
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) > 1 && digits[0] == '0' {
		return 0, false
	}
	if digits == "" || digits[0] == '-' {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}

// refSplit splits an inline line (its line ending removed) the way redcon's
// Reader does, failing with vUnbalanced where redcon fails and with
// vTooBigInline as soon as a word beyond limit is complete.
func refSplit(line []byte, limit int) ([][]byte, verdict) {
	var args [][]byte
	add := func(a []byte) bool {
		args = append(args, a)
		return len(args) <= limit
	}
	pos := 0
	for pos < len(line) {
		c := line[pos]
		switch {
		case c == ' ':
			pos++
		case c == '"' || c == '\'':
			pos++
			var word []byte
			closed := false
			for pos < len(line) && !closed {
				c2 := line[pos]
				pos++
				switch {
				case c2 == '\\':
					if pos == len(line) {
						return args, vUnbalanced
					}
					e := line[pos]
					pos++
					switch e {
					case 'n':
						e = '\n'
					case 'r':
						e = '\r'
					case 't':
						e = '\t'
					}
					word = append(word, e)
				case c2 == c:
					closed = true
				default:
					word = append(word, c2)
				}
			}
			if !closed {
				return args, vUnbalanced
			}
			if !add(word) {
				return args, vTooBigInline
			}
			if pos < len(line) && line[pos] != ' ' {
				return args, vUnbalanced
			}
		default:
			start := pos
			for pos < len(line) && line[pos] != ' ' {
				if line[pos] == '"' || line[pos] == '\'' {
					return args, vUnbalanced
				}
				pos++
			}
			if !add(line[start:pos]) {
				return args, vTooBigInline
			}
		}
	}
	return args, vNone
}

func refSecurity(a []byte) bool {
	return bytes.EqualFold(a, []byte("post")) || bytes.EqualFold(a, []byte("host:"))
}

// checkReference compares a guarded run with the reference's verdict on the
// same input: redcon must have received exactly the accepted commands, then
// only a prefix of the remaining input, and the client the same reply.
// It also parses what redcon received with redcon's own reader, which must
// find exactly ref.commands commands and no protocol error.
func checkReference(in []byte, res result, ref refResult) error {
	if !bytes.HasPrefix(res.out, ref.complete) {
		return fmt.Errorf("output %s does not start with the accepted commands %s", abbrev(res.out), abbrev(ref.complete))
	}
	rest := res.out[len(ref.complete):]
	if !bytes.HasPrefix(in[ref.tail:], rest) {
		return fmt.Errorf("output after the accepted commands %s is not a prefix of the input's tail %s", abbrev(rest), abbrev(in[ref.tail:]))
	}
	wantReply := ""
	if ref.v != vNone {
		wantReply = newError(ref.v, ref.got).Reply
	}
	if res.reply != wantReply {
		return fmt.Errorf("client got %q, reference says %q", res.reply, wantReply)
	}
	var e *Error
	switch {
	case ref.v == vNone && res.err != io.EOF:
		return fmt.Errorf("stream ended with %v, reference says it is valid", res.err)
	case ref.v != vNone && (!errors.As(res.err, &e) || e.Reason != newError(ref.v, ref.got).Reason):
		return fmt.Errorf("stream ended with %v, reference says %q", res.err, newError(ref.v, ref.got).Reason)
	}
	n, err := redconCommands(res.out)
	if err != nil {
		return fmt.Errorf("redcon's reader failed on the guarded stream %s: %v", abbrev(res.out), err)
	}
	if n != ref.commands {
		return fmt.Errorf("redcon parsed %d commands from %s, reference says %d", n, abbrev(res.out), ref.commands)
	}
	return nil
}

// redconCommands counts the commands redcon's reader parses from b, read to
// its end.
func redconCommands(b []byte) (int, error) {
	rd := redcon.NewReader(bytes.NewReader(b))
	n := 0
	for {
		cmds, err := rd.ReadCommands()
		n += len(cmds)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// redconArgs returns the arguments redcon parses from one complete inline
// line; a line without words gives none.
func redconArgs(line []byte) ([][]byte, error) {
	cmd, err := redcon.Parse(line)
	if err != nil && err.Error() == "incomplete command" {
		return nil, nil
	}
	return cmd.Args, err
}
