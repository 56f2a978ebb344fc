// Command replload is bench/repl.sh's load generator: redis-benchmark's
// shape (C connections, pipelines of P, N requests over random keys) but
// it counts error replies instead of stopping at the first one, since a
// replicating leader refuses writes (-TRYAGAIN) while its replication
// lags. It prints "req/s p50_ms p99_ms errors", where a request's latency
// is its pipeline's round trip.
//
//	go run ./bench/replload -addr 127.0.0.1:6379 -c 50 -P 16 -n 200000 CL.THROTTLE ok:__rand_int__ 1000000 1 1
//
// A lone ";" among the arguments separates commands: a request is then all
// of them, and with -tx they are wrapped in MULTI ... EXEC, so a request is
// one transaction (bench/types.sh's MULTI sliding-log row). In every
// argument __rand_int__ is one random key number per request, __now_ms__
// the request's Unix time in ms, __now_ms_1000__ that less 1000, and
// __uniq__ a number unique to the request.
//
//	go run ./bench/replload -tx -P 16 -n 100000 ZADD sl:__rand_int__ __now_ms__ __uniq__ \; ZCARD sl:__rand_int__
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6379", "server")
	conns := flag.Int("c", 50, "connections")
	pipe := flag.Int("P", 1, "pipeline depth")
	n := flag.Int("n", 100000, "requests in all")
	keys := flag.Int("r", 100000, "__rand_int__ is replaced by a number below this")
	tx := flag.Bool("tx", false, "wrap each request's commands in MULTI ... EXEC")
	flag.Parse()
	var cmds [][]string
	cmd := []string{}
	for _, a := range flag.Args() {
		if a == ";" {
			cmds, cmd = append(cmds, cmd), []string{}
			continue
		}
		cmd = append(cmd, a)
	}
	cmds = append(cmds, cmd)
	if *tx {
		cmds = append(append([][]string{{"MULTI"}}, cmds...), []string{"EXEC"})
	}
	for _, c := range cmds {
		if len(c) == 0 {
			fmt.Fprintln(os.Stderr, "replload: no command (or an empty one between ';')")
			os.Exit(2)
		}
	}
	var left atomic.Int64
	left.Store(int64(*n))
	var errs atomic.Int64
	lats := make([][]time.Duration, *conns)
	var wg sync.WaitGroup
	var failed atomic.Value
	start := time.Now()
	for i := 0; i < *conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := run(*addr, cmds, *pipe, *keys, int64(i), &left, &errs, &lats[i]); err != nil {
				failed.Store(err)
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	if err, ok := failed.Load().(error); ok {
		fmt.Fprintln(os.Stderr, "replload:", err)
		os.Exit(1)
	}
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	slices.Sort(all)
	if len(all) == 0 {
		fmt.Fprintln(os.Stderr, "replload: no request made")
		os.Exit(1)
	}
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	fmt.Printf("%.2f %.3f %.3f %d\n", float64(*n)/took.Seconds(), ms(all[len(all)/2]), ms(all[len(all)*99/100]), errs.Load())
}

// uniq numbers requests across connections (__uniq__).
var uniq atomic.Int64

// run is one connection's loop: pipelines of depth requests (each the
// commands cmds) until left runs out; every request's latency is its
// pipeline's round trip.
func run(addr string, cmds [][]string, depth, keys int, seed int64, left, errs *atomic.Int64, lats *[]time.Duration) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	rng := rand.New(rand.NewSource(seed))
	r := bufio.NewReaderSize(c, 64<<10)
	var req []byte
	for {
		k := min(int64(depth), left.Add(-int64(depth))+int64(depth))
		if k <= 0 {
			return nil
		}
		req = req[:0]
		for j := int64(0); j < k; j++ {
			now := time.Now().UnixMilli()
			sub := strings.NewReplacer("__rand_int__", strconv.Itoa(rng.Intn(keys)),
				"__now_ms_1000__", strconv.FormatInt(now-1000, 10),
				"__now_ms__", strconv.FormatInt(now, 10),
				"__uniq__", strconv.FormatInt(uniq.Add(1), 10))
			for _, args := range cmds {
				req = fmt.Appendf(req, "*%d\r\n", len(args))
				for _, a := range args {
					if strings.Contains(a, "__") {
						a = sub.Replace(a)
					}
					req = fmt.Appendf(req, "$%d\r\n%s\r\n", len(a), a)
				}
			}
		}
		t0 := time.Now()
		if _, err := c.Write(req); err != nil {
			return err
		}
		for j := int64(0); j < k*int64(len(cmds)); j++ {
			isErr, err := skipReply(r)
			if err != nil {
				return err
			}
			if isErr {
				errs.Add(1)
			}
		}
		d := time.Since(t0)
		for j := int64(0); j < k; j++ {
			*lats = append(*lats, d)
		}
	}
}

var errReply = errors.New("replload: cannot parse a reply")

// skipReply reads one RESP2 reply and reports whether it was an error.
func skipReply(r *bufio.Reader) (bool, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return false, err
	}
	if len(line) < 3 {
		return false, errReply
	}
	switch line[0] {
	case '-':
		return true, nil
	case '+', ':':
		return false, nil
	case '$':
		n, _ := strconv.Atoi(string(line[1 : len(line)-2]))
		if n >= 0 {
			if _, err := r.Discard(n + 2); err != nil {
				return false, err
			}
		}
		return false, nil
	case '*':
		n, _ := strconv.Atoi(string(line[1 : len(line)-2]))
		for i := 0; i < n; i++ {
			if _, err := skipReply(r); err != nil {
				return false, err
			}
		}
		return false, nil
	}
	return false, errReply
}
