package compat_test

import (
	"fmt"
	"sort"
	"sync"
	"testing"

	redigo "github.com/gomodule/redigo/redis"
)

// TestConcurrentHotKey: 50 connections hammer one 10-per-hour bucket with
// 1,000 calls in all. The store linearises calls on one key, so exactly 10
// are allowed, their remaining counts are 9, 8, …, 0 (each once), and every
// reply is well-formed. The wall clock is used: an hour-long emission
// interval (360 s) cannot refill within the test.
func TestConcurrentHotKey(t *testing.T) {
	ts := startServer(t)
	const workers, perWorker = 50, 20
	conns := make([]redigo.Conn, workers)
	for i := range conns {
		conns[i] = newRedigo(t, ts)
	}
	type result struct {
		reply []int64
		err   error
	}
	results := make(chan result, workers*perWorker)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, conn := range conns {
		wg.Add(1)
		go func(conn redigo.Conn) {
			defer wg.Done()
			<-start
			for j := 0; j < perWorker; j++ {
				r, err := redigo.Int64s(conn.Do("CL.THROTTLE", "hot", 9, 10, 3600))
				results <- result{r, err}
			}
		}(conn)
	}
	close(start)
	wg.Wait()
	close(results)

	var allowedRemaining []int64
	n := 0
	for r := range results {
		n++
		if r.err != nil {
			t.Fatalf("call error: %v", r.err)
		}
		v := r.reply
		if len(v) != 5 || v[1] != 10 {
			t.Fatalf("malformed reply %v", v)
		}
		switch v[0] {
		case 0: // allowed: remaining 0..9, no retry, reset 360 s × (10 − remaining)
			if v[2] < 0 || v[2] > 9 || v[3] != -1 || v[4] != 360*(10-v[2]) {
				t.Errorf("allowed reply %v", v)
			}
			allowedRemaining = append(allowedRemaining, v[2])
		case 1: // denied: bucket full, retry ≤ one EI, reset ≤ the whole bucket
			if v[2] != 0 || v[3] < 359 || v[3] > 360 || v[4] < 3599 || v[4] > 3600 {
				t.Errorf("denied reply %v", v)
			}
		default:
			t.Errorf("reply %v: limited is neither 0 nor 1", v)
		}
	}
	if n != workers*perWorker {
		t.Fatalf("%d replies, want %d", n, workers*perWorker)
	}
	sort.Slice(allowedRemaining, func(i, j int) bool { return allowedRemaining[i] < allowedRemaining[j] })
	if got := fmt.Sprint(allowedRemaining); got != "[0 1 2 3 4 5 6 7 8 9]" {
		t.Errorf("allowed calls had remaining %s, want each of 0..9 once", got)
	}
}

// TestConcurrentManyKeys: concurrent connections on distinct keys (and on
// shared ones) through go-redis's pool, under -race: each key admits exactly
// its burst.
func TestConcurrentManyKeys(t *testing.T) {
	ts := startServer(t)
	rdb := newGoRedis(t, ts)
	const keys, callsPerKey = 40, 8
	var wg sync.WaitGroup
	allowed := make([]int, keys)
	var mu sync.Mutex
	for g := 0; g < 20; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for k := 0; k < keys; k++ {
				if (k+g)%5 != 0 {
					continue
				}
				for j := 0; j < callsPerKey/2; j++ {
					v, err := rdb.Do(ctx, "CL.THROTTLE", fmt.Sprintf("k%d", k), 4, 1, 3600).Int64Slice()
					if err != nil {
						t.Error(err)
						return
					}
					if v[0] == 0 {
						mu.Lock()
						allowed[k]++
						mu.Unlock()
					}
				}
			}
		}(g)
	}
	wg.Wait()
	for k, n := range allowed {
		if n != 5 {
			t.Errorf("key k%d: %d allowed, want 5 (burst 4 + 1)", k, n)
		}
	}
}
