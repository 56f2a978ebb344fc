package main

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestProcessOutputLimitBoundsOneReply: docs/output-buffers.md says the
// hard limit's check "runs when output is added, as Redis's does", and that
// the replies being answered are handed to the socket in ~64 KiB pieces.
// One command whose reply is large is not: HRANDFIELD with a negative
// count on a two-field hash (two 200-byte values) builds its whole
// ~200 MB reply (1,048,576 picks) before the limit is checked; the client
// is closed only then, with omem=209846272 logged against a 32 MiB limit,
// and the server's RSS peaks at ~830 MB. Redis 7.0 (same limit) closes the
// client at omem=33565048 and peaks at 51 MB RSS. With 512 KiB values
// (proto-max-bulk-len's default) one such call asks for 512 GB: the
// process is OOM-killed whatever --client-output-buffer-limit says.
// (ZRANDMEMBER/SRANDMEMBER with negative counts, or any one big reply, the
// same.)
func TestProcessOutputLimitBoundsOneReply(t *testing.T) {
	if testing.Short() {
		t.Skip("process test")
	}
	c := mustLaunch(t, t.TempDir(), "--client-output-buffer-limit", "normal 32mb 0 0")
	ctx := context.Background()
	cl := redis.NewClient(&redis.Options{Addr: c.addr, Protocol: 2, ReadTimeout: time.Minute})
	defer cl.Close()
	if err := cl.HSet(ctx, "h", "a", strings.Repeat("x", 200), "b", strings.Repeat("y", 200)).Err(); err != nil {
		t.Fatal(err)
	}
	peak := int64(0)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if b, err := os.ReadFile("/proc/" + strconv.Itoa(c.cmd.Process.Pid) + "/status"); err == nil {
				if m := regexp.MustCompile(`VmRSS:\s+(\d+) kB`).FindSubmatch(b); m != nil {
					v, _ := strconv.ParseInt(string(m[1]), 10, 64)
					peak = max(peak, v<<10)
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	err := cl.Do(ctx, "HRANDFIELD", "h", -1000000, "WITHVALUES").Err()
	time.Sleep(300 * time.Millisecond)
	close(stop)
	<-done
	if err == nil {
		t.Fatalf("a ~200 MB reply arrived whole past a 32 MiB hard limit")
	}
	omem := int64(-1)
	if m := regexp.MustCompile(`omem=(\d+)`).FindStringSubmatch(c.logs.String()); m != nil {
		omem, _ = strconv.ParseInt(m[1], 10, 64)
	}
	t.Logf("client error %v; omem at close %d; peak RSS %d MB", err, omem, peak>>20)
	if omem > 40<<20 {
		t.Errorf("closed at omem=%d, far past the 32 MiB hard limit: one reply was built whole before the check", omem)
	}
	if peak > 300<<20 {
		t.Errorf("peak RSS %d MB for a 32 MiB output limit (Redis 7.0: 51 MB)", peak>>20)
	}
}
