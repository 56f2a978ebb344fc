// Package kinds holds the pure structures behind Redis's value kinds:
// hashes (Hash), lists (List) and sorted sets (ZSet). They know nothing of
// the wire, the disk or the clock; each keeps its approximate heap
// footprint current (Size, O(1)) so the keyspace can charge it to its key.
//
// Concurrency: none of the types is safe for concurrent use; the store
// calls them under the owning key's shard lock.
package kinds

// MaxElements is the most elements (fields, list items, members) one key
// may hold; a command that would pass it is refused with ErrTooBig and
// changes nothing. It bounds what one key can cost and how long one
// command on it can hold its shard (HGETALL, LRANGE 0 -1, ZRANGE 0 -1).
const MaxElements = 1 << 20

// MaxElementBytes is the longest field, value, list item or member, as
// Redis's proto-max-bulk-len default (512 MiB) is larger than any limiter
// needs; celld keeps one value under 64 MiB.
const MaxElementBytes = 64 << 20
