package data

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// funnelScript is bench/types.sh's funnel: HMGET, TIME, HMSET and EXPIRE
// in one EVAL, as the seeds' funnel limiter runs it.
const funnelScript = `local t = redis.call('TIME') local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local v = redis.call('HMGET', KEYS[1], 'water', 'lastTime')
local water = tonumber(v[1]) or 0 local last = tonumber(v[2]) or now
water = math.max(0, water - (now - last) * tonumber(ARGV[2]))
local ok = 0 if water + 1 <= tonumber(ARGV[1]) then water = water + 1 ok = 1 end
redis.call('HMSET', KEYS[1], 'water', water, 'lastTime', now)
redis.call('EXPIRE', KEYS[1], 86400) return ok`

// typesRows are bench/types.sh's write rows; %d is the key number.
var typesRows = []struct {
	name string
	args []string
}{
	{"hset", []string{"HSET", "h:%d", "field", "value"}},
	{"lpush", []string{"LPUSH", "l:%d", "item"}},
	{"zadd", []string{"ZADD", "z:%d", "%d", "m:%d"}},
	{"funnel", []string{"EVAL", funnelScript, "1", "fn:%d", "100", "0.5"}},
}

// intReplies counts the integer replies in b (every reply of these rows
// is one).
func intReplies(b []byte) int {
	n := bytes.Count(b, []byte("\n:"))
	if len(b) > 0 && b[0] == ':' {
		n++
	}
	return n
}

// BenchmarkTypesPipeline is bench/types.sh's write rows through a real
// socket: pipelines of 16 over 4,096 keys (ZADD rewrites one member's
// score with the same value, LPUSH grows each list by one per call; the
// funnel's hash keeps its two fields). Integer replies only.
func BenchmarkTypesPipeline(b *testing.B) {
	for _, row := range typesRows {
		b.Run(row.name, func(b *testing.B) {
			r := startRaw(b)
			const keys, p = 4096, 16
			batches := make([][]byte, keys/p)
			for i := range batches {
				var bb bytes.Buffer
				for j := range p {
					k := i*p + j
					args := make([]string, len(row.args))
					for a, s := range row.args {
						if strings.Contains(s, "%d") {
							s = strings.ReplaceAll(s, "%d", fmt.Sprint(k))
						}
						args[a] = s
					}
					bb.Write(resp(args...))
				}
				batches[i] = bb.Bytes()
			}
			send := func(req []byte) {
				if _, err := r.conn.Write(req); err != nil {
					b.Fatal(err)
				}
				got := 0
				for intReplies(r.buf[:got]) < p {
					m, err := r.conn.Read(r.buf[got:])
					if err != nil {
						b.Fatal(err)
					}
					got += m
					if bytes.Contains(r.buf[:got], []byte("\n-")) || r.buf[0] == '-' {
						b.Fatalf("error reply: %q", r.buf[:got])
					}
				}
			}
			for _, req := range batches { // create the keys
				send(req)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += p {
				r.clock.Add(16_000) // 1 µs a call: TIME moves, as it does on a server
				send(batches[(i/p)%len(batches)])
			}
		})
	}
}
