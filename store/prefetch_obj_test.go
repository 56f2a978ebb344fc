package store

import (
	"fmt"
	"sync"
	"testing"
	"unsafe"
)

// bufObj is a testObj whose elements live in a buffer of their own, as
// kinds' compact forms (DataAddresser).
type bufObj struct {
	testObj
	buf []byte
}

func (o *bufObj) PrefetchAddrs() (unsafe.Pointer, int, unsafe.Pointer) {
	return unsafe.Pointer(unsafe.SliceData(o.buf)), len(o.buf), nil
}

// TestPrefetchObjects: Prefetch over keys of every sort (objects with and
// without a buffer, strings, absent keys) while other goroutines create,
// grow and delete objects changes nothing, races with nothing (run under
// -race), and liveObjs counts each shard's objects exactly through
// creation, deletion, FLUSH and a string SET over an object.
func TestPrefetchObjects(t *testing.T) {
	s := New(Options{TrackDirty: true})
	const now = 1_000_000
	var keys [][]byte
	for i := 0; i < 600; i++ {
		keys = append(keys, []byte(fmt.Sprintf("k%d", i)))
	}
	write := func(i int, delta int) {
		k := keys[i]
		mk := func() Object {
			if i%3 == 0 {
				return &testObj{}
			}
			return &bufObj{buf: make([]byte, 0, 16)}
		}
		if _, err := s.WriteObject(k, KindHash, now, mk, func(o Object) bool {
			switch o := o.(type) {
			case *testObj:
				o.n += delta
			case *bufObj:
				o.n += delta
				o.buf = append(o.buf, 'x')
			}
			return true
		}); err != nil && i%5 != 4 {
			t.Error(err)
		}
	}
	for i := range keys {
		if i%5 == 4 {
			s.Put(keys[i], Value{TAT: uint64(i)}, now, 0, false) // strings among them
		} else if i%7 != 6 { // and some absent
			write(i, 1)
		}
	}
	live := func() (n int) {
		for i := range s.shards {
			n += int(s.shardAt(i).liveObjs.Load())
		}
		return n
	}
	if got, want := live(), s.Len()-600/5; got != want {
		t.Fatalf("liveObjs sums to %d, want %d objects", got, want)
	}
	before := s.Len()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			hs := make([]uint64, 64)
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				from := (n*37 + g*101) % (len(keys) - 64)
				s.Prefetch(keys[from:from+64], hs)
			}
		}(g)
	}
	for r := 0; r < 20; r++ { // writers meanwhile: grow, empty (delete), recreate
		for i := range keys {
			if i%5 != 4 && i%7 != 6 {
				write(i, -1)
				write(i, 1)
			}
		}
	}
	close(stop)
	wg.Wait()
	if s.Len() != before {
		t.Fatalf("key count %d -> %d", before, s.Len())
	}
	if got, want := live(), s.Len()-600/5; got != want {
		t.Fatalf("after churn liveObjs sums to %d, want %d", got, want)
	}
	s.Put(keys[0], Value{TAT: 1}, now, 0, false) // SET over an object
	if got, want := live(), s.Len()-600/5-1; got != want {
		t.Fatalf("after SET over an object liveObjs sums to %d, want %d", got, want)
	}
	s.Flush()
	if got := live(); got != 0 {
		t.Fatalf("after Flush liveObjs sums to %d", got)
	}
}
