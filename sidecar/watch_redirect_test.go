package sidecar

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/celld/celld/cluster"
	"github.com/celld/celld/server"
)

// TestSidecarWatchRedirectNotOnPool: a WATCH its owner answers with MOVED
// (the slot moved, the topology not read again yet) is not followed: it
// gets TRYAGAIN (not run; the client retries it, on the new owner once the
// topology is read again). Before, it was followed on the new owner's
// pooled connection, shared by every client: the WATCH stayed on it, so
// that another client's MULTI/EXEC sent there later (the blocking path: a
// TLS port, --io-loops -1) came back aborted (nil) after the watched key
// changed, though that client watched nothing; and the first client's
// WATCH was not on its pin (checked: fails so without the fix).
func TestSidecarWatchRedirectNotOnPool(t *testing.T) {
	for _, loops := range []int{-1, 2} {
		t.Run("loops="+strconv.Itoa(loops), func(t *testing.T) {
			sidecarIOLoops = loops
			defer func() { sidecarIOLoops = 2 }()
			b := serve(t, nil, server.Config{}, nil) // a plain celld: WATCH per connection
			bh, bp, _ := net.SplitHostPort(b.addr)
			var seed string
			seed = hostileUpstream(t, func(args []string) string {
				switch args[0] {
				case "cluster":
					h, p, _ := net.SplitHostPort(seed)
					return slotsReply([4]string{"0", "8191", h, p}, [4]string{"8192", "16383", bh, bp})
				case "watch":
					return "-MOVED " + strconv.Itoa(cluster.KeySlotString(args[1])) + " " + b.addr + "\r\n"
				}
				return "-ERR unknown command\r\n"
			})
			side := sidecarNode(t, Config{Seeds: []string{seed}, PoolSize: 1, RefreshInterval: time.Hour})
			watched := keyInSlots(0, 8191) // A's by the topology; A says B's
			rdb := client(t, side.addr)
			err := rdb.Watch(ctx, func(tx *redis.Tx) error { return nil }, watched)
			if err == nil || !strings.HasPrefix(err.Error(), "TRYAGAIN") {
				t.Fatalf("WATCH redirected: %v, want TRYAGAIN (not followed on a shared connection)", err)
			}
			// The watched key changes on B; then another client's
			// transaction on B's keys, watching nothing.
			direct := client(t, b.addr)
			if err := direct.Set(ctx, watched, "changed", 0).Err(); err != nil {
				t.Fatal(err)
			}
			other := client(t, side.addr)
			j := keyInSlots(8192, cluster.SlotCount-1)
			if _, err := other.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Set(ctx, j, "1", 0)
				return nil
			}); err != nil {
				t.Fatalf("a transaction watching nothing: %v, want it run", err)
			}
			if v, err := direct.Get(ctx, j).Result(); err != nil || v != "1" {
				t.Fatalf("%s on B: %q %v, want 1 (the transaction ran)", j, v, err)
			}
		})
	}
}
