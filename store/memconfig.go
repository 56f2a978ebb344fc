package store

import (
	"errors"
	"strconv"
	"strings"
)

// The words of the memory bound, as Redis spells them: maxmemory's units
// and maxmemory-policy's names. main (flags, environment) and the server's
// CONFIG SET both parse through these, so a value means the same wherever
// it is given. (They belong to the configuration layer; they live here
// until it exists, beside the Policy type they produce.)

// Policy is what the store does when a new key would take used memory past
// the bound (Options.MaxMemory, SetMaxMemory). The zero value is
// NoEviction.
type Policy uint8

// The eviction policies: Redis's names and meaning (its LFU policies are
// not offered).
const (
	// NoEviction refuses to create keys while used memory is over the
	// bound (ErrOOM); keys that exist can still be written, read and
	// deleted.
	NoEviction Policy = iota
	// VolatileTTL evicts, among keys with a TTL, the one nearest its
	// expiry. For a limiter that is the key whose quota has almost all
	// come back, so evicting it over-admits least: the policy to use.
	VolatileTTL
	// VolatileLRU evicts the least recently used key with a TTL.
	VolatileLRU
	// AllKeysLRU evicts the least recently used key.
	AllKeysLRU
	// VolatileRandom evicts a random key with a TTL.
	VolatileRandom
	// AllKeysRandom evicts a random key.
	AllKeysRandom
	numPolicies
)

var policyNames = [numPolicies]string{
	NoEviction:     "noeviction",
	VolatileTTL:    "volatile-ttl",
	VolatileLRU:    "volatile-lru",
	AllKeysLRU:     "allkeys-lru",
	VolatileRandom: "volatile-random",
	AllKeysRandom:  "allkeys-random",
}

// PolicyNames lists the accepted policy names, in the order error messages
// give them (Redis's order).
const PolicyNames = "volatile-lru, volatile-random, volatile-ttl, allkeys-lru, allkeys-random, noeviction"

// ErrBadPolicy: a maxmemory-policy that is not one of PolicyNames.
var ErrBadPolicy = errors.New("argument(s) must be one of the following: " + PolicyNames)

// ErrBadMemory: a maxmemory that is not a memory value.
var ErrBadMemory = errors.New("argument must be a memory value")

// String returns the policy's Redis name.
func (p Policy) String() string {
	if p < numPolicies {
		return policyNames[p]
	}
	return "unknown"
}

// volatile reports whether the policy only evicts keys that have a TTL.
func (p Policy) volatile() bool {
	return p == VolatileTTL || p == VolatileLRU || p == VolatileRandom
}

// ParsePolicy parses a maxmemory-policy name, case-insensitively.
func ParsePolicy(s string) (Policy, error) {
	for p, name := range policyNames {
		if strings.EqualFold(s, name) {
			return Policy(p), nil
		}
	}
	return 0, ErrBadPolicy
}

// ParseMemory parses a memory value as Redis's memtoll does: a
// non-negative integer of bytes, optionally followed by a unit, any case:
// k, m, g (powers of 1000) or kb, mb, gb (powers of 1024). "0" means
// unbounded where the caller says so. No fractions, no sign, no spaces.
func ParseMemory(s string) (int64, error) {
	num, unit := s, int64(1)
	lower := strings.ToLower(s)
	for _, u := range []struct {
		suffix string
		mul    int64
	}{{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"k", 1e3}, {"m", 1e6}, {"g", 1e9}, {"b", 1}} {
		if strings.HasSuffix(lower, u.suffix) {
			num, unit = s[:len(s)-len(u.suffix)], u.mul
			break
		}
	}
	if num == "" || num[0] < '0' || num[0] > '9' {
		return 0, ErrBadMemory
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n > (1<<63-1)/unit {
		return 0, ErrBadMemory
	}
	return n * unit, nil
}
