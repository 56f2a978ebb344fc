package sidecar

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/celld/celld/internal/testutil"
	"github.com/celld/celld/server"
)

// TestSidecarOutputLimitBoundsPipelinedReplies: a client of a sidecar
// with --client-output-buffer-limit "normal 4mb 0 0" pipelines 40
// LRANGEs of a 5 MB list (about 210 MB of replies) and reads nothing.
// The client must be closed for its limit, and the sidecar must not hold
// much more than the limit and a reply or two meanwhile, as a node that
// serves the list itself does (server.TestOutputLimitBoundsOneReply), and
// as Redis does (it closes the client at the limit).
//
// hostile15 found on 73bbdf8: the sidecar collected every reply of the
// pipeline (session.Do waits for all of them, each copied out of the
// owner's connection buffer into its request) and appended them all to
// the client's output before any limit check: the client was closed
// with omem 535 MB against a 32 MB limit, at 2.2 GB RSS (5 LRANGEs of a
// 107 MB list; 10 of them: 3.5 GB). Redis 7.0.15 on the same pipeline:
// closed at the limit.
func TestSidecarOutputLimitBoundsPipelinedReplies(t *testing.T) {
	const limit = 4 << 20
	grew, _, replies, reply := pipelineOverLimit(t, limit)
	// The limit, a reply held by the sidecar's owner connection, the same
	// reply copied for the client, and slack: 64 MB. Holding the whole
	// pipeline's replies is 210 MB, at least.
	if grew > 64<<20 {
		t.Errorf("heap grew by %d MB for a %d MB output limit (the pipeline's replies are %d MB, each %d KB)", grew>>20, limit>>20, replies>>20, reply>>10)
	}
}

// TestSidecarOutputLimitClosesAtTheLimit: the same pipeline; the client
// is closed once its output passes the limit, as Redis closes it when an
// append passes it: the output counted at the close (the log's omem) is
// at most the limit and two replies (one queued past the limit, one in
// the pipeline's buffer), not the whole pipeline's replies.
//
// On 73bbdf8 the replies of a forwarded run were all appended to the
// client's output with no check point between them (server/forward.go):
// omem 212 MB at the close for a 4 MB limit.
func TestSidecarOutputLimitClosesAtTheLimit(t *testing.T) {
	const limit = 4 << 20
	_, omem, replies, reply := pipelineOverLimit(t, limit)
	if omem > limit+2*reply {
		t.Errorf("closed at omem %d MB for a %d MB output limit (replies of %d KB; the pipeline's are %d MB)", omem>>20, limit>>20, reply>>10, replies>>20)
	}
}

// lockedBuffer is a bytes.Buffer for a logger written by any goroutine.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// pipelineOverLimit sends 40 LRANGEs of a 50,000-element list (a 5 MB
// reply each) to a sidecar whose clients have a hard output limit of
// limit bytes, reads nothing, and waits for the client to be closed. It
// returns how much the heap grew at its peak meanwhile, the output the
// close counted (omem), and the pipeline's and one reply's size.
func pipelineOverLimit(t *testing.T, limit int64) (grew, omem, replies, reply int64) {
	const (
		elems    = 50_000
		value    = 100
		pipeline = 40
	)
	owner := serve(t, nil, server.Config{}, nil)
	od := client(t, owner.addr)
	for i := 0; i < elems; i += 5000 {
		vals := make([]any, 5000)
		for j := range vals {
			vals[j] = strings.Repeat("x", value)
		}
		if err := od.RPush(ctx, "L", vals...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	sc, err := New(Config{Seeds: []string{owner.addr}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	sc.Start()
	var logs lockedBuffer
	side := serve(t, nil, server.Config{OutputBufferLimit: server.OutputBufferLimit{Hard: limit},
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}, sc)

	var req []byte
	for range pipeline {
		req = fmt.Appendf(req, "*4\r\n$6\r\nLRANGE\r\n$1\r\nL\r\n$1\r\n0\r\n$2\r\n-1\r\n")
	}
	before, peak, stopSampling := testutil.SampleHeapPeak()
	nc, err := net.Dial("tcp", side.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.(*net.TCPConn).SetReadBuffer(4 << 10)
	if _, err := nc.Write(req); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); side.srv.Stats().OutputBufferLimitDisconnections == 0; {
		if time.Now().After(deadline) {
			t.Fatalf("not closed for its output limit within a minute (peak heap %d MB)", peak.Load()>>20)
		}
		time.Sleep(time.Millisecond)
	}
	stopSampling()
	reply = int64(elems * (value + 10))
	replies = pipeline * reply
	grew = int64(peak.Load()) - int64(before)
	m := regexp.MustCompile(`omem=(\d+)`).FindStringSubmatch(logs.String())
	if m == nil {
		t.Fatalf("no omem in the close's log line: %q", logs.String())
	}
	omem, _ = strconv.ParseInt(m[1], 10, 64)
	t.Logf("%d LRANGEs of a %d KB reply, limit %d MB: closed at omem %d MB; heap %d MB before, peak %d MB",
		pipeline, reply>>10, limit>>20, omem>>20, before>>20, peak.Load()>>20)
	return grew, omem, replies, reply
}

// TestSidecarOutputLimitOneLargeReply: one LRANGE whose reply (22 MB) is
// far larger than the clients' hard output limit (1 MB), through a
// sidecar given that limit (Config.ReplyLimit, as main sets it from
// --client-output-buffer-limit). The client must be closed for its
// limit, the sidecar must not collect the reply meanwhile (it drops it
// as it comes: the heap grows by far less than the reply), and the owner
// connection must stay in step: another client's read sent behind it on
// the same connection gets its own reply.
//
// Before the drop (main at 3a91490) the reply was collected whole (the
// owner connection's buffer grown to 32 MB), then copied into the
// client's output, and only then found over the limit: heap +83-84 MB,
// against +13-19 MB with the drop (most of it the owner's output queue).
func TestSidecarOutputLimitOneLargeReply(t *testing.T) {
	const (
		elems = 200_000
		value = 100
		limit = 1 << 20
	)
	owner := serve(t, nil, server.Config{}, nil)
	od := client(t, owner.addr)
	vals := make([]any, 10_000)
	for j := range vals {
		vals[j] = strings.Repeat("x", value)
	}
	for i := 0; i < elems; i += len(vals) {
		if err := od.RPush(ctx, "L", vals...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	sc, err := New(Config{Seeds: []string{owner.addr}, Timeout: 5 * time.Second, ReplyLimit: limit})
	if err != nil {
		t.Fatal(err)
	}
	sc.Start()
	var logs lockedBuffer
	side := serve(t, nil, server.Config{OutputBufferLimit: server.OutputBufferLimit{Hard: limit},
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}, sc)
	other := client(t, side.addr)
	if err := other.Ping(ctx).Err(); err != nil { // its connections up
		t.Fatal(err)
	}

	// Garbage collected often, so that the peak is what is held (the
	// buffers grown on the way to the limit are garbage soon after).
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	before, peak, stopSampling := testutil.SampleHeapPeak()
	nc, err := net.Dial("tcp", side.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Write([]byte("*4\r\n$6\r\nLRANGE\r\n$1\r\nL\r\n$1\r\n0\r\n$2\r\n-1\r\n")); err != nil {
		t.Fatal(err)
	}
	// Behind it, on the owner's bulk lane: a small bulk read of another
	// client, whose reply follows the dropped one on the same connection.
	time.Sleep(5 * time.Millisecond)
	head, err := other.LRange(ctx, "L", 0, 2).Result()
	if err != nil || len(head) != 3 || head[0] != vals[0] {
		t.Fatalf("LRANGE L 0 2 behind the dropped reply: %d elements, %v", len(head), err)
	}
	// The client is closed: its read ends with no complete reply.
	nc.SetReadDeadline(time.Now().Add(time.Minute))
	got, _ := io.Copy(io.Discard, nc)
	stopSampling()
	// (counted just after the close the client saw)
	for deadline := time.Now().Add(5 * time.Second); side.srv.Stats().OutputBufferLimitDisconnections == 0 &&
		time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if n := side.srv.Stats().OutputBufferLimitDisconnections; n != 1 {
		t.Fatalf("output limit disconnections %d, want 1", n)
	}
	reply := int64(elems * (value + 10))
	if got >= reply {
		t.Fatalf("the client read %d bytes: the whole reply (%d)", got, reply)
	}
	if n, err := other.LLen(ctx, "L").Result(); err != nil || n != elems {
		t.Fatalf("LLEN after: %d, %v", n, err)
	}
	grew := int64(peak.Load()) - int64(before)
	t.Logf("one LRANGE reply of %d MB, limit %d MB: heap %d MB before, peak %d MB (+%d MB); client read %d bytes; log %q",
		reply>>20, limit>>20, before>>20, peak.Load()>>20, grew>>20, got, logs.String())
	// The owner runs in this process: its output queue holds up to about
	// half the reply while the sidecar reads (+11 MB for this reply read
	// by a plain client straight from the owner). Collected whole, the
	// reply is in the sidecar twice (its owner connection's buffer, grown
	// by doubling, and the client's output): +54-88 MB.
	if grew > reply*3/2 {
		t.Errorf("heap grew by %d MB for a %d MB reply at a %d MB output limit", grew>>20, reply>>20, limit>>20)
	}
	if !strings.Contains(logs.String(), "omem=") {
		t.Errorf("no output-limit log line: %q", logs.String())
	}
}
