package sidecar

import "time"

// When an awaited reply counts as the owner unreachable (docs/sidecar.md,
// "What the timeout measures"). The rule looks at the oldest reply awaited
// on a connection only: replies come back in order, so every other one
// waits behind it.
//
//   - Decision lane (CL.THROTTLE and everything that is not a value or
//     bulk read): the reply's age. A request not fully answered within
//     Timeout of its send takes the owner down, whether the owner was
//     silent or is trickling a reply in: every decision behind it on the
//     connection would wait as long.
//   - Bulk lane (value reads such as GET, bulk reads such as HGETALL:
//     bulk.go): a large healthy reply over a slow link must not look dead,
//     and only reads wait behind it. Its first byte must come within its
//     allowance (Timeout for a value read, BulkTimeout for a bulk read),
//     counted from when it became the oldest awaited reply; after that the
//     connection may not fall silent for BulkTimeout, and once the reply is
//     older than BulkTimeout it must have come at minBulkRate on average
//     (so an endless trickle ends: 1 byte per 100 ms fails after about
//     BulkTimeout, a 50 MB GET at 1 MB/s is waited for).

// minBulkRate is the slowest average rate (bytes per second) a bulk lane's
// reply may arrive at once it is older than BulkTimeout: 64 KiB/s, a
// 512 kbit/s link. A 50 MB value is then allowed BulkTimeout + 800 s.
const minBulkRate = 64 << 10

// replyLeft is how long the oldest awaited reply on a connection may still
// take before its owner counts as unreachable; 0 or less when it has timed
// out. Times are unix ns: sent is when the request was queued, start when
// it became the oldest awaited (the later of sent and the previous reply's
// end), lastRead when the connection last brought bytes; got is how many
// bytes of the reply have arrived. slow is a bulk read's first-byte
// allowance (BulkTimeout rather than Timeout). Pure: tests drive it with
// made-up times.
func replyLeft(now, sent, start, lastRead int64, got int, bulk, slow bool, timeout, bulkTimeout time.Duration) time.Duration {
	if !bulk {
		return time.Duration(sent + int64(timeout) - now)
	}
	if got == 0 {
		first := timeout
		if slow {
			first = bulkTimeout
		}
		return time.Duration(start + int64(first) - now)
	}
	silent := time.Duration(max(lastRead, start) + int64(bulkTimeout) - now)
	rate := time.Duration(start+int64(bulkTimeout)-now) + time.Duration(int64(got)*int64(time.Second)/minBulkRate)
	return min(silent, rate)
}
