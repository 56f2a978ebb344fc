package script

import (
	"fmt"
	"testing"
)

// VMStateBytes is within 25% of what creating a Lua state allocates.
func TestVMStateBytes(t *testing.T) {
	e := New(Config{NewHost: func() Host { return nil }})
	r := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			v := newVM(e)
			v.L.Close()
		}
	})
	got := r.AllocedBytesPerOp()
	if got < VMStateBytes*3/4 || got > VMStateBytes*5/4 {
		t.Errorf("a Lua state allocates %d bytes; VMStateBytes is %d: update it", got, VMStateBytes)
	}
}

// MemStats counts cached scripts and their bytes, and the idle states.
func TestMemStats(t *testing.T) {
	e := New(Config{NewHost: func() Host { return nil }})
	if m := e.MemStats(); m != (MemStats{}) {
		t.Fatalf("empty engine: %+v", m)
	}
	small, err := e.Load([]byte("return 1"))
	if err != nil {
		t.Fatal(err)
	}
	m1 := e.MemStats()
	if m1.Scripts != 1 || m1.ScriptBytes <= int64(len(small)+len("return 1")) {
		t.Fatalf("one script: %+v", m1)
	}
	if _, err := e.Load([]byte("local t = {} for i = 1, 100 do t[i] = 'x' .. i end return #t")); err != nil {
		t.Fatal(err)
	}
	m2 := e.MemStats()
	if m2.Scripts != 2 || m2.ScriptBytes <= 2*m1.ScriptBytes {
		t.Fatalf("two scripts, the second bigger: %+v after %+v", m2, m1)
	}
	if _, err := e.Eval(nil, []byte("return 2"), nil, nil, Options{}); err != nil {
		t.Fatal(err)
	}
	if m := e.MemStats(); m.VMStates != 1 || m.VMBytes != VMStateBytes {
		t.Fatalf("after a script ran: %+v", m)
	}
	e.Flush()
	if m := e.MemStats(); m.Scripts != 0 || m.ScriptBytes != 0 {
		t.Fatalf("after Flush: %+v", m)
	}
}

// TestOnMemoryFollowsTheCache: Config.OnMemory's deltas sum to the cache's
// estimate (MemStats.ScriptBytes) as scripts are loaded, evaluated,
// forgotten by EVAL's LRU and flushed, so what the server charges to
// used_memory is what INFO's used_memory_scripts says and goes back to 0.
func TestOnMemoryFollowsTheCache(t *testing.T) {
	var sum int64 // OnMemory runs under the engine's lock: no race on sum
	e := New(Config{NewHost: func() Host { return nil }, MaxEvalScripts: 3,
		OnMemory: func(d int64) { sum += d }})
	check := func(when string) {
		t.Helper()
		m := e.MemStats()
		if sum != m.ScriptBytes {
			t.Fatalf("%s: OnMemory's deltas sum to %d, MemStats.ScriptBytes %d", when, sum, m.ScriptBytes)
		}
	}
	for i := range 4 {
		if _, err := e.Load([]byte(fmt.Sprintf("return %d", i))); err != nil {
			t.Fatal(err)
		}
	}
	check("after 4 loads")
	if sum < 4*int64(len("return 1")+40) {
		t.Fatalf("4 scripts charged %d bytes", sum)
	}
	for i := range 10 { // 10 EVAL scripts, 3 kept
		if _, err := e.Eval(nil, []byte(fmt.Sprintf("return 'e%d'", i)), nil, nil, Options{}); err != nil {
			t.Fatal(err)
		}
	}
	check("after 10 EVALs, 3 kept")
	if n := e.MemStats().Scripts; n != 7 {
		t.Fatalf("%d scripts cached, want 7", n)
	}
	e.Flush()
	check("after Flush")
	if sum != 0 {
		t.Fatalf("after Flush %d bytes still charged", sum)
	}
}
