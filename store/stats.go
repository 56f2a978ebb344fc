package store

// Counters for INFO: keys removed by expiry, and the keyspace line's
// keys / expires / avg_ttl.

// ExpiredKeys returns how many keys have been removed because their TTL
// passed, as Redis's expired_keys counts them: found expired on access (any
// command that looks the key up), by the background sweep (SweepStep), or
// by persistence's Drain. Deletions by a command (DEL, FLUSHALL, an EXPIRE
// into the past, a 0 ms TTL) are not expiries and are not counted; Flush
// keeps the count. Safe for concurrent use; takes each shard lock briefly
// (256 short holds), so it is for INFO and metrics, not a hot path.
func (s *Store) ExpiredKeys() int64 {
	var n int64
	for i := range s.shards {
		sh := s.shards[i].Load()
		if sh == nil {
			continue // never used: no key, no state
		}
		sh.mu.Lock()
		n += sh.expired
		sh.mu.Unlock()
	}
	return n
}

// ResetExpiredKeys sets ExpiredKeys back to zero (CONFIG RESETSTAT).
func (s *Store) ResetExpiredKeys() {
	for i := range s.shards {
		sh := s.shards[i].Load()
		if sh == nil {
			continue // never used: no key, no state
		}
		sh.mu.Lock()
		sh.expired = 0
		sh.mu.Unlock()
	}
}

// KeyspaceStats returns INFO keyspace's numbers at nowMs: keys held
// (expired ones not yet removed included, as DBSIZE), keys with a TTL, and
// avg_ttl, the mean remaining TTL in ms of the keys with a TTL that has
// not passed yet (0 when there are none).
//
// Redis estimates avg_ttl from the keys its expiry cycle samples, as a
// running average weighted 2% to the newest sample; the store computes the
// same mean exactly over every key instead, since this walk visits every
// entry anyway (O(keys), one shard lock at a time, like Counts). The two
// agree once Redis's estimate has settled; Redis's lags behind a changing
// keyspace where this does not.
func (s *Store) KeyspaceStats(nowMs int64) (keys, expires int, avgTTLms int64) {
	// The sum is a float: TTLs may be anything up to 2^63 ms (PEXPIREAT),
	// and two such would overflow an int64; the mean needs no more than
	// float64's precision.
	var sum float64
	var live int64
	for i := range s.shards {
		sh := s.shards[i].Load()
		if sh == nil {
			continue // never used: no key, no state
		}
		sh.mu.Lock()
		keys += sh.used
		for j := range sh.slab {
			e := &sh.slab[j]
			if e.flags&flagUsed == 0 || e.exp == 0 {
				continue
			}
			expires++
			if ttl := e.exp - nowMs; ttl > 0 {
				sum += float64(ttl)
				live++
			}
		}
		sh.mu.Unlock()
	}
	if live > 0 {
		avgTTLms = int64(sum / float64(live))
	}
	return keys, expires, avgTTLms
}
