package script

import "testing"

// Benchmarks of what the Lua 5.1 dialect (lua51*.go) costs: a script
// using .. on a non-literal (a Go call per chain instead of OP_CONCAT),
// one using tostring/string.format, and creating a pooled state (which
// installs the replacement functions).

func benchEval(b *testing.B, body string, keys, args [][]byte) {
	e, h := newTestEngine(b)
	h.noRecord = true
	var out []byte
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out, _ = e.Eval(out[:0], []byte(body), keys, args, Options{})
	}
}

func BenchmarkEngineEvalConcat(b *testing.B) {
	benchEval(b, "return redis.call('get', 'rate:' .. KEYS[1] .. ':' .. ARGV[1])", strs("user:1"), strs("60"))
}

func BenchmarkEngineEvalStringLib(b *testing.B) {
	benchEval(b, "local n = tonumber(ARGV[1]) return redis.call('get', string.format('%s:%d', KEYS[1], n) .. tostring(n / 3))",
		strs("user:1"), strs("60"))
}

func BenchmarkNewVM(b *testing.B) {
	e, _ := newTestEngine(b)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		newVM(e).L.Close()
	}
}

// BenchmarkEngineEvalArgvArith: arithmetic on ARGV strings (the string
// metatable's metamethods since the Lua 5.1 dialect; gopher-lua's inline
// conversion before).
func BenchmarkEngineEvalArgvArith(b *testing.B) {
	benchEval(b, "local n = ARGV[1] * 2 + ARGV[2] - ARGV[1] / 4 return n", nil, strs("60", "7"))
}

// BenchmarkEngineEvalForArgv: a numeric for loop bounded by ARGV[1]
// (tonumber before: gopher-lua refuses a string limit).
func BenchmarkEngineEvalForArgv(b *testing.B) {
	benchEval(b, "local n = 0 for i = 1, tonumber(ARGV[1]) do n = n + i end return n", nil, strs("10"))
}
