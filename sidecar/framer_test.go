package sidecar

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// randReply appends one random RESP2/RESP3 value of nesting at most depth.
func randReply(r *rand.Rand, b []byte, depth int) []byte {
	k := r.IntN(12)
	if depth <= 0 && k >= 6 {
		k = r.IntN(6)
	}
	switch k {
	case 0:
		return append(b, "+OK\r\n"...)
	case 1:
		return append(b, "-ERR x y\r\n"...)
	case 2:
		b = strconv.AppendInt(append(b, ':'), r.Int64N(1e6)-5e5, 10)
		return append(b, "\r\n"...)
	case 3:
		return append(b, "$-1\r\n"...)
	case 4, 5:
		s := bytes.Repeat([]byte{'v'}, r.IntN(40))
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(b, "\r\n"...)
		b = append(b, s...)
		return append(b, "\r\n"...)
	case 6, 7:
		n := r.IntN(6)
		b = strconv.AppendInt(append(b, '*'), int64(n), 10)
		b = append(b, "\r\n"...)
		for range n {
			b = randReply(r, b, depth-1)
		}
		return b
	case 8:
		n := r.IntN(4)
		b = strconv.AppendInt(append(b, '%'), int64(n), 10)
		b = append(b, "\r\n"...)
		for range 2 * n {
			b = randReply(r, b, depth-1)
		}
		return b
	case 9:
		n := r.IntN(3)
		b = strconv.AppendInt(append(b, '|'), int64(n), 10)
		b = append(b, "\r\n"...)
		for range 2*n + 1 {
			b = randReply(r, b, depth-1)
		}
		return b
	case 10:
		return append(b, "*-1\r\n"...)
	default:
		return append(b, "*0\r\n"...)
	}
}

// feedChunks frames stream as a reader would that gets it in pieces of
// the sizes size() gives, keeping one framer across reads and moving the
// unconsumed bytes to the front of its buffer after each read; it
// returns the length of every reply found.
func feedChunks(t *testing.T, stream []byte, size func() int) []int {
	t.Helper()
	var f framer
	var buf []byte
	var got []int
	for pos := 0; pos < len(stream); {
		k := min(max(size(), 1), len(stream)-pos)
		buf = append(buf, stream[pos:pos+k]...)
		pos += k
		off := 0
		for {
			n, err := f.next(buf[off:])
			if err != nil {
				t.Fatalf("error at byte %d: %v", pos, err)
			}
			if n == 0 {
				break
			}
			got = append(got, n)
			off += n
		}
		buf = buf[:copy(buf, buf[off:])]
	}
	if len(buf) != 0 {
		t.Fatalf("%d bytes left unframed", len(buf))
	}
	return got
}

// TestFramerChunks: a stream of random replies framed one byte at a time
// and in random chunk sizes gives the same reply lengths as replyEnd in
// one pass over the whole stream.
func TestFramerChunks(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		var stream []byte
		var want []int
		for range 1 + r.IntN(20) {
			n := len(stream)
			stream = randReply(r, stream, 5)
			want = append(want, len(stream)-n)
		}
		// one pass
		off := 0
		for i, w := range want {
			n, err := replyEnd(stream[off:])
			if err != nil || n != w {
				t.Fatalf("round %d reply %d: one pass %d, %v; want %d", round, i, n, err, w)
			}
			off += n
		}
		for name, size := range map[string]func() int{
			"byte":   func() int { return 1 },
			"random": func() int { return 1 + r.IntN(64) },
			"large":  func() int { return 1 + r.IntN(4096) },
		} {
			got := feedChunks(t, stream, size)
			if !slices.Equal(got, want) {
				t.Fatalf("round %d, %s chunks: %v, want %v", round, name, got, want)
			}
		}
	}
}

// TestFramerErrors: malformed input fails in pieces as in one pass.
func TestFramerErrors(t *testing.T) {
	deep := bytes.Repeat([]byte("*1\r\n"), maxReplyDepth+1)
	for _, in := range [][]byte{
		[]byte("*2\r\n:1\r\n?\r\n"),
		[]byte("*1\r\n$3\r\nabcd\r\n"),
		[]byte("*1\r\n+OK\n"),
		[]byte("*99999999999999999999\r\n"),
		deep,
	} {
		if _, err := replyEnd(in); err == nil {
			t.Errorf("%q: one pass: no error", in)
		}
		var f framer
		var err error
		for i := 1; i <= len(in) && err == nil; i++ {
			_, err = f.next(in[:i])
		}
		if err == nil {
			t.Errorf("%q: byte by byte: no error", in)
		}
	}
	// The deepest nesting allowed frames.
	ok := append(bytes.Repeat([]byte("*1\r\n"), maxReplyDepth), ":1\r\n"...)
	if n, err := replyEnd(ok); err != nil || n != len(ok) {
		t.Errorf("depth %d: %d, %v", maxReplyDepth, n, err)
	}
}

// bigArray is a reply of n short bulk strings (an LRANGE's).
func bigArray(n int) []byte {
	b := strconv.AppendInt([]byte{'*'}, int64(n), 10)
	b = append(b, "\r\n"...)
	for i := range n {
		s := strconv.Itoa(i)
		b = strconv.AppendInt(append(b, '$'), int64(len(s)), 10)
		b = append(b, "\r\n"...)
		b = append(b, s...)
		b = append(b, "\r\n"...)
	}
	return b
}

// BenchmarkFrameLargeReply: a reply of 100k elements arriving in 64 KiB
// reads. "resume" keeps a framer across reads (what the readers do);
// "restart" re-frames from the reply's first byte after each read (what
// they did before).
func BenchmarkFrameLargeReply(b *testing.B) {
	reply := bigArray(100_000)
	const chunk = 64 << 10
	b.Run("resume", func(b *testing.B) {
		b.SetBytes(int64(len(reply)))
		for b.Loop() {
			var f framer
			for end := chunk; ; end += chunk {
				end = min(end, len(reply))
				n, err := f.next(reply[:end])
				if err != nil {
					b.Fatal(err)
				}
				if n != 0 {
					break
				}
			}
		}
	})
	b.Run("restart", func(b *testing.B) {
		b.SetBytes(int64(len(reply)))
		for b.Loop() {
			for end := chunk; ; end += chunk {
				end = min(end, len(reply))
				n, err := replyEnd(reply[:end])
				if err != nil {
					b.Fatal(err)
				}
				if n != 0 {
					break
				}
			}
		}
	})
}

// BenchmarkFrameThrottleReplies: what a sidecar's upstream reader frames
// under CL.THROTTLE load: a read of 64 five-integer replies.
func BenchmarkFrameThrottleReplies(b *testing.B) {
	var stream []byte
	for i := range 64 {
		stream = append(stream, "*5\r\n:0\r\n:100\r\n:"...)
		stream = strconv.AppendInt(stream, int64(99-i), 10)
		stream = append(stream, "\r\n:-1\r\n:0\r\n"...)
	}
	b.SetBytes(int64(len(stream)))
	var f framer
	for b.Loop() {
		for off := 0; off < len(stream); {
			n, err := f.next(stream[off:])
			if err != nil || n == 0 {
				b.Fatal(n, err)
			}
			off += n
		}
	}
}
