package server

import (
	"strconv"
	"testing"
)

// Redis's string2ll accepts exactly the canonical decimal form of an int64:
// what strconv.ParseInt accepts and strconv.FormatInt writes back the same.
func checkParseRedisInt(t *testing.T, in string) {
	t.Helper()
	got, ok := parseRedisInt([]byte(in))
	want, err := strconv.ParseInt(in, 10, 64)
	wantOK := err == nil && strconv.FormatInt(want, 10) == in
	if ok != wantOK || (ok && got != want) {
		t.Errorf("parseRedisInt(%q) = %d, %v; want %d, %v", in, got, ok, want, wantOK)
	}
}

// strtoul(3) in base 10 with Redis's checks: no leading space, all consumed,
// no ERANGE; an optional sign, '-' negating modulo 2^64; "" is 0.
func checkParseScanCursor(t *testing.T, in string) {
	t.Helper()
	got, ok := parseScanCursor([]byte(in))
	digits, neg := in, false
	if len(digits) > 0 && (digits[0] == '+' || digits[0] == '-') {
		neg, digits = digits[0] == '-', digits[1:]
	}
	var want uint64
	wantOK := true
	if in != "" {
		for _, ch := range digits {
			if ch < '0' || ch > '9' {
				wantOK = false
			}
		}
		var err error
		want, err = strconv.ParseUint(digits, 10, 64)
		if err != nil || !wantOK {
			want, wantOK = 0, false
		}
		if neg {
			want = -want
		}
	}
	if ok != wantOK || (ok && got != want) {
		t.Errorf("parseScanCursor(%q) = %d, %v; want %d, %v", in, got, ok, want, wantOK)
	}
}

func TestParseRedisInt(t *testing.T) {
	for _, tc := range []struct {
		in string
		n  int64
		ok bool
	}{
		{"0", 0, true}, {"7", 7, true}, {"-7", -7, true}, {"100", 100, true},
		{"00", 0, false}, {"07", 0, false}, {"-0", 0, false}, {"+5", 0, false}, {"+0", 0, false},
		{"-07", 0, false}, {" 5", 0, false}, {"5 ", 0, false}, {"", 0, false}, {"-", 0, false},
		{"9223372036854775807", 1<<63 - 1, true}, {"9223372036854775808", 0, false},
		{"-9223372036854775808", -1 << 63, true}, {"-9223372036854775809", 0, false},
		{"18446744073709551616", 0, false}, {"1e3", 0, false},
	} {
		if n, ok := parseRedisInt([]byte(tc.in)); n != tc.n || ok != tc.ok {
			t.Errorf("parseRedisInt(%q) = %d, %v; want %d, %v", tc.in, n, ok, tc.n, tc.ok)
		}
	}
	for _, in := range parseInt64Cases {
		checkParseRedisInt(t, in)
	}
}

func TestParseScanCursor(t *testing.T) {
	for _, tc := range []struct {
		in string
		n  uint64
		ok bool
	}{
		{"0", 0, true}, {"+0", 0, true}, {"-0", 0, true}, {"+5", 5, true}, {"007", 7, true},
		{"", 0, true}, {"-1", 1<<64 - 1, true}, {"18446744073709551615", 1<<64 - 1, true},
		{"18446744073709551616", 0, false}, {"+", 0, false}, {"-", 0, false},
		{" 1", 0, false}, {"1 ", 0, false}, {"1x", 0, false}, {"+-1", 0, false},
	} {
		if n, ok := parseScanCursor([]byte(tc.in)); n != tc.n || ok != tc.ok {
			t.Errorf("parseScanCursor(%q) = %d, %v; want %d, %v", tc.in, n, ok, tc.n, tc.ok)
		}
	}
	for _, in := range parseInt64Cases {
		checkParseScanCursor(t, in)
	}
}

func TestParseRedisIntZeroAllocs(t *testing.T) {
	b := []byte("-9223372036854775808")
	if n := testing.AllocsPerRun(1000, func() { parseRedisInt(b); parseScanCursor(b) }); n != 0 {
		t.Errorf("parseRedisInt/parseScanCursor allocate %v per call", n)
	}
}
