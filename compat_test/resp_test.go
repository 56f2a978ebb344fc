package compat_test

import (
	"strings"
	"testing"
)

// Byte-exact RESP framing of CL.THROTTLE and its errors over a raw socket.
// The reply is a five-integer array in RESP2 and RESP3 alike; Cell errors
// are error lines without an "ERR" prefix.

func TestRawThrottleFraming(t *testing.T) {
	for _, proto := range []string{"2", "3"} {
		t.Run("resp"+proto, func(t *testing.T) {
			ts := startServer(t, withFakeClock(t0))
			rc := dialRaw(t, ts)
			id := clientID(t, rc)
			hello := hello2(id)
			if proto == "3" {
				hello = hello3(id)
			}
			runRaw(t, rc, []rawStep{
				{resp("HELLO", proto), hello},
				{resp("CL.THROTTLE", "user123", "15", "30", "60"), "*5\r\n:0\r\n:16\r\n:15\r\n:-1\r\n:2\r\n"},
				{resp("CL.THROTTLE", "user123", "15", "30", "60", "15"), "*5\r\n:0\r\n:16\r\n:0\r\n:-1\r\n:32\r\n"},
				{resp("CL.THROTTLE", "user123", "15", "30", "60"), "*5\r\n:1\r\n:16\r\n:0\r\n:2\r\n:32\r\n"},
				{resp("CL.THROTTLE", "f", "-1", "1", "1"), "*5\r\n:1\r\n:0\r\n:0\r\n:-1\r\n:0\r\n"},
				{resp("CL.THROTTLE", "k"), "-Cell error: Store error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]\r\n"},
				{resp("CL.THROTTLE", "k", "1.5", "30", "60"), "-Cell error: Store error: Couldn't parse as integer: 1.5\r\n"},
				{resp("CL.THROTTLE", "k", "", "30", "60"), "-Cell error: Store error: Couldn't parse as integer: \r\n"},
				{resp("CL.THROTTLE", "k", "a\r\nb\r\n", "30", "60"), "-Cell error: Store error: Couldn't parse as integer: a  b\r\n"},
				{resp("CL.THROTTLE", "k", "a\x00b", "30", "60"), "-Cell error: Store error: Couldn't parse as integer: a\r\n"},
				{resp("CL.THROTTLE", "k", "15", "0", "60"), "-Cell error: Store error: Zero rates are not supported\r\n"},
				{resp("CL.THROTTLE", "k", "15", "1000", "1", "-2"), "-Cell error: Store error: Error while setting key expire\r\n"},
				{resp("foo", "a", "b"), "-ERR unknown command 'foo', with args beginning with: 'a' 'b' \r\n"},
				{resp("foo"), "-ERR unknown command 'foo', with args beginning with: \r\n"},
			})
		})
	}
}

func TestRawPipelinedAndInline(t *testing.T) {
	ts := startServer(t, withFakeClock(t0))
	rc := dialRaw(t, ts)
	one := func(rem, reset string) string { return "*5\r\n:0\r\n:3\r\n:" + rem + "\r\n:-1\r\n:" + reset + "\r\n" }
	runRaw(t, rc, []rawStep{
		// Four commands in one write, replies back to back in order (all at
		// one instant).
		{strings.Repeat(resp("CL.THROTTLE", "p", "2", "1", "10"), 3) + resp("CL.THROTTLE", "p", "2", "1", "10"),
			one("2", "10") + one("1", "20") + one("0", "30") + "*5\r\n:1\r\n:3\r\n:0\r\n:10\r\n:30\r\n"},
		// The inline form, as redis-cli and telnet users send it.
		{"CL.THROTTLE inl 2 1 10\r\n", one("2", "10")},
		{"cl.throttle inl 2 1 10\r\n", one("1", "20")},
		// A command split across writes.
		{"*5\r\n$11\r\nCL.THRO", ""},
		{"TTLE\r\n$1\r\nq\r\n$1\r\n2\r\n$1\r\n1\r\n$2\r\n10\r\n", one("2", "10")},
	})
}
