package kinds

import (
	"runtime"
	"strconv"
	"testing"
)

// shrinkHeap is the live heap after two collections.
func shrinkHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestShrunkMapsCharged: a hash or sorted set that grew to 20,000 elements
// and was cut back keeps its Go map's table (a map never gives it back):
// 20 such keys cut to 10 elements each held ~35 MB of heap while Size
// charged ~16-27 KB, so one client could grow the heap past --maxmemory
// without bound (fill a key, cut it, go on with the next). Size must
// follow the heap, at every point of the cut.
func TestShrunkMapsCharged(t *testing.T) {
	const keys, n = 16, 20_000
	type kind struct {
		name   string
		make   func() (size func() int64, add, del func(i int))
		minRel float64
	}
	kinds := []kind{
		{"hash", func() (func() int64, func(int), func(int)) {
			h := NewHash()
			return h.Size, func(i int) { h.SetTransient("f"+strconv.Itoa(i), "v") }, func(i int) { h.Delete("f" + strconv.Itoa(i)) }
		}, 0.7},
		{"zset", func() (func() int64, func(int), func(int)) {
			z := NewZSet()
			return z.Size, func(i int) { z.SetTransient("m"+strconv.Itoa(i), float64(i)) }, func(i int) { z.Remove("m" + strconv.Itoa(i)) }
		}, 0.7},
	}
	for _, k := range kinds {
		for _, keep := range []int{n / 3, n / 5, 10} {
			h0 := shrinkHeap()
			sizes := make([]func() int64, keys)
			for j := range keys {
				size, add, del := k.make()
				for i := range n {
					add(i)
				}
				for i := keep; i < n; i++ {
					del(i)
				}
				sizes[j] = size
			}
			heap := float64(shrinkHeap() - h0)
			var charged int64
			for _, s := range sizes {
				charged += s()
			}
			rel := float64(charged) / heap
			t.Logf("%s cut from %d to %d elements: charged %d B, heap %.0f B (%.2f)", k.name, n, keep, charged, heap, rel)
			if rel < k.minRel || rel > 2 {
				t.Errorf("%s cut from %d to %d elements: Size charges %d B for %.0f B of heap (%.2f), want %.1f-2", k.name, n, keep, charged, heap, rel, k.minRel)
			}
			runtime.KeepAlive(sizes)
		}
	}
}

// liveSizeOf is obj's liveSize (Size for a list, whose Size follows its
// content).
func liveSizeOf(obj interface{ Size() int64 }) int64 {
	switch o := obj.(type) {
	case *Hash:
		return o.liveSize()
	case *ZSet:
		return o.liveSize()
	}
	return obj.Size()
}
