package compat_test

import (
	"errors"
	"io"
	"math"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Fuzz targets against a live, guarded in-process server.

// fuzzTargets starts, for one fuzz target (once per fuzzing process), a
// server without a password (the guard's full limits) and one with (the
// pre-AUTH limits).
func fuzzTargets(f *testing.F) (open, auth *testServer) {
	return startServer(f, guarded(), quietLog()), startServer(f, withPassword(testPass), guarded(), quietLog())
}

// FuzzServerBytes writes arbitrary bytes on a new connection to a guarded
// server, half-closes it and waits for the server to finish with it; then a
// fresh connection must still get +PONG (after AUTH, on the server with a
// password). Whatever the bytes, the server neither crashes, nor hangs, nor
// stops serving others. The seed corpus (testdata/fuzz/FuzzServerBytes)
// holds the lengths that crash or spin redcon without the guard: 2^31-1,
// 2^31, 2^63-1, 19- and 20-digit numbers, negative and zero counts, giant
// inline lines.
func FuzzServerBytes(f *testing.F) {
	f.Add([]byte("PING\r\n"), false)
	f.Add([]byte("*1\r\n$4\r\nPING\r\n"), true)
	open, auth := fuzzTargets(f)
	f.Fuzz(func(t *testing.T, data []byte, withAuth bool) {
		ts := open
		if withAuth {
			ts = auth
		}
		conn, err := net.Dial("tcp", ts.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		// The server may close the connection part-way (a protocol
		// error): write errors are expected, read what it sends meanwhile.
		drained := make(chan error, 1)
		go func() { _, err := io.Copy(io.Discard, conn); drained <- err }()
		conn.Write(data)
		conn.(*net.TCPConn).CloseWrite()
		select {
		case <-drained: // the server closed its side: done with the input
		case <-time.After(10 * time.Second):
			t.Fatalf("the server neither answered nor closed within 10 s after %d bytes %q", len(data), abbrevBytes(data))
		}
		check, err := net.Dial("tcp", ts.Addr)
		if err != nil {
			t.Fatalf("after %q: dial: %v", abbrevBytes(data), err)
		}
		defer check.Close()
		check.SetDeadline(time.Now().Add(10 * time.Second))
		req, want := "PING\r\n", "+PONG\r\n"
		if withAuth {
			req, want = resp("AUTH", testPass)+req, "+OK\r\n"+want
		}
		io.WriteString(check, req)
		got := make([]byte, len(want))
		if _, err := io.ReadFull(check, got); err != nil || string(got) != want {
			t.Fatalf("after %q: a fresh connection got %q, %v", abbrevBytes(data), got, err)
		}
	})
}

func abbrevBytes(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "...(" + strconv.Itoa(len(b)) + " bytes)"
	}
	return string(b)
}

// The spec's error texts for CL.THROTTLE (cellParse is followed by the
// argument).
const (
	cellUsage     = "Cell error: Store error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]"
	cellParse     = "Cell error: Store error: Couldn't parse as integer: "
	cellZeroRate  = "Cell error: Store error: Zero rates are not supported"
	cellExpire    = "Cell error: Store error: Error while setting key expire"
	cellBadStored = "Cell error: Store error: invalid stored value"
)

// errorLine is how an error text travels: one line, CR and LF inside
// replaced by spaces, at the ends dropped.
func errorLine(s string) string {
	s = strings.Trim(s, "\r\n")
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}

// FuzzThrottleArgs sends CL.THROTTLE with arbitrary key and 3 or 4 numeric
// arguments and checks that the reply is either 5 integers (limited 0 or 1,
// limit = max_burst+1) or one of the spec's error texts — and the right one:
// the first argument that does not parse as an int64 is named, zero rates
// are refused.
func FuzzThrottleArgs(f *testing.F) {
	edges := []string{
		"0", "1", "-1", "15", "30", "60", "+5", "-0", "007", "",
		"9223372036854775807", "-9223372036854775808", "9223372036854775808", "-9223372036854775809",
		"18446744073709551615", "2147483647", "2147483648", "-2147483648",
		"1e3", " 1", "1 ", "0x10", "1_000", "١", "1\x00junk", "\x00", "12\r\n", "NaN", "-",
	}
	for i, a := range edges {
		b := edges[(i*7+3)%len(edges)]
		c := edges[(i*11+5)%len(edges)]
		d := edges[(i*13+1)%len(edges)]
		f.Add("user:"+strconv.Itoa(i), a, "30", "60", "1", i%2 == 0)
		f.Add("k", "15", a, "60", "1", true)
		f.Add("k", "15", "30", a, "1", true)
		f.Add("k", "15", "30", "60", a, true)
		f.Add(a, a, b, c, d, i%3 == 0)
	}
	f.Add("", "15", "30", "60", "1", false)
	f.Add("bin\x00key\r\n", "15", "30", "60", "1", false)
	f.Add("k", "9223372036854775807", "1", "9223372036854775807", "9223372036854775807", true)
	f.Add("k", "-9223372036854775808", "-1", "-9223372036854775808", "-9223372036854775808", true)
	f.Add("k", "15", "0", "60", "1", true)
	f.Add("k", "15", "30", "0", "1", true)

	open := startServer(f, guarded(), quietLog())
	rdb := redis.NewClient(&redis.Options{Addr: open.Addr, Protocol: 2, MaxRetries: -1})
	f.Cleanup(func() { rdb.Close() })

	f.Fuzz(func(t *testing.T, key, burst, count, period, quantity string, withQuantity bool) {
		args := []any{"CL.THROTTLE", key, burst, count, period}
		nums := []string{burst, count, period}
		if withQuantity {
			args = append(args, quantity)
			nums = append(nums, quantity)
		}
		v, err := rdb.Do(ctx, args...).Result()
		var re redis.Error
		if errors.As(err, &re) {
			checkThrottleError(t, re.Error(), nums)
			return
		}
		if err != nil {
			t.Fatalf("%q: transport error %v", args, err)
		}
		for _, s := range nums {
			if _, perr := strconv.ParseInt(s, 10, 64); perr != nil {
				t.Fatalf("%q: %q is not an integer, yet the reply is %v", args, s, v)
			}
		}
		arr, ok := v.([]any)
		if !ok || len(arr) != 5 {
			t.Fatalf("%q: reply %#v, want 5 integers", args, v)
		}
		ints := make([]int64, 5)
		for i, e := range arr {
			n, ok := e.(int64)
			if !ok {
				t.Fatalf("%q: reply %#v, element %d is not an integer", args, v, i)
			}
			ints[i] = n
		}
		b, _ := strconv.ParseInt(burst, 10, 64)
		if ints[0] != 0 && ints[0] != 1 {
			t.Fatalf("%q: limited = %d", args, ints[0])
		}
		if ints[1] != b+1 { // wraps at MaxInt64, as redis-cell's does
			t.Fatalf("%q: limit = %d, want max_burst+1 = %d", args, ints[1], b+1)
		}
	})
}

func checkThrottleError(t *testing.T, got string, nums []string) {
	t.Helper()
	for _, s := range nums {
		if _, err := strconv.ParseInt(s, 10, 64); err != nil {
			arg := s
			if i := strings.IndexByte(arg, 0); i >= 0 {
				arg = arg[:i] // a C string ends at NUL
			}
			if want := errorLine(cellParse + arg); got != want {
				t.Fatalf("arguments %q: error %q, want %q", nums, got, want)
			}
			return
		}
	}
	switch got {
	case cellZeroRate:
		c, _ := strconv.ParseInt(nums[1], 10, 64)
		p, _ := strconv.ParseInt(nums[2], 10, 64)
		if c != 0 && p != 0 && !tinyRate(c, p) {
			t.Fatalf("arguments %q: %q for a non-zero rate", nums, got)
		}
	case cellUsage, cellExpire, cellBadStored:
		// The spec's texts; Usage cannot happen with 4 or 5 arguments,
		// and nothing else writes these keys, but they are valid replies.
	default:
		t.Fatalf("arguments %q: error %q is none of the spec's texts", nums, got)
	}
}

// tinyRate reports whether period×1e9/count truncates to 0 ns: a rate the
// spec also refuses as zero.
func tinyRate(count, period int64) bool {
	p := float64(period) * 1e9
	return math.Abs(p/float64(count)) < 1
}
