package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// replStatus reads CELLD.REPL STATUS as a map.
func replStatus(t testing.TB, rdb *redis.Client) map[string]string {
	t.Helper()
	s, err := rdb.Do(context.Background(), "CELLD.REPL", "STATUS").Text()
	if err != nil {
		t.Fatalf("CELLD.REPL STATUS: %v", err)
	}
	m := map[string]string{}
	for _, line := range strings.Split(s, "\r\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = v
		}
	}
	return m
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// admission is one answered CL.THROTTLE that was allowed, with the client's
// clock before the request and after the reply.
type admission struct {
	key        string
	sent, recv time.Time
}

// TestProcessReplicationFailover runs a leader and a follower as
// processes, loads the leader with CL.THROTTLE from 8 clients on 10 keys
// (burst 9, 10 per second: τ = 100 ms), kills the leader with -9,
// promotes the follower (CELLD.REPL LEAD 2), restarts the old leader as
// its follower, and loads the new leader. Every client logs its answered
// admissions; per key, the admissions may not exceed what GCRA allows over
// the span they were made in, b+1+⌊span/τ⌋ (a bound on any sequence of
// server decisions, since each was made between its client's send and
// receive times), by more than: async, b+1+⌈L/τ⌉ with L = max-replica-lag;
// sync, 0. A control run ("none": the standby does not replicate) must
// show over-admission, so that the measure is known to see a lost state.
func TestProcessReplicationFailover(t *testing.T) {
	for _, mode := range []string{"async", "sync", "none"} {
		t.Run(mode, func(t *testing.T) { testFailover(t, mode) })
	}
}

func testFailover(t *testing.T, mode string) {
	const (
		burst, count, period = 9, 10, 1 // τ = 100 ms; a burst of 10 makes a lost state plain
		tau                  = time.Second / count
		lag                  = 10 * time.Millisecond
		keys, clients        = 10, 8
	)
	ctx := context.Background()
	replA, replB := freeAddr(t), freeAddr(t)
	control := mode == "none"
	common := []string{"--replica-ack", mode, "--max-replica-lag", lag.String()}
	if control {
		common = nil
	}
	var a, b *child
	if control {
		a, b = mustLaunch(t, t.TempDir()), mustLaunch(t, t.TempDir())
	} else {
		a = mustLaunch(t, t.TempDir(), append([]string{"--replication", "yes", "--repl-addr", replA}, common...)...)
		b = mustLaunch(t, t.TempDir(), append([]string{"--replicate-from", replA, "--repl-addr", replB}, common...)...)
	}
	ra, rb := a.client(), b.client()
	if !control {
		waitFor(t, "follower synced", func() bool { return replStatus(t, rb)["synced"] == "true" })
		if err := rb.Set(ctx, "x", "1", 0).Err(); err == nil || !strings.HasPrefix(err.Error(), "READONLY") {
			t.Fatalf("write on the follower: %v", err)
		}
		// Visible on the follower once acknowledged.
		if _, err := ra.Do(ctx, "CL.THROTTLE", "seen", burst, count, period).Result(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "admission visible on the follower", func() bool { return rb.Exists(ctx, "seen").Val() == 1 })
	}

	var target atomic.Pointer[string]
	target.Store(&a.addr)
	var mu sync.Mutex
	var log []admission
	var errs, refused atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var rdb *redis.Client
			var at string
			defer func() {
				if rdb != nil {
					rdb.Close()
				}
			}()
			for i := c; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if addr := *target.Load(); addr != at {
					if rdb != nil {
						rdb.Close()
					}
					at = addr
					rdb = redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, PoolSize: 1,
						DialTimeout: 200 * time.Millisecond, ReadTimeout: 2 * time.Second})
				}
				key := fmt.Sprintf("k%d", i%keys)
				sent := time.Now()
				v, err := rdb.Do(ctx, "CL.THROTTLE", key, burst, count, period).Slice()
				recv := time.Now()
				if err != nil {
					if strings.HasPrefix(err.Error(), "TRYAGAIN") {
						refused.Add(1)
					} else {
						errs.Add(1)
					}
					time.Sleep(time.Millisecond)
					continue
				}
				if v[0].(int64) == 0 {
					mu.Lock()
					log = append(log, admission{key, sent, recv})
					mu.Unlock()
				}
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	if !control {
		st := replStatus(t, ra)
		t.Logf("%s: leader before the kill: lag p50 %sus p99 %sus, %s B/s, refused %s", mode, st["lag_p50_us"], st["lag_p99_us"], st["bytes_per_sec"], st["refused_writes"])
	}
	a.kill()
	killed := time.Now()
	if !control {
		if err := rb.Do(ctx, "CELLD.REPL", "LEAD", 2).Err(); err != nil {
			t.Fatal(err)
		}
	}
	target.Store(&b.addr)
	if !control {
		// The old leader comes back as the new one's follower.
		a2 := mustLaunch(t, a.dir, append([]string{"--replicate-from", replB, "--repl-addr", replA}, common...)...)
		if err := a2.client().Do(ctx, "CELLD.REPL", "FOLLOW", 2, replB).Err(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "old leader resynced as follower", func() bool { return replStatus(t, a2.client())["synced"] == "true" })
	}
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()

	byKey := map[string][]admission{}
	for _, ad := range log {
		byKey[ad.key] = append(byKey[ad.key], ad)
	}
	after := 0
	for _, ad := range log {
		if ad.sent.After(killed) {
			after++
		}
	}
	if len(byKey) != keys || after == 0 {
		t.Fatalf("load did not reach every key on both leaders: %d keys, %d admissions after the kill", len(byKey), after)
	}
	bound := 0
	if mode == "async" {
		bound = burst + 1 + int(math.Ceil(float64(lag)/float64(tau)))
	}
	worst := 0
	for k, ads := range byKey {
		first, last := ads[0].sent, ads[0].recv
		for _, ad := range ads {
			if ad.sent.Before(first) {
				first = ad.sent
			}
			if ad.recv.After(last) {
				last = ad.recv
			}
		}
		allowed := burst + 1 + int(last.Sub(first)/tau)
		over := len(ads) - allowed
		worst = max(worst, over)
		if over > bound && !control {
			t.Errorf("%s: key %s: %d admissions in %v, GCRA allows %d: %d over, bound %d", mode, k, len(ads), last.Sub(first), allowed, over, bound)
		}
	}
	t.Logf("%s: %d admissions (%d after the kill), refused %d, errors %d; worst over-admission per key %d (bound %d)",
		mode, len(log), after, refused.Load(), errs.Load(), worst, bound)
	if control && worst == 0 {
		t.Fatal("control: a standby without replication showed no over-admission; the measure cannot see a lost state")
	}
}

// TestProcessMinReplicas: the availability choice (docs/replica-availability.md).
// --min-replicas 1: a leader with no synced follower refuses writes with
// -NOREPLICAS, accepts them once one has synced, and refuses them again
// once it is killed. The default, 0: a leader alone accepts writes long
// after --max-replica-lag has passed. On the way, INFO replication (both
// roles) and the Prometheus series say what happened.
func TestProcessMinReplicas(t *testing.T) {
	ctx := context.Background()
	throttle := func(rdb *redis.Client, key string) error {
		return rdb.Do(ctx, "CL.THROTTLE", key, 9, 10, 1).Err()
	}
	replA := freeAddr(t)
	metricsA := freeAddr(t)
	a := mustLaunch(t, t.TempDir(), "--replication", "yes", "--repl-addr", replA, "--min-replicas", "1", "--metrics-addr", metricsA)
	ra := a.client()
	if err := throttle(ra, "k"); err == nil || !strings.HasPrefix(err.Error(), "NOREPLICAS") {
		t.Fatalf("--min-replicas 1, no follower: %v (want NOREPLICAS)", err)
	}
	b := mustLaunch(t, t.TempDir(), "--replicate-from", replA, "--repl-addr", freeAddr(t))
	waitFor(t, "writes accepted once the follower synced", func() bool { return throttle(ra, "k") == nil })
	for i := range 20 {
		// TRYAGAIN (the follower's ack older than --max-replica-lag,
		// 10 ms) is the retryable answer a loaded machine can give any
		// write; what must never come while the follower is synced is
		// NOREPLICAS.
		key := fmt.Sprint("w", i)
		waitFor(t, "write "+key+" accepted", func() bool {
			err := throttle(ra, key)
			if err != nil && !strings.HasPrefix(err.Error(), "TRYAGAIN") {
				t.Fatal(err)
			}
			return err == nil
		})
	}
	info := func(rdb *redis.Client) string { return rdb.Info(ctx, "replication").Val() }
	waitFor(t, "INFO replication on both sides", func() bool {
		li, fi := info(ra), info(b.client())
		return strings.Contains(li, "role:master\r\nconnected_slaves:1\r\nslave0:") && strings.Contains(li, "state=online") &&
			strings.Contains(li, "repl_min_replicas:1") &&
			strings.Contains(fi, "role:slave") && strings.Contains(fi, "master_link_status:up") &&
			strings.Contains(fi, "master_port:"+replA[strings.LastIndex(replA, ":")+1:])
	})
	b.kill()
	waitFor(t, "writes refused once the follower is gone", func() bool {
		err := throttle(ra, "k")
		return err != nil && strings.HasPrefix(err.Error(), "NOREPLICAS")
	})
	if st := replStatus(t, ra); st["min_replicas"] != "1" || st["refused_no_replicas"] == "0" {
		t.Errorf("status: min_replicas %s, refused_no_replicas %s", st["min_replicas"], st["refused_no_replicas"])
	}
	if li := info(ra); !strings.Contains(li, "connected_slaves:0") || strings.Contains(li, "repl_refused_no_replicas:0\r\n") {
		t.Errorf("INFO replication after the follower died:\n%s", li)
	}
	resp, err := http.Get("http://" + metricsA + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	series := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if name, v, ok := strings.Cut(line, " "); ok && strings.HasPrefix(name, "celld_replication_") {
			series[name], _ = strconv.ParseFloat(v, 64)
		}
	}
	for _, s := range []string{`celld_replication_refused_writes_total{reason="no_replicas"}`, "celld_replication_ack_lag_seconds_count",
		`celld_replication_ack_lag_seconds_bucket{le="+Inf"}`, `celld_replication_role{role="leader"}`, "celld_replication_sent_bytes_total", "celld_replication_offset"} {
		if series[s] <= 0 {
			t.Errorf("/metrics: %s = %v", s, series[s])
		}
	}
	if v, ok := series["celld_replication_connected_followers"]; !ok || v != 0 {
		t.Errorf("/metrics: connected followers %v (present %v) after the follower died", v, ok)
	}

	c := mustLaunch(t, t.TempDir(), "--replication", "yes", "--repl-addr", freeAddr(t), "--max-replica-lag", "5ms")
	rc := c.client()
	for i := range 50 { // ≥ 100 ms: twenty times the lag bound
		if err := throttle(rc, fmt.Sprint("k", i)); err != nil {
			t.Fatalf("--min-replicas 0, no follower, write %d: %v", i, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
