package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	"github.com/celld/celld/store"
)

// memoryConfig is the memory bound's part of the configuration (see
// docs/memory.md): --maxmemory in Redis's units and --maxmemory-policy in
// Redis's words, both also settable with CONFIG SET at run time.
type memoryConfig struct {
	maxMemoryText string // as given
	policyText    string
	maxMemory     int64 // parsed by resolve
	policy        store.Policy
}

func registerMemoryFlags(fs *flag.FlagSet, m *memoryConfig) {
	fs.StringVar(&m.maxMemoryText, "maxmemory", envOr("CELLD_MAXMEMORY", "0"),
		"bound on the keyspace's memory, in Redis units (bytes, or k/kb/m/mb/g/gb: 64mb, 2gb); 0 = no bound (env CELLD_MAXMEMORY)")
	fs.StringVar(&m.policyText, "maxmemory-policy", envOr("CELLD_MAXMEMORY_POLICY", "noeviction"),
		"what a new key meets at --maxmemory: noeviction (refused with -OOM), volatile-ttl (evict the key nearest its expiry: the one for limiters), volatile-lru, allkeys-lru, volatile-random, allkeys-random (env CELLD_MAXMEMORY_POLICY)")
}

// resolve parses the flags' text; parseFlags reports its error (exit 2).
func (m *memoryConfig) resolve() error {
	n, err := store.ParseMemory(m.maxMemoryText)
	if err != nil {
		return fmt.Errorf("--maxmemory (env CELLD_MAXMEMORY) %q: must be a number of bytes, optionally with a unit k, kb, m, mb, g or gb (e.g. 64mb); 0 = no bound", m.maxMemoryText)
	}
	p, err := store.ParsePolicy(m.policyText)
	if err != nil {
		return fmt.Errorf("--maxmemory-policy (env CELLD_MAXMEMORY_POLICY) %q: must be one of %s", m.policyText, store.PolicyNames)
	}
	m.maxMemory, m.policy = n, p
	return nil
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
func applyMemory(m memoryConfig, st *store.Store, log *slog.Logger) error {
	st.SetPolicy(m.policy)
	st.SetMaxMemory(m.maxMemory)
	if m.maxMemory == 0 {
		return nil
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		// A soft limit for the Go heap at the RSS a bounded server is
		// sized for (docs/memory.md: 1.5 x maxmemory + 40 MB, less ~10 MB
		// of runtime and binary): the collector works harder as the heap
		// nears it instead of letting garbage (persistence's buffers under
		// a key spray) grow the RSS past it. It sits above the live heap
		// (the keys, ~1.2 x maxmemory at most, plus pebble's memtables and
		// cache), so it does not make the collector run constantly. An
		// explicit GOMEMLIMIT wins; CONFIG SET maxmemory does not move it.
		debug.SetMemoryLimit(m.maxMemory*3/2 + 30<<20)
	}
	used := st.UsedMemory()
	log.Info("memory bound", "maxmemory", m.maxMemory, "policy", m.policy.String(), "used_memory", used, "keys", st.Len())
	if used <= m.maxMemory {
		return nil
	}
	if m.policy == store.NoEviction {
		if used <= m.maxMemory+m.maxMemory/64+64<<10 {
			log.Warn("restored data is slightly over --maxmemory (within a running server's overshoot): new keys are refused until keys expire or are deleted",
				"used_memory", used, "maxmemory", m.maxMemory)
			return nil
		}
		return fmt.Errorf("%w: the %d restored keys take %d bytes (used_memory), over --maxmemory %d with --maxmemory-policy noeviction; raise --maxmemory, or choose an eviction policy (volatile-ttl for limiters) to evict the excess at start-up",
			errOverBound, st.Len(), used, m.maxMemory)
	}
	t0 := time.Now()
	n, err := st.EvictToLimit(time.Now().UnixMilli())
	if err != nil {
		log.Warn("restored data is over --maxmemory and the policy finds nothing more to evict (keys without a TTL under a volatile policy): new keys are refused until keys expire or are deleted",
			"evicted", n, "used_memory", st.UsedMemory(), "maxmemory", m.maxMemory, "policy", m.policy.String())
		return nil
	}
	log.Warn("restored data was over --maxmemory: evicted by the policy at start-up",
		"evicted", n, "policy", m.policy.String(), "used_memory", st.UsedMemory(), "maxmemory", m.maxMemory, "duration", time.Since(t0).String())
	return nil
}
