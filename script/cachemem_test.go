package script

import (
	"fmt"
	"runtime"
	"testing"
)

// TestCachedScriptHeap: what a cached script holds is about its code,
// and MemStats (INFO's used_memory_scripts) does not understate it.
// gopher-lua compiles into slices made with room for 1,024 instructions
// and their 1,024 line numbers, 128 debug calls, 32 constants...: about
// 16 KB per function whatever its size, kept by the cached proto.
//
// hostile15 measured on 73bbdf8: 20,000 SCRIPT LOADs of "return <n>"
// took 351 MB of heap (17.5 KB a script) while used_memory_scripts said
// 9.2 MB (458 B a script); 50,000 of 1 KB scripts took 850 MB of RSS
// under --maxmemory 20mb (redis-server 7.0.15: 151 MB, and it counts them
// in used_memory).
func TestCachedScriptHeap(t *testing.T) {
	const n = 2000
	e := New(Config{NewHost: func() Host { return nil }})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range n {
		body := fmt.Sprintf("local t = {} for i = 1, 3 do t[i] = i * %d end return t", i)
		if _, err := e.Load([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perHeap := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
	perStat := e.MemStats().ScriptBytes / n
	t.Logf("a cached script: %d B of heap, %d B in MemStats", perHeap, perStat)
	if perHeap > 4<<10 {
		t.Errorf("a cached one-line script holds %d B of heap, want ≤ 4 KiB", perHeap)
	}
	if perStat < perHeap/2 {
		t.Errorf("MemStats counts %d B a script for %d B of heap", perStat, perHeap)
	}
	runtime.KeepAlive(e)
}
