// Package ratelimit is the Go client example of docs/clients.md: an HTTP
// middleware that asks celld (CL.THROTTLE, through go-redis) whether a
// request may pass, answers 429 with Retry-After when it may not, and sets
// the RateLimit-* headers either way. Its test runs it against a real
// celld server, so the example cannot rot.
//
// Copy it into your application; it is not a library celld supports.
package ratelimit

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Limit is one CL.THROTTLE policy: Count requests per Period seconds, with
// bursts of up to Burst+1.
type Limit struct {
	Burst, Count, Period int64
}

// Decision is CL.THROTTLE's five-integer reply.
type Decision struct {
	Limited    bool  // 1: denied
	Limit      int64 // Burst + 1
	Remaining  int64 // requests that would pass now
	RetryAfter int64 // seconds until a retry can pass; -1 when allowed, or never (quantity > limit)
	ResetAfter int64 // seconds until the bucket is full again
}

// Throttle runs CL.THROTTLE key Burst Count Period quantity.
func Throttle(ctx context.Context, rdb redis.UniversalClient, key string, l Limit, quantity int64) (Decision, error) {
	v, err := rdb.Do(ctx, "CL.THROTTLE", key, l.Burst, l.Count, l.Period, quantity).Int64Slice()
	if err != nil {
		return Decision{}, err
	}
	if len(v) != 5 {
		return Decision{}, fmt.Errorf("CL.THROTTLE: %d integers, want 5", len(v))
	}
	return Decision{Limited: v[0] == 1, Limit: v[1], Remaining: v[2], RetryAfter: v[3], ResetAfter: v[4]}, nil
}

// SetHeaders writes the rate-limit headers of d:
//
//	RateLimit-Limit: d.Limit            (the burst: requests that pass at once)
//	RateLimit-Remaining: d.Remaining
//	RateLimit-Reset: d.ResetAfter       (seconds until the bucket is full)
//	RateLimit-Policy: <limit>;w=<s>     (w: seconds a full bucket takes to refill)
//	Retry-After: max(d.RetryAfter, 1)   (only when denied and a retry can pass)
//
// Retry-After is at least 1: CL.THROTTLE answers 0 when the retry is less
// than a millisecond away, and a client retrying at once could miss it.
func (d Decision) SetHeaders(h http.Header, l Limit) {
	h.Set("RateLimit-Limit", strconv.FormatInt(d.Limit, 10))
	h.Set("RateLimit-Remaining", strconv.FormatInt(d.Remaining, 10))
	h.Set("RateLimit-Reset", strconv.FormatInt(d.ResetAfter, 10))
	if l.Count > 0 {
		window := (d.Limit*l.Period + l.Count - 1) / l.Count // ceil(limit × period / count)
		h.Set("RateLimit-Policy", fmt.Sprintf("%d;w=%d", d.Limit, window))
	}
	if d.Limited && d.RetryAfter >= 0 {
		h.Set("Retry-After", strconv.FormatInt(max(d.RetryAfter, 1), 10))
	}
}

// Middleware limits next by key(r). When celld cannot be asked (down,
// timeout), failOpen lets the request through (and logs), otherwise it is
// answered 503 with Retry-After: 1. See docs/clients.md for which to pick.
func Middleware(rdb redis.UniversalClient, l Limit, key func(*http.Request) string, failOpen bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A limiter that answers in 100 µs should not hold a request for
		// long when it cannot answer at all.
		ctx, cancel := context.WithTimeout(r.Context(), 50*time.Millisecond)
		d, err := Throttle(ctx, rdb, key(r), l, 1)
		cancel()
		if err != nil {
			if failOpen {
				slog.Warn("rate limiter unavailable; letting the request through", "err", err)
				next.ServeHTTP(w, r)
				return
			}
			w.Header().Set("Retry-After", "1")
			http.Error(w, "rate limiter unavailable", http.StatusServiceUnavailable)
			return
		}
		d.SetHeaders(w.Header(), l)
		if d.Limited {
			if d.RetryAfter < 0 { // quantity above the limit: no retry can pass
				http.Error(w, "request larger than the rate limit", http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "rate limited", http.StatusTooManyRequests)
			return
		}
		next.ServeHTTP(w, r)
	})
}
