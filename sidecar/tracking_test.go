package sidecar

import (
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// TestSidecarTrackingRefused: CLIENT TRACKING ON through a sidecar is
// refused with an error that says why (the sidecar would never hear of
// the owners' changes, so a client-side cache would go stale silently),
// in every mode, RESP2 and RESP3; OFF and the read-only subcommands work;
// a bad option is still a syntax error first. rueidis, which asks for
// tracking on connect unless DisableCache, fails to connect with its
// ErrNoCache carrying that text (so it cannot cache behind the sidecar's
// back), and works with DisableCache.
func TestSidecarTrackingRefused(t *testing.T) {
	owners := ownerCluster(t, 3)
	side := sidecarNode(t, Config{Seeds: []string{owners[0].addr}})
	for _, proto := range []int{2, 3} {
		rdb := redis.NewClient(&redis.Options{Addr: side.addr, MaxRetries: -1, Protocol: proto})
		defer rdb.Close()
		for _, args := range [][]any{
			{"CLIENT", "TRACKING", "ON"},
			{"CLIENT", "TRACKING", "ON", "OPTIN"},
			{"CLIENT", "TRACKING", "ON", "OPTOUT"},
			{"CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "k"},
			{"CLIENT", "TRACKING", "ON", "NOLOOP"},
		} {
			err := rdb.Do(ctx, args...).Err()
			if err == nil || !strings.HasPrefix(err.Error(), "ERR CLIENT TRACKING is not supported through a celld sidecar") {
				t.Fatalf("RESP%d %v: %v, want the sidecar's refusal", proto, args, err)
			}
		}
		if err := rdb.Do(ctx, "CLIENT", "TRACKING", "ON", "BOGUS").Err(); err == nil || !strings.Contains(err.Error(), "syntax error") {
			t.Fatalf("RESP%d bad option: %v, want a syntax error", proto, err)
		}
		if err := rdb.Do(ctx, "CLIENT", "TRACKING", "OFF").Err(); err != nil {
			t.Fatalf("RESP%d TRACKING OFF: %v", proto, err)
		}
		if v, err := rdb.Do(ctx, "CLIENT", "GETREDIR").Int64(); err != nil || v != -1 {
			t.Fatalf("RESP%d GETREDIR: %v, %v; want -1 (not tracking)", proto, v, err)
		}
		if err := rdb.Do(ctx, "CLIENT", "CACHING", "YES").Err(); err == nil {
			t.Fatalf("RESP%d CACHING YES without tracking: no error", proto)
		}
		// The connection goes on: a forwarded read is answered.
		if err := rdb.Set(ctx, "tk", "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if v, err := rdb.Get(ctx, "tk").Result(); err != nil || v != "v" {
			t.Fatalf("RESP%d GET after the refusal: %q, %v", proto, v, err)
		}
	}

	_, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{side.addr}, DisableRetry: true})
	if !errors.Is(err, rueidis.ErrNoCache) || !strings.Contains(err.Error(), "not supported through a celld sidecar") {
		t.Fatalf("rueidis with its default cache: %v, want ErrNoCache with the sidecar's refusal", err)
	}
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{side.addr}, DisableCache: true, DisableRetry: true})
	if err != nil {
		t.Fatalf("rueidis with DisableCache: %v", err)
	}
	defer rc.Close()
	if v, err := rc.Do(ctx, rc.B().Get().Key("tk").Build()).ToString(); err != nil || v != "v" {
		t.Fatalf("rueidis GET: %q, %v", v, err)
	}
	if owners[0].st.Len()+owners[1].st.Len()+owners[2].st.Len() != 1 || side.st.Len() != 0 {
		t.Fatal("tk not on its owner alone")
	}
}
