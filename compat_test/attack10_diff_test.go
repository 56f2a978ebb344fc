package compat_test

import "testing"

// TestLMoveMissingSourceDiff: LMOVE and RPOPLPUSH from a missing source
// answer nil whatever the destination holds (Redis 7 looks the source up
// first); a source of another kind is WRONGTYPE before the destination is
// looked at; a list source with a destination of another kind is
// WRONGTYPE and keeps its element. Found by TestProcessKindsDiffFuzz.
func TestLMoveMissingSourceDiff(t *testing.T) {
	diffRun(t, []dstep{
		dw("SET s x", "+OK\r\n"),
		dw("LMOVE nosuch s LEFT RIGHT", "$-1\r\n"),
		dw("RPOPLPUSH nosuch s", "$-1\r\n"),
		d("HSET h f v"),
		dw("LMOVE nosuch h RIGHT LEFT", "$-1\r\n"),
		d("RPUSH l a"),
		d("LMOVE l s LEFT RIGHT"),
		dw("LRANGE l 0 -1", "*1\r\n$1\r\na\r\n"),
		d("SET s2 y"),
		d("LMOVE s2 s LEFT RIGHT"),
		d("LMOVE s2 nosuch LEFT RIGHT"),
		d("LMOVE s2 l LEFT RIGHT"),
		d("LMOVE nosuch nosuch LEFT RIGHT"),
		d("LMOVE l l LEFT RIGHT"),
		d("LMOVE s s LEFT RIGHT"),
		dw("EXISTS nosuch", ":0\r\n"),
	})
}
