package compat_test

import "testing"

// TestRedisDiffRandomCountRange: HRANDFIELD and ZRANDMEMBER parse their
// count as redis-server 7.0.15 does (t_hash.c hrandfieldCommand, t_zset.c
// zrandmemberCommand): first getRangeLongFromObjectOrReply(-LONG_MAX,
// LONG_MAX), then the syntax of the fourth argument, and only WITH
// VALUES/SCORES refuses a count past ±LONG_MAX/2 ("ERR value is out of
// range"). celld refuses |count| > LONG_MAX/2 even without WITHVALUES, so
// "HRANDFIELD h 9223372036854775807" (every field once, Redis answers the
// whole hash) and "ZRANDMEMBER z 9223372036854775807" answer "ERR value is
// out of range"; LLONG_MIN gets that short text instead of Redis's "value
// must between -9223372036854775807 and 9223372036854775807"; and LLONG_MIN
// followed by a bad word gets "syntax error" instead of the range error.
// (Negative counts near -LONG_MAX are left out: redis-server 7.0.15 then
// builds an endless reply and never answers.)
func TestRedisDiffRandomCountRange(t *testing.T) {
	diffRun(t, []dstep{
		dw("ZADD z 1 a", ":1\r\n"),
		dw("HSET h a 1", ":1\r\n"),
		dw("HRANDFIELD h 9223372036854775807", "*1\r\n$1\r\na\r\n"),
		dw("ZRANDMEMBER z 9223372036854775807", "*1\r\n$1\r\na\r\n"),
		d("HRANDFIELD h 4611686018427387904"),
		d("ZRANDMEMBER z 4611686018427387904"),
		d("ZRANDMEMBER z -9223372036854775808"),
		d("ZRANDMEMBER z -9223372036854775808 WITHSCORES"),
		d("HRANDFIELD h -9223372036854775808"),
		d("HRANDFIELD h -9223372036854775808 WITHVALUES"),
		d("HRANDFIELD h -9223372036854775808 bogus"),
		d("ZRANDMEMBER z -9223372036854775808 bogus"),
		d("HRANDFIELD nokey -9223372036854775808"),
		d("ZRANDMEMBER nokey -9223372036854775808"),
		d("ZRANDMEMBER z -4611686018427387904 WITHSCORES"),
		d("HRANDFIELD h -4611686018427387904 WITHVALUES"),
		d("ZRANDMEMBER z 9223372036854775807 WITHSCORES"),
		d("HRANDFIELD h 9223372036854775807 WITHVALUES"),
	})
}
