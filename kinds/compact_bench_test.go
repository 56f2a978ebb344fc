package kinds

import (
	"strconv"
	"testing"
)

// The compact forms against the full ones at the sizes of bench/types.sh
// (a 10-field hash, a 100-item list, a 100-member sorted set): the CPU
// cost of one operation of each hot command, allocations included.
func BenchmarkSmallValues(b *testing.B) {
	fields := make([]string, 10)
	for i := range fields {
		fields[i] = "field" + strconv.Itoa(i)
	}
	items := make([]string, 100)
	for i := range items {
		items[i] = "member" + strconv.Itoa(i)
	}
	for _, full := range []bool{false, true} {
		form := "compact"
		if full {
			form = "full"
		}
		b.Run("HSET+HGET/"+form, func(b *testing.B) {
			b.ReportAllocs()
			h := NewHash()
			if full {
				h.toFull()
			}
			for i := 0; b.Loop(); i++ {
				f := fields[i%10]
				h.Set(f, "value")
				if _, ok := h.Get(f); !ok {
					b.Fatal("lost")
				}
			}
		})
		b.Run("LPUSH+RPOP/"+form, func(b *testing.B) {
			b.ReportAllocs()
			l := NewList()
			if full {
				l.toFull()
			}
			for _, s := range items {
				l.PushBack(s)
			}
			for i := 0; b.Loop(); i++ {
				l.PushFront(items[i%100])
				l.PopBack()
			}
		})
		b.Run("LRANGE0-9/"+form, func(b *testing.B) {
			b.ReportAllocs()
			l := NewList()
			if full {
				l.toFull()
			}
			for _, s := range items {
				l.PushBack(s)
			}
			n := 0
			for b.Loop() {
				for i := 0; i <= 9; i++ {
					n += len(l.At(i))
				}
			}
		})
		b.Run("ZADD/"+form, func(b *testing.B) {
			b.ReportAllocs()
			z := NewZSet()
			if full {
				z.toFull()
			}
			for i, s := range items {
				z.Set(s, float64(i))
			}
			for i := 0; b.Loop(); i++ {
				z.Set(items[i%100], float64(i%1000))
			}
		})
		b.Run("ZRANGE0-9/"+form, func(b *testing.B) {
			b.ReportAllocs()
			z := NewZSet()
			if full {
				z.toFull()
			}
			for i, s := range items {
				z.Set(s, float64(i))
			}
			n := 0
			for b.Loop() {
				z.RangeByRank(0, 9, false, func(m string, _ float64) bool { n += len(m); return true })
			}
		})
		b.Run("ZREVRANGE0-9/"+form, func(b *testing.B) {
			b.ReportAllocs()
			z := NewZSet()
			if full {
				z.toFull()
			}
			for i, s := range items {
				z.Set(s, float64(i))
			}
			n := 0
			for b.Loop() {
				z.RangeByRank(0, 9, true, func(m string, _ float64) bool { n += len(m); return true })
			}
		})
		b.Run("IMAGE-list+hash/"+form, func(b *testing.B) {
			b.ReportAllocs()
			l, h := NewList(), NewHash()
			if full {
				l.toFull()
				h.toFull()
			}
			for i, s := range items {
				l.PushBack(s)
				if i < 10 {
					h.Set(fields[i], "value"+strconv.Itoa(i))
				}
			}
			var img []byte
			for b.Loop() {
				img = h.AppendImage(l.AppendImage(img[:0]))
			}
		})
	}
}

// BenchmarkHashImage is the drain's image of a small compact hash (one
// per dirty key for hashes under store's smallImage): 4 and 10 fields.
func BenchmarkHashImage(b *testing.B) {
	for _, n := range []int{4, 10} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			h := NewHash()
			for i := range n {
				h.Set("field"+strconv.Itoa(i), "value"+strconv.Itoa(i))
			}
			buf := make([]byte, 0, 4096)
			for b.Loop() {
				buf = h.AppendImage(buf[:0])
			}
		})
	}
}
