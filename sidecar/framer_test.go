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

// randBigReply appends a random reply as randReply does, or one with
// bulk strings of up to 3,000 bytes (alone, in an array, or in a map
// with small values), so that a reply can pass a small limit in the
// middle of a string.
func randBigReply(r *rand.Rand, b []byte) []byte {
	bulk := func(b []byte) []byte {
		s := bytes.Repeat([]byte{'w'}, r.IntN(3000))
		b = strconv.AppendInt(append(b, '$'), int64(len(s)), 10)
		b = append(append(append(b, "\r\n"...), s...), "\r\n"...)
		return b
	}
	switch r.IntN(4) {
	case 0:
		return randReply(r, b, 5)
	case 1:
		return bulk(b)
	case 2:
		n := r.IntN(6)
		b = strconv.AppendInt(append(b, '*'), int64(n), 10)
		b = append(b, "\r\n"...)
		for range n {
			b = bulk(b)
		}
		return b
	default:
		n := 1 + r.IntN(4)
		b = strconv.AppendInt(append(b, '%'), int64(n), 10)
		b = append(b, "\r\n"...)
		for range n {
			b = randReply(r, b, 2)
			b = bulk(b)
		}
		return b
	}
}

// TestFramerDrop: a reader that frames replies as the sidecar's do, and
// drops a reply once more than limit bytes of it are buffered
// (framer.drop, as upConn.deliverAll and muxConn.readLoop do), stays in
// step with the stream: every reply is found, whole or dropped, with its
// exact length; a reply is dropped only past the limit, and always when
// it is longer than the limit and a read; the buffer never holds more
// than the limit, a read and a line.
func TestFramerDrop(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for round := range 300 {
		var stream []byte
		var want []int
		for range 1 + r.IntN(20) {
			n := len(stream)
			stream = randBigReply(r, stream)
			want = append(want, len(stream)-n)
		}
		limit := 1 + r.IntN(2000)
		chunk := 1 + r.IntN(700)
		var f framer
		var buf []byte
		var got []int // lengths; negative: dropped
		dropping, dropped, most := false, 0, 0
		for pos := 0; pos < len(stream); {
			k := min(1+r.IntN(chunk), len(stream)-pos)
			buf = append(buf, stream[pos:pos+k]...)
			pos += k
			most = max(most, len(buf))
			for {
				if dropping {
					n, done, err := f.drop(buf)
					if err != nil {
						t.Fatalf("round %d: drop: %v", round, err)
					}
					dropped += n
					buf = buf[:copy(buf, buf[n:])]
					if !done {
						break
					}
					got = append(got, -dropped)
					dropping, dropped = false, 0
				}
				n, err := f.next(buf)
				if err != nil {
					t.Fatalf("round %d: next: %v", round, err)
				}
				if n > 0 {
					got = append(got, n)
					buf = buf[:copy(buf, buf[n:])]
					continue
				}
				if len(buf) > limit {
					dropping = true
					continue
				}
				break
			}
		}
		if len(buf) != 0 || dropping {
			t.Fatalf("round %d: %d bytes left, dropping %v", round, len(buf), dropping)
		}
		if len(got) != len(want) {
			t.Fatalf("round %d (limit %d, reads up to %d): %d replies found, want %d: %v vs %v", round, limit, chunk, len(got), len(want), got, want)
		}
		for i, g := range got {
			if abs(g) != want[i] {
				t.Fatalf("round %d reply %d: length %d, want %d", round, i, abs(g), want[i])
			}
			if g < 0 && want[i] <= limit {
				t.Fatalf("round %d reply %d: dropped at %d bytes, under the limit %d", round, i, want[i], limit)
			}
			if g > 0 && want[i] > limit+chunk {
				t.Fatalf("round %d reply %d: %d bytes collected whole, limit %d, reads up to %d", round, i, want[i], limit, chunk)
			}
		}
		if most > limit+chunk+64 {
			t.Fatalf("round %d: buffer held %d bytes, limit %d, reads up to %d", round, most, limit, chunk)
		}
	}
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// TestGrowTo: a reader's buffer grows by doubling, and with a reply limit
// to at most the limit and 64 KiB in one step once doubling would reach
// the limit (one allocation past it, not a second of twice the size).
func TestGrowTo(t *testing.T) {
	for _, c := range []struct {
		c, least int
		limit    int64
		want     int
	}{
		{0, 16 << 10, 0, 16 << 10},
		{16 << 10, 16 << 10, 0, 32 << 10},
		{16 << 20, 16 << 10, 0, 32 << 20},
		{8 << 20, 16 << 10, 32 << 20, 16 << 20},
		{16 << 20, 16 << 10, 32 << 20, 32<<20 + 64<<10},
		{20 << 20, 16 << 10, 32 << 20, 32<<20 + 64<<10},
		{32<<20 + 64<<10, 16 << 10, 32 << 20, 32<<20 + 128<<10},
		{0, 16 << 10, 1000, 1000 + 64<<10},
	} {
		if got := growTo(c.c, c.least, c.limit); got != c.want {
			t.Errorf("growTo(%d, %d, %d) = %d, want %d", c.c, c.least, c.limit, got, c.want)
		}
	}
}
