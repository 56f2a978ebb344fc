package main

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"time"

	"github.com/celld/celld/config"
	"github.com/celld/celld/store"
)

// followBound makes what depends on the bound follow it, at start-up and
// after every CONFIG SET maxmemory: the Go runtime's soft memory limit
// (softMemoryLimit, raised to the live heap when that is higher:
// main_gclimit.go; an explicit GOMEMLIMIT wins: then the limit is left
// alone), the GC's headroom for a lean heap (gcHeadroom, main_gc.go; an
// explicit GOGC wins: the target is not adapted then), and with
// persistence on the share of the bound set aside for persistence's
// buffers (persistReserve).
func followBound(st *store.Store, persist bool) {
	_, explicit := os.LookupEnv("GOMEMLIMIT")
	st.OnMaxMemory(func(n int64) {
		gcHeadroom.Store(headroomFor(n))
		if persist {
			st.SetExternalMemory(persistReserve(n))
		}
		if !explicit {
			softLimitBase.Store(softMemoryLimit(n))
			setSoftLimit(softMemoryLimit(n)) // never below the live heap: main_gclimit.go
		}
	})
	if explicit {
		softLimitBase.Store(0) // GOMEMLIMIT's: the loop leaves it alone
	} else {
		followLiveHeap(time.Second)
	}
}

// persistReserve is the part of the bound n set aside, with persistence
// on, for persistence's buffers: the changes of a window being encoded
// and written while the next window's are gathered, and pebble's memtable
// while a base is written. Under a key spray every key is written to disk
// and deleted again, and those buffers (2-15 MB at 100k new keys a
// second, more when a slow disk stretches a window) were not counted:
// with the whole bound given to keys, RSS passed the 1.5 x maxmemory +
// 40 MB bar. The reserve is counted in used_memory (store.
// SetExternalMemory), so the keys get the rest: 7/8 of the bound.
func persistReserve(n int64) int64 { return n / 8 }

// softMemoryLimit is the Go runtime's soft memory limit for the bound n
// (0: none): the RSS a bounded server is sized for (docs/memory.md: 1.5 x
// maxmemory + 40 MB) less what the limit does not govern, the binary's
// mapped pages (~19 MB of RSS: an idle celld had 23 MB of RSS, 4 MB of it
// anonymous; 3-5 MB since releaseTextPages, main_text_linux.go, which
// leaves that much more room under the bar), and a few MB of margin. The runtime's scavenger keeps the
// memory it holds near the limit, so RSS lands at about limit + 19 MB: a
// limit of 1.5 x maxmemory + 30 MB let RSS reach 146-151 MB against the
// 136 MB bar at 64 MB. The collector works harder as the heap nears it
// instead of letting garbage (persistence's buffers under a key spray)
// grow the RSS. It sits above the live heap (the keys, ~1.1-1.2 x
// maxmemory at most, persistence's buffers included, which the store
// counts in used_memory), so it does not make the collector run
// constantly.
func softMemoryLimit(n int64) int64 {
	if n <= 0 {
		return math.MaxInt64
	}
	return n*3/2 + 16<<20
}

// errOverBound: the restored data does not fit --maxmemory under
// noeviction, so celld will not start (exit 2).
var errOverBound = errors.New("restored data is over --maxmemory")

// applyMemory sets the bound on the store after the restore. When the
// restored keys are over it, they are evicted by the policy before
// anything is served (the deletions reach the disk with the next flush);
// under noeviction celld refuses to start instead, unless the excess is
// within what a running server may overshoot by (the accounting's lag, a
// 64th of the bound at most, plus a few keys), so that a server stopped at
// its bound always starts again.
func applyMemory(cfg *config.Config, st *store.Store, log *slog.Logger) error {
	policy, err := store.ParsePolicy(cfg.MaxMemoryPolicy)
	if err != nil { // config's enum holds store's names; a mismatch is a bug
		return fmt.Errorf("--maxmemory-policy %q: %w", cfg.MaxMemoryPolicy, err)
	}
	st.SetPolicy(policy)
	followBound(st, cfg.Persist)
	st.SetMaxMemory(cfg.MaxMemory)
	if cfg.MaxMemory == 0 {
		return nil
	}
	used := st.UsedMemory()
	log.Info("memory bound", "maxmemory", cfg.MaxMemory, "policy", policy.String(), "used_memory", used, "keys", st.Len())
	if used <= cfg.MaxMemory {
		return nil
	}
	if policy == store.NoEviction {
		if used <= cfg.MaxMemory+cfg.MaxMemory/64+64<<10 {
			log.Warn("restored data is slightly over --maxmemory (within a running server's overshoot): new keys are refused until keys expire or are deleted",
				"used_memory", used, "maxmemory", cfg.MaxMemory)
			return nil
		}
		return fmt.Errorf("%w: the %d restored keys take %d bytes (used_memory), over --maxmemory %d with --maxmemory-policy noeviction; raise --maxmemory, or choose an eviction policy (volatile-ttl for limiters) to evict the excess at start-up",
			errOverBound, st.Len(), used, cfg.MaxMemory)
	}
	t0 := time.Now()
	n, err := st.EvictToLimit(time.Now().UnixMilli())
	if err != nil {
		log.Warn("restored data is over --maxmemory and the policy finds nothing more to evict (keys without a TTL under a volatile policy): new keys are refused until keys expire or are deleted",
			"evicted", n, "used_memory", st.UsedMemory(), "maxmemory", cfg.MaxMemory, "policy", policy.String())
		return nil
	}
	log.Warn("restored data was over --maxmemory: evicted by the policy at start-up",
		"evicted", n, "policy", policy.String(), "used_memory", st.UsedMemory(), "maxmemory", cfg.MaxMemory, "duration", time.Since(t0).String())
	return nil
}
