package compat_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// Client-side caching: CLIENT TRACKING and its invalidation pushes, with
// rueidis's default options (cache on: HELLO 3, CLIENT TRACKING ON OPTIN,
// then CLIENT CACHING YES + MULTI PTTL GET EXEC for each cached read) and
// byte-exact on a raw RESP3 socket.

// push is the exact RESP3 invalidation push for one key.
func push(key string) string {
	return fmt.Sprintf(">2\r\n$10\r\ninvalidate\r\n*1\r\n$%d\r\n%s\r\n", len(key), key)
}

const pushAll = ">2\r\n$10\r\ninvalidate\r\n_\r\n" // FLUSHDB / FLUSHALL

// resp3Conn opens a raw connection that has sent HELLO 3.
func resp3Conn(t *testing.T, ts *testServer) *rawConn {
	t.Helper()
	rc := dialRaw(t, ts)
	rc.write(resp("HELLO", "3"))
	readValue(t, rc) // the HELLO map
	return rc
}

// readValue reads one whole RESP2/RESP3 value and returns its bytes.
func readValue(t *testing.T, rc *rawConn) string {
	t.Helper()
	line := rc.readLine()
	switch line[0] {
	case '$', '=', '!':
		n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
		if n < 0 {
			return line
		}
		return line + rc.read(n+2)
	case '*', '~', '>', '%', '|':
		n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
		if line[0] == '%' || line[0] == '|' {
			n *= 2
		}
		var b strings.Builder
		b.WriteString(line)
		for i := 0; i < n; i++ {
			b.WriteString(readValue(t, rc))
		}
		return b.String()
	}
	return line
}

// exchange sends one command and returns its reply's bytes.
func (rc *rawConn) exchange(t *testing.T, args ...string) string {
	t.Helper()
	rc.write(resp(args...))
	return readValue(t, rc)
}

// expectNoPush checks that nothing but the PING replies arrives: a push
// queued for rc would be written before or right after the first PONG, so
// two PINGs in a row catch it.
func expectNoPush(t *testing.T, rc *rawConn) {
	t.Helper()
	for i := 0; i < 2; i++ {
		if got := rc.exchange(t, "PING"); got != "+PONG\r\n" {
			t.Fatalf("expected no push; got %q", got)
		}
	}
}

func TestTrackingRawPushes(t *testing.T) {
	ts := startServer(t)
	a := resp3Conn(t, ts)
	b := dialRaw(t, ts)

	if got := a.exchange(t, "CLIENT", "TRACKING", "ON"); got != "+OK\r\n" {
		t.Fatalf("CLIENT TRACKING ON: %q", got)
	}
	if got := a.exchange(t, "GET", "k"); got != "_\r\n" {
		t.Fatalf("GET k: %q", got)
	}
	// Another client's allowed CL.THROTTLE writes k: a gets exactly one push.
	if got := b.exchange(t, "CL.THROTTLE", "k", "10", "1", "60"); !strings.HasPrefix(got, "*5\r\n:0\r\n") {
		t.Fatalf("CL.THROTTLE: %q", got)
	}
	if got := a.read(len(push("k"))); got != push("k") {
		t.Fatalf("push: got %q, want %q", got, push("k"))
	}
	// The key is forgotten until a reads it again: no second push.
	b.exchange(t, "CL.THROTTLE", "k", "10", "1", "60")
	expectNoPush(t, a)

	// Read again, then a denied CL.THROTTLE writes nothing: no push.
	if got := a.exchange(t, "GET", "k"); !strings.HasPrefix(got, "$19\r\n") {
		t.Fatalf("GET k: %q", got)
	}
	b.exchange(t, "CL.THROTTLE", "tight", "0", "1", "3600")
	a.exchange(t, "PTTL", "tight")
	if got := b.exchange(t, "CL.THROTTLE", "tight", "0", "1", "3600"); !strings.HasPrefix(got, "*5\r\n:1\r\n") {
		t.Fatalf("second tight call not denied: %q", got)
	}
	expectNoPush(t, a)

	// SET, DEL, EXPIRE, PERSIST each push once per read.
	for _, w := range [][]string{
		{"SET", "k", "5"},
		{"EXPIRE", "k", "100"},
		{"PERSIST", "k"},
		{"DEL", "k"},
	} {
		a.exchange(t, "GET", "k")
		b.exchange(t, w...)
		if got := a.read(len(push("k"))); got != push("k") {
			t.Fatalf("%v: push %q, want %q", w, got, push("k"))
		}
	}
	// Writes that change nothing push nothing: DEL of a missing key,
	// SET NX of an existing one, EXPIRE of a missing one.
	a.exchange(t, "GET", "k")
	b.exchange(t, "DEL", "k")
	b.exchange(t, "EXPIRE", "k", "100")
	expectNoPush(t, a)
	b.exchange(t, "SET", "k", "1")
	a.read(len(push("k")))
	a.exchange(t, "GET", "k")
	b.exchange(t, "SET", "k", "2", "NX")
	expectNoPush(t, a)

	// FLUSHDB: a null push to every tracking client.
	if got := b.exchange(t, "FLUSHDB"); got != "+OK\r\n" {
		t.Fatalf("FLUSHDB: %q", got)
	}
	if got := a.read(len(pushAll)); got != pushAll {
		t.Fatalf("flush push: got %q, want %q", got, pushAll)
	}
}

// A client's own write of a key it tracks is pushed after the reply to the
// write, never inside it; inside MULTI, after EXEC's whole array.
func TestTrackingSelfPushAfterReply(t *testing.T) {
	ts := startServer(t)
	a := resp3Conn(t, ts)
	a.exchange(t, "CLIENT", "TRACKING", "ON")
	a.exchange(t, "GET", "self")
	if got := a.exchange(t, "CL.THROTTLE", "self", "10", "1", "60"); !strings.HasPrefix(got, "*5\r\n:0\r\n") {
		t.Fatalf("CL.THROTTLE: %q", got)
	}
	if got := a.read(len(push("self"))); got != push("self") {
		t.Fatalf("push after reply: got %q", got)
	}
	a.exchange(t, "GET", "self")
	a.write(resp("MULTI") + resp("SET", "self", "1") + resp("GET", "self") + resp("EXEC"))
	want := "+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n+OK\r\n$1\r\n1\r\n" + push("self")
	if got := a.read(len(want)); got != want {
		t.Fatalf("MULTI/EXEC:\n got %q\nwant %q", got, want)
	}
	expectNoPush(t, a)
}

func TestTrackingBcastPrefix(t *testing.T) {
	ts := startServer(t)
	a := resp3Conn(t, ts)
	b := dialRaw(t, ts)
	if got := a.exchange(t, "CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "user:", "PREFIX", "ip:"); got != "+OK\r\n" {
		t.Fatalf("TRACKING ON BCAST: %q", got)
	}
	// Nothing read, yet every write under a prefix is pushed, every time.
	for i := 0; i < 2; i++ {
		b.exchange(t, "CL.THROTTLE", "user:1", "10", "1", "60")
		if got := a.read(len(push("user:1"))); got != push("user:1") {
			t.Fatalf("push %d: %q", i, got)
		}
	}
	b.exchange(t, "SET", "ip:10.0.0.1", "1")
	if got := a.read(len(push("ip:10.0.0.1"))); got != push("ip:10.0.0.1") {
		t.Fatalf("push: %q", got)
	}
	b.exchange(t, "CL.THROTTLE", "other:1", "10", "1", "60")
	expectNoPush(t, a)

	want := "%3\r\n$5\r\nflags\r\n~2\r\n$2\r\non\r\n$5\r\nbcast\r\n$8\r\nredirect\r\n:0\r\n" +
		"$8\r\nprefixes\r\n*2\r\n$3\r\nip:\r\n$5\r\nuser:\r\n"
	if got := a.exchange(t, "CLIENT", "TRACKINGINFO"); got != want {
		t.Fatalf("TRACKINGINFO:\n got %q\nwant %q", got, want)
	}
}

func TestTrackingNoloop(t *testing.T) {
	ts := startServer(t)
	a := resp3Conn(t, ts)
	b := dialRaw(t, ts)
	a.exchange(t, "CLIENT", "TRACKING", "ON", "NOLOOP")
	a.exchange(t, "GET", "n")
	// a's own write: no push. As in Redis, the write still forgets the key
	// (for every client), so a reads it again before b writes.
	a.exchange(t, "CL.THROTTLE", "n", "10", "1", "60")
	expectNoPush(t, a)
	a.exchange(t, "GET", "n")
	// b's write: pushed.
	b.exchange(t, "CL.THROTTLE", "n", "10", "1", "60")
	if got := a.read(len(push("n"))); got != push("n") {
		t.Fatalf("push: %q", got)
	}

	// BCAST NOLOOP likewise.
	c := resp3Conn(t, ts)
	c.exchange(t, "CLIENT", "TRACKING", "ON", "BCAST", "NOLOOP")
	c.exchange(t, "SET", "x", "1")
	expectNoPush(t, c)
	b.exchange(t, "SET", "x", "2")
	if got := c.read(len(push("x"))); got != push("x") {
		t.Fatalf("bcast push: %q", got)
	}
}

func TestTrackingOptInOptOut(t *testing.T) {
	ts := startServer(t)
	a := resp3Conn(t, ts)
	b := dialRaw(t, ts)
	a.exchange(t, "CLIENT", "TRACKING", "ON", "OPTIN")
	a.exchange(t, "GET", "o") // not cached: no CACHING YES
	b.exchange(t, "SET", "o", "1")
	expectNoPush(t, a)
	a.exchange(t, "CLIENT", "CACHING", "YES")
	a.exchange(t, "GET", "o")
	a.exchange(t, "GET", "o2") // CACHING YES lasted one command
	b.exchange(t, "SET", "o2", "1")
	expectNoPush(t, a)
	b.exchange(t, "SET", "o", "2")
	if got := a.read(len(push("o"))); got != push("o") {
		t.Fatalf("optin push: %q", got)
	}
	// CACHING YES lasts through MULTI ... EXEC (rueidis's DoCache shape).
	a.write(resp("CLIENT", "CACHING", "YES") + resp("MULTI") + resp("PTTL", "o") + resp("GET", "o") + resp("EXEC"))
	for i := 0; i < 5; i++ {
		readValue(t, a)
	}
	b.exchange(t, "SET", "o", "3")
	if got := a.read(len(push("o"))); got != push("o") {
		t.Fatalf("optin MULTI push: %q", got)
	}

	c := resp3Conn(t, ts)
	c.exchange(t, "CLIENT", "TRACKING", "ON", "OPTOUT")
	c.exchange(t, "CLIENT", "CACHING", "NO")
	c.exchange(t, "GET", "p") // not remembered
	c.exchange(t, "GET", "q") // remembered
	b.exchange(t, "SET", "p", "1")
	expectNoPush(t, c)
	b.exchange(t, "SET", "q", "1")
	if got := c.read(len(push("q"))); got != push("q") {
		t.Fatalf("optout push: %q", got)
	}
}

// REDIRECT: a RESP2 client's invalidations go to a RESP3 connection.
func TestTrackingRedirect(t *testing.T) {
	ts := startServer(t)
	sink := resp3Conn(t, ts)
	id := strings.TrimSpace(strings.TrimPrefix(sink.exchange(t, "CLIENT", "ID"), ":"))
	a := dialRaw(t, ts) // RESP2
	if got := a.exchange(t, "CLIENT", "TRACKING", "ON", "REDIRECT", id); got != "+OK\r\n" {
		t.Fatalf("TRACKING ON REDIRECT: %q", got)
	}
	if got := a.exchange(t, "CLIENT", "GETREDIR"); got != ":"+id+"\r\n" {
		t.Fatalf("GETREDIR: %q", got)
	}
	a.exchange(t, "GET", "r")
	dialRaw(t, ts).exchange(t, "SET", "r", "1")
	if got := sink.read(len(push("r"))); got != push("r") {
		t.Fatalf("redirected push: %q", got)
	}
	expectNoPush(t, a)
}

// Misuse gets Redis 7's error texts.
func TestTrackingErrors(t *testing.T) {
	ts := startServer(t)
	rc := dialRaw(t, ts)
	runRaw(t, rc, []rawStep{
		{resp("CLIENT", "CACHING", "YES"), "-ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled\r\n"},
		{resp("CLIENT", "GETREDIR"), ":-1\r\n"},
		{resp("CLIENT", "TRACKINGINFO"), "*6\r\n$5\r\nflags\r\n*1\r\n$3\r\noff\r\n$8\r\nredirect\r\n:-1\r\n$8\r\nprefixes\r\n*0\r\n"},
		{resp("CLIENT", "TRACKING", "ON", "PREFIX", "a"), "-ERR PREFIX option requires BCAST mode to be enabled\r\n"},
		{resp("CLIENT", "TRACKING", "ON", "BCAST", "OPTIN"), "-ERR OPTIN and OPTOUT are not compatible with BCAST\r\n"},
		{resp("CLIENT", "TRACKING", "ON", "OPTIN", "OPTOUT"), "-ERR You can't specify both OPTIN mode and OPTOUT mode\r\n"},
		{resp("CLIENT", "TRACKING", "ON", "REDIRECT", "999999"), "-ERR The client ID you want redirect to does not exist\r\n"},
		{resp("CLIENT", "TRACKING", "ON", "REDIRECT", "x"), "-ERR value is not an integer or out of range\r\n"},
		{resp("CLIENT", "TRACKING", "ON", "FOO"), "-ERR syntax error\r\n"},
		{resp("CLIENT", "TRACKING", "MAYBE"), "-ERR syntax error\r\n"},
		{resp("CLIENT", "TRACKING"), "-ERR wrong number of arguments for 'client|tracking' command\r\n"},
		{resp("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "ab", "PREFIX", "a"), "-ERR Prefix 'ab' overlaps with another provided prefix 'a'. Prefixes for a single client must not overlap.\r\n"},
		{resp("CLIENT", "TRACKING", "ON", "OPTIN"), "+OK\r\n"},
		{resp("CLIENT", "CACHING", "NO"), "-ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.\r\n"},
		{resp("CLIENT", "CACHING", "MAYBE"), "-ERR syntax error\r\n"},
		{resp("CLIENT", "TRACKING", "ON", "OPTOUT"), "-ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.\r\n"},
		{resp("CLIENT", "TRACKING", "ON", "BCAST"), "-ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.\r\n"},
		{resp("CLIENT", "CACHING", "YES"), "+OK\r\n"},
		{resp("CLIENT", "TRACKINGINFO"), "*6\r\n$5\r\nflags\r\n*3\r\n$2\r\non\r\n$5\r\noptin\r\n$11\r\ncaching-yes\r\n$8\r\nredirect\r\n:0\r\n$8\r\nprefixes\r\n*0\r\n"},
		{resp("CLIENT", "GETREDIR"), ":0\r\n"},
		{resp("CLIENT", "TRACKING", "OFF"), "+OK\r\n"},
		{resp("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "a"), "+OK\r\n"},
		{resp("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "abc"), "-ERR Prefix 'abc' overlaps with an existing prefix 'a'. Prefixes for a single client must not overlap.\r\n"},
		{resp("RESET"), "+RESET\r\n"},
		{resp("CLIENT", "GETREDIR"), ":-1\r\n"},
	})
}

// INFO reports tracking clients and keys.
func TestTrackingInfo(t *testing.T) {
	ts := startServer(t)
	a := resp3Conn(t, ts)
	a.exchange(t, "CLIENT", "TRACKING", "ON")
	a.exchange(t, "GET", "i1")
	a.exchange(t, "GET", "i2")
	info := parseInfo(t, dialRaw(t, ts).exchange(t, "INFO"))
	if info["tracking_clients"] != "1" || info["tracking_total_keys"] != "2" || info["tracking_total_items"] != "2" {
		t.Errorf("tracking_clients %q, tracking_total_keys %q, tracking_total_items %q; want 1, 2, 2",
			info["tracking_clients"], info["tracking_total_keys"], info["tracking_total_items"])
	}
}

// rueidis with its default options: client-side cache on.
func newRueidisCached(t *testing.T, ts *testServer) rueidis.Client {
	return newRueidis(t, ts, func(o *rueidis.ClientOption) { o.DisableCache = false })
}

func TestTrackingRueidisDefaultCache(t *testing.T) {
	ts := startServer(t)
	a := newRueidisCached(t, ts)
	b := newRueidis(t, ts)
	ctx := context.Background()

	cached := func() (string, bool) {
		t.Helper()
		r := a.DoCache(ctx, a.B().Get().Key("ck").Cache(), time.Minute)
		v, err := r.ToString()
		if rueidis.IsRedisNil(err) {
			v, err = "(nil)", nil
		}
		if err != nil {
			t.Fatalf("DoCache GET: %v", err)
		}
		return v, r.IsCacheHit()
	}
	// waitFor polls a's cache until it shows want: the push travels on a's
	// connection independently of b's reply.
	waitFor := func(want string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			v, _ := cached()
			if v == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("a's cached GET ck = %q, want %q (stale cache: no invalidation?)", v, want)
			}
			time.Sleep(time.Millisecond)
		}
	}

	if v, hit := cached(); v != "(nil)" || hit {
		t.Fatalf("first DoCache: %q hit=%v, want (nil) from the server", v, hit)
	}
	if v, hit := cached(); v != "(nil)" || !hit {
		t.Fatalf("second DoCache: %q hit=%v, want (nil) from the cache", v, hit)
	}

	// b's CL.THROTTLE is allowed and writes ck: a's cache must drop it.
	r, err := b.Do(ctx, b.B().Arbitrary("CL.THROTTLE").Keys("ck").Args("10", "1", "60").Build()).AsIntSlice()
	if err != nil || r[0] != 0 {
		t.Fatalf("CL.THROTTLE: %v %v", r, err)
	}
	tat, err := b.Do(ctx, b.B().Get().Key("ck").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	waitFor(tat)
	if v, hit := cached(); v != tat || !hit {
		t.Fatalf("after refetch: %q hit=%v, want %q from the cache", v, hit, tat)
	}

	// Again with SET, and a denied CL.THROTTLE leaves the cache alone.
	if err := b.Do(ctx, b.B().Set().Key("ck").Value("42").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	waitFor("42")
	b.Do(ctx, b.B().Arbitrary("CL.THROTTLE").Keys("deny").Args("0", "1", "3600").Build())
	b.Do(ctx, b.B().Arbitrary("CL.THROTTLE").Keys("deny").Args("0", "1", "3600").Build())
	if v, hit := cached(); v != "42" || !hit {
		t.Fatalf("after unrelated writes: %q hit=%v, want 42 from the cache", v, hit)
	}

	// FLUSHDB empties every client's cache.
	if err := b.Do(ctx, b.B().Flushdb().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	waitFor("(nil)")
}

// ---------------------------------------------------------------------------
// INFO, read the way ioredis's ready check reads it: split on CRLF, split
// each line on ':' (the rest rejoined), keep fields with a value; ready
// when loading is absent or "0".

func parseInfo(t *testing.T, reply string) map[string]string {
	t.Helper()
	// Strip the RESP framing: a bulk ($n) or verbatim (=n txt:) string.
	if i := strings.Index(reply, "\r\n"); i >= 0 && (reply[0] == '$' || reply[0] == '=') {
		reply = strings.TrimSuffix(reply[i+2:], "\r\n")
		reply = strings.TrimPrefix(reply, "txt:")
	}
	info := map[string]string{}
	for _, line := range strings.Split(reply, "\r\n") {
		parts := strings.Split(line, ":")
		name, value := parts[0], strings.Join(parts[1:], ":")
		if value != "" {
			info[name] = value
		}
	}
	return info
}

func TestInfoIoredisReadyCheck(t *testing.T) {
	ts := startServer(t)
	rdb := newGoRedis(t, ts, resp2)
	rc := dialRaw(t, ts)
	rc.exchange(t, "CL.THROTTLE", "ik", "10", "1", "60")
	rc.exchange(t, "CL.THROTTLE", "ik", "0", "1", "3600")
	rc.exchange(t, "GET", "ik")
	rc.exchange(t, "GET", "missing")
	rc.exchange(t, "GET") // rejected: wrong arity

	raw, err := rdb.Info(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(raw, "\r\nloading:0\r\n") {
		t.Fatalf("INFO has no loading:0 line:\n%s", raw)
	}
	info := parseInfo(t, raw)
	if l, ok := info["loading"]; ok && l != "0" {
		t.Fatalf("ioredis would wait: loading=%q", l)
	}
	for field, re := range map[string]string{
		"redis_version":              `^7\.\d+\.\d+$`,
		"redis_mode":                 `^standalone$`,
		"run_id":                     `^[0-9a-f]{40}$`,
		"process_id":                 `^\d+$`,
		"tcp_port":                   `^\d+$`,
		"uptime_in_seconds":          `^\d+$`,
		"arch_bits":                  `^(32|64)$`,
		"connected_clients":          `^[1-9]\d*$`,
		"blocked_clients":            `^0$`,
		"tracking_clients":           `^0$`,
		"used_memory":                `^[1-9]\d*$`,
		"used_memory_human":          `^\d+(\.\d\d[KMGTP])?B?$`,
		"used_memory_rss":            `^[1-9]\d*$`,
		"used_memory_peak":           `^[1-9]\d*$`,
		"maxmemory":                  `^0$`,
		"total_connections_received": `^[1-9]\d*$`,
		"total_commands_processed":   `^[1-9]\d*$`,
		"instantaneous_ops_per_sec":  `^\d+$`,
		"keyspace_hits":              `^1$`,
		"keyspace_misses":            `^1$`,
		"throttle_allowed":           `^1$`,
		"throttle_denied":            `^1$`,
		"rejected_connections":       `^0$`,
		"db0":                        `^keys=1,expires=1,avg_ttl=\d+$`,
		"role":                       `^master$`,
		"errorstat_ERR":              `^count=1$`,
	} {
		if v, ok := info[field]; !ok || !regexp.MustCompile(re).MatchString(v) {
			t.Errorf("INFO %s = %q (present %v), want /%s/", field, v, ok, re)
		}
	}
	// Commandstats is not in the default set; INFO commandstats has it.
	if _, ok := info["cmdstat_get"]; ok {
		t.Error("INFO (default) includes commandstats")
	}
	cs, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	stats := parseInfo(t, cs)
	line := regexp.MustCompile(`^calls=(\d+),usec=(\d+),usec_per_call=\d+\.\d\d,rejected_calls=(\d+),failed_calls=(\d+)$`)
	for name, want := range map[string][2]string{"get": {"2", "1"}, "cl.throttle": {"2", "0"}} {
		m := line.FindStringSubmatch(stats["cmdstat_"+name])
		if m == nil || m[1] != want[0] || m[3] != want[1] || m[4] != "0" {
			t.Errorf("cmdstat_%s = %q, want calls=%s rejected_calls=%s failed_calls=0", name, stats["cmdstat_"+name], want[0], want[1])
		}
	}
	if strings.Contains(cs, "# Server") {
		t.Error("INFO commandstats includes other sections")
	}
	// run_id is stable.
	again, _ := rdb.Info(ctx, "server").Result()
	if parseInfo(t, again)["run_id"] != info["run_id"] {
		t.Error("run_id changed between calls")
	}
}

// Cached reads racing with writes never leave a stale value behind: once
// the writes stop, every cached client converges on the server's value
// (a push overtaking the reply it invalidates would leave the old value
// cached for the whole client-side TTL).
func TestTrackingRueidisNoStaleCache(t *testing.T) {
	ts := startServer(t)
	readers := []rueidis.Client{newRueidisCached(t, ts), newRueidisCached(t, ts)}
	w := newRueidis(t, ts)
	ctx := context.Background()
	stop := make(chan struct{})
	done := make(chan error, len(readers))
	for _, r := range readers {
		go func() {
			for {
				select {
				case <-stop:
					done <- nil
					return
				default:
				}
				if err := r.DoCache(ctx, r.B().Get().Key("race").Cache(), time.Minute).Error(); err != nil && !rueidis.IsRedisNil(err) {
					done <- err
					return
				}
			}
		}()
	}
	var last string
	for i := 0; i < 300; i++ {
		last = strconv.Itoa(i)
		if err := w.Do(ctx, w.B().Set().Key("race").Value(last).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			w.Do(ctx, w.B().Arbitrary("CL.THROTTLE").Keys("race2").Args("100", "1", "1").Build())
		}
	}
	close(stop)
	for range readers {
		if err := <-done; err != nil {
			t.Fatalf("reader: %v", err)
		}
	}
	for i, r := range readers {
		// A lost invalidation leaves the value stale for the cache's whole
		// minute; a slow one (a starved 2-core CI machine running -race)
		// arrives well within 30 s. The bound tells the two apart.
		deadline := time.Now().Add(30 * time.Second)
		for {
			v, err := r.DoCache(ctx, r.B().Get().Key("race").Cache(), time.Minute).ToString()
			if err == nil && v == last {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("reader %d: cached GET race = %q (%v), server has %q: stale cache", i, v, err, last)
			}
			time.Sleep(time.Millisecond)
		}
	}
}
