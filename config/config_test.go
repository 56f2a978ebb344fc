package config

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// env is a fake environment for Parse.
type env map[string]string

func (e env) lookup(k string) (string, bool) { v, ok := e[k]; return v, ok }

func parse(t *testing.T, e env, args ...string) (*Config, error) {
	t.Helper()
	return Parse(args, e.lookup)
}

func mustParse(t *testing.T, e env, args ...string) *Config {
	t.Helper()
	c, err := parse(t, e, args...)
	if err != nil {
		t.Fatalf("Parse(%q, %v): %v", args, e, err)
	}
	return c
}

// Every row's default parses with its own parser, every name is unique,
// and every variable is CELLD_*.
func TestEveryTableRowParses(t *testing.T) {
	seen := map[string]bool{}
	for i := range table {
		s := &table[i]
		if err := s.bind(&Config{}).set(s.Default); err != nil {
			t.Errorf("%s: default %q: %v", s.envName(), s.Default, err)
		}
		for _, n := range []string{s.Name, s.envName()} {
			if n != "" && seen[n] {
				t.Errorf("%s appears twice", n)
			}
			seen[n] = true
		}
		if !strings.HasPrefix(s.envName(), "CELLD_") || s.Usage == "" {
			t.Errorf("row %+v: variable %s, usage %q", s, s.envName(), s.Usage)
		}
	}
}

// The defaults main and the README rely on.
func TestDefaults(t *testing.T) {
	c := mustParse(t, env{})
	want := Config{Addr: "127.0.0.1:6379", TLSPort: 0, MaxClients: 10000, MaxBulk: 512 << 10, MaxMultibulk: 1 << 20,
		Dir: "./data", Persist: true, FlushInterval: 100 * time.Millisecond, Recover: "fail", FoldMinBytes: 32 << 20,
		ProtectedMode: true, LogFormat: "text", LogLevel: "info", IOLoops: 1, BusyPoll: 50 * time.Microsecond,
		ShutdownGrace: 10 * time.Second, MaxMemoryPolicy: "noeviction", HALeaseTTL: 2 * time.Second}
	want.UpstreamFallback, want.UpstreamTimeout = "local", 250*time.Millisecond // sidecar mode
	want.UpstreamBulkTimeout = 10 * time.Second                                 // bulk reads through the sidecar
	want.LimiterSeparator, want.MetricsMaxLimiters = ":", 100                   // docs/limiter-metrics.md
	want.Databases = 16
	want.ReplicaAck, want.MaxReplicaLag = "async", 10*time.Millisecond // docs/replication.md
	if *c != want {
		t.Fatalf("defaults:\n got %+v\nwant %+v", *c, want)
	}
}

// The cases: each value that used to be dropped silently is now an
// error naming the flag, the variable and the value.
func TestBadValuesNamed(t *testing.T) {
	for _, tc := range []struct {
		env  env
		args []string
		want []string // substrings of the one-line error
	}{
		{env{"CELLD_PERSIST": "maybe"}, nil, []string{"CELLD_PERSIST", "--persist", `"maybe"`}},
		{env{"CELLD_MAXCLIENTS": "abc"}, nil, []string{"CELLD_MAXCLIENTS", "--maxclients", `"abc"`}},
		{env{"CELLD_TLS_PORT": "abc"}, nil, []string{"CELLD_TLS_PORT", "--tls-port", `"abc"`}},
		{env{"CELLD_PROTO_MAX_BULK_LEN": "1q"}, nil, []string{"CELLD_PROTO_MAX_BULK_LEN", `"1q"`}},
		{env{"CELLD_SHUTDOWN_GRACE": "soon"}, nil, []string{"CELLD_SHUTDOWN_GRACE", "--shutdown-grace"}},
		{nil, []string{"--log-format", "yaml"}, []string{"--log-format", `"yaml"`, "CELLD_LOG_FORMAT", "text, json"}},
		{nil, []string{"--log-level", "loud"}, []string{"--log-level", "CELLD_LOG_LEVEL", "debug, info, warn, error"}},
		{nil, []string{"--maxclients", "-5"}, []string{"--maxclients", `"-5"`, "CELLD_MAXCLIENTS"}},
		{nil, []string{"--maxclients", "0"}, []string{"--maxclients", `"0"`}},
		{nil, []string{"--proto-max-bulk-len", "0"}, []string{"--proto-max-bulk-len", `"0"`}},
		{nil, []string{"--proto-max-bulk-len", "513mb"}, []string{"--proto-max-bulk-len", "512mb"}},
		{nil, []string{"--protected-mode", "maybe"}, []string{"--protected-mode", "CELLD_PROTECTED_MODE"}},
		{nil, []string{"--recover", "ignore"}, []string{"--recover", "fail, skip"}},
		{nil, []string{"--addr", "6379"}, []string{"--addr", `"6379"`, "host:port"}},
		{nil, []string{"--addr", "127.0.0.1:99999"}, []string{"--addr", "65535"}},
		{nil, []string{"--metrics-addr", "localhost"}, []string{"--metrics-addr", "CELLD_METRICS_ADDR"}},
		{nil, []string{"--flush-interval", "0"}, []string{"--flush-interval"}},
		{nil, []string{"--tls-port", "6380"}, []string{"--tls-port", "--tls-cert", "--tls-key"}},
		{nil, []string{"--tls-cert", "c.pem"}, []string{"--tls-port"}},
		{nil, []string{"--addr", ""}, []string{"nothing to listen on"}},
		{nil, []string{"--addr", "0.0.0.0:0"}, []string{"nothing to listen on"}},
		{nil, []string{"--cluster-announce", "10.0.0.1:6379"}, []string{"--cluster-nodes"}},
		{nil, []string{"--etcd", "http://e:2379"}, []string{"--etcd", "--cluster", "--node-id"}},
		{nil, []string{"--etcd", "http://e:2379", "--cluster", "c"}, []string{"--node-id"}},
		{nil, []string{"--node-id", "a"}, []string{"need --etcd"}},
		{nil, []string{"--etcd", "http://e:2379", "--cluster", "c/d", "--node-id", "a"}, []string{"'/'"}},
		{nil, []string{"--etcd", "http://e:2379", "--cluster", "c", "--node-id", "a", "--cluster-nodes", "h:1"}, []string{"exclude"}},
		{nil, []string{"--etcd", "http://e:2379", "--cluster", "c", "--node-id", "a", "--ha-lease-ttl", "2500ms"}, []string{"whole seconds"}},
		{nil, []string{"--etcd", "http://e:2379", "--cluster", "c", "--node-id", "a", "--ha-lease-ttl", "1s"}, []string{"--ha-lease-ttl"}},
		{nil, []string{"--etcd", "http://e:2379", "--cluster", "c", "--node-id", "a", "--cluster-announce", "10.0.0.1:6379", "--ha-lease-ttl", "3s"}, nil},
		{nil, []string{"--requirepass", "x"}, []string{"CELLD_REQUIREPASS", "--requirepass-file"}},
		{nil, []string{"--no-such-flag"}, []string{"unknown flag --no-such-flag"}},
		{nil, []string{"--addr"}, []string{"--addr needs a value", "CELLD_ADDR"}},
		{nil, []string{"--addr", "--dir", "x"}, []string{"--addr needs a value"}},
		{env{"CELLD_PERSIST": "no"}, []string{"--dir", ""}, nil}, // no directory needed without persistence
		{nil, []string{"--dir", ""}, []string{"--dir", "--persist"}},
	} {
		c, err := parse(t, tc.env, tc.args...)
		if tc.want == nil {
			if err != nil {
				t.Errorf("%v %q: %v", tc.env, tc.args, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%v %q: accepted (%+v)", tc.env, tc.args, c)
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, "\n") {
			t.Errorf("%v %q: error is more than one line: %q", tc.env, tc.args, msg)
		}
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%v %q: error %q does not say %q", tc.env, tc.args, msg, w)
			}
		}
	}
}

// A set variable is read even when a flag overrides it.
func TestBadEnvRefusedEvenWhenFlagSet(t *testing.T) {
	if _, err := parse(t, env{"CELLD_MAXCLIENTS": "lots"}, "--maxclients", "5"); err == nil {
		t.Fatal("a bad CELLD_MAXCLIENTS was ignored because --maxclients was given")
	}
}

// Garbage in any variable or flag is refused, naming both.
func TestGarbageRefused(t *testing.T) {
	for i := range table {
		s := &table[i]
		if _, isString := s.bind(&Config{}).(stringValue); isString && s.Name != "addr" && !strings.HasSuffix(s.Name, "-addr") && s.Name != "cluster-announce" {
			continue // free text: paths, passwords, node lists
		}
		_, err := parse(t, env{s.envName(): "%garbage%"})
		var ce *Error
		if !errors.As(err, &ce) || ce.Env != s.envName() || !ce.FromEnv || !strings.Contains(err.Error(), "%garbage%") {
			t.Errorf("%s=%%garbage%%: %v", s.envName(), err)
		}
		if s.Name == "" {
			continue
		}
		_, err = parse(t, nil, "--"+s.Name+"=%garbage%")
		if !errors.As(err, &ce) || ce.Flag != "--"+s.Name || !strings.Contains(err.Error(), s.envName()) {
			t.Errorf("--%s=%%garbage%%: %v", s.Name, err)
		}
	}
}

func TestBooleans(t *testing.T) {
	for word, want := range map[string]bool{"true": true, "YES": true, "On": true, "1": true,
		"false": false, "No": false, "OFF": false, "0": false} {
		if c := mustParse(t, env{"CELLD_PERSIST": word}); c.Persist != want {
			t.Errorf("CELLD_PERSIST=%s: %v", word, c.Persist)
		}
		if c := mustParse(t, nil, "--persist="+word); c.Persist != want {
			t.Errorf("--persist=%s: %v", word, c.Persist)
		}
		// "--persist no" takes the word as its value, rather than
		// stopping at it and ignoring every flag after it.
		c := mustParse(t, nil, "--persist", word, "--addr", "127.0.0.1:7000")
		if c.Persist != want || c.Addr != "127.0.0.1:7000" {
			t.Errorf("--persist %s --addr 127.0.0.1:7000: persist %v addr %s", word, c.Persist, c.Addr)
		}
		if c := mustParse(t, nil, "--protected-mode", word); c.ProtectedMode != want {
			t.Errorf("--protected-mode %s: %v", word, c.ProtectedMode)
		}
	}
	if c := mustParse(t, env{"CELLD_PERSIST": "no"}, "--persist"); !c.Persist {
		t.Error("--persist alone did not mean yes")
	}
}

// The example: a stray word no longer stops parsing silently.
func TestStrayArguments(t *testing.T) {
	for _, args := range [][]string{
		{"--persist", "false", "x"},
		{"--addr", "127.0.0.1:7000", "serve"},
		{"start"},
		{"--dir", "./x", "--", "--addr", "1.2.3.4:5"},
		{"help", "me"},
		{"-"},
	} {
		_, err := parse(t, nil, args...)
		if !errors.Is(err, ErrStray) {
			t.Errorf("%q: %v, want ErrStray", args, err)
		}
	}
	// A value for a flag that takes none says how to write it.
	_, err := parse(t, nil, "--healthcheck", "--persist=no", "maybe")
	if err == nil || !strings.Contains(err.Error(), `"maybe"`) {
		t.Errorf("stray after a boolean: %v", err)
	}
	c := mustParse(t, nil, "--addr=127.0.0.1:7000", "-dir", "./x", "--persist=false")
	if c.Addr != "127.0.0.1:7000" || c.Dir != "./x" || c.Persist {
		t.Errorf("mixed spellings: %+v", c)
	}
}

func TestActions(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}, {"-help"}, {"--addr", "x", "--help"}} {
		c, err := parse(t, nil, args...)
		if err != nil || !c.Help {
			t.Errorf("%q: help %v, %v", args, c.Help, err)
		}
	}
	if c := mustParse(t, nil, "--version"); !c.Version {
		t.Error("--version")
	}
	if c := mustParse(t, nil, "--healthcheck"); !c.Healthcheck {
		t.Error("--healthcheck")
	}
	// No variable turns an action on (an image's environment would make
	// every start a health check).
	if c := mustParse(t, env{"CELLD_HEALTHCHECK": "yes", "CELLD_HELP": "yes"}); c.Healthcheck || c.Help {
		t.Error("an action was read from the environment")
	}
}

func TestPrecedence(t *testing.T) {
	e := env{"CELLD_ADDR": "0.0.0.0:6379", "CELLD_MAXCLIENTS": "7", "CELLD_SHUTDOWN_GRACE": "3s", "CELLD_LOG_LEVEL": "DEBUG"}
	c := mustParse(t, e)
	if c.Addr != "0.0.0.0:6379" || c.MaxClients != 7 || c.ShutdownGrace != 3*time.Second || c.LogLevel != "debug" {
		t.Fatalf("from the environment: %+v", c)
	}
	c = mustParse(t, e, "--addr", "127.0.0.1:1", "--maxclients", "8")
	if c.Addr != "127.0.0.1:1" || c.MaxClients != 8 {
		t.Fatalf("flags over the environment: %+v", c)
	}
	// An empty variable is a value: CELLD_ADDR= with a TLS port is TLS only.
	c = mustParse(t, env{"CELLD_ADDR": "", "CELLD_TLS_PORT": "6380", "CELLD_TLS_CERT": "c", "CELLD_TLS_KEY": "k"})
	if c.PlainEnabled() || c.TLSAddr() != "127.0.0.1:6380" {
		t.Fatalf("TLS only: plain %v, TLS %s", c.PlainEnabled(), c.TLSAddr())
	}
	c = mustParse(t, nil, "--addr", "0.0.0.0:0", "--tls-port", "6380", "--tls-cert", "c", "--tls-key", "k")
	if c.PlainEnabled() || c.TLSAddr() != "0.0.0.0:6380" {
		t.Fatalf("TLS only on all interfaces: plain %v, TLS %s", c.PlainEnabled(), c.TLSAddr())
	}
	c = mustParse(t, nil, "--addr", "[::1]:6379", "--tls-port", "6380", "--tls-cert", "c", "--tls-key", "k")
	if !c.PlainEnabled() || c.TLSAddr() != "[::1]:6380" {
		t.Fatalf("IPv6: plain %v, TLS %s", c.PlainEnabled(), c.TLSAddr())
	}
}

func TestSizes(t *testing.T) {
	for in, want := range map[string]int64{"512mb": 512 << 20, "1k": 1000, "1KB": 1024, "2m": 2e6, "1g": 1e9, "1Gb": 1 << 30, "65536": 65536, " 7 ": 7} {
		if n, err := ParseBytes(in); err != nil || n != want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d", in, n, err, want)
		}
	}
	for _, in := range []string{"", "kb", "-1", "+5", "1.5mb", "1tb", "99999999999gb", "1 mb"} {
		if n, err := ParseBytes(in); err == nil {
			t.Errorf("ParseBytes(%q) = %d, want an error", in, n)
		}
	}
	if c := mustParse(t, env{"CELLD_PROTO_MAX_BULK_LEN": "1mb"}); c.MaxBulk != 1<<20 {
		t.Errorf("CELLD_PROTO_MAX_BULK_LEN=1mb: %d", c.MaxBulk)
	}
	if c := mustParse(t, nil, "--log-fold-min-bytes", "64kb"); c.FoldMinBytes != 64<<10 {
		t.Errorf("--log-fold-min-bytes 64kb: %d", c.FoldMinBytes)
	}
}

// --help says what celld is, has the six groups in order, lists every flag
// and variable, and shows two examples.
func TestUsage(t *testing.T) {
	var b bytes.Buffer
	Usage(&b)
	out := b.String()
	if !strings.Contains(out, "rate limiter") || !strings.Contains(out, "CL.THROTTLE") {
		t.Error("--help does not say what celld is")
	}
	last := -1
	for g := range numGroups {
		i := strings.Index(out, "\n"+g.String()+":\n")
		if i < 0 || i < last {
			t.Errorf("group %s missing or out of order", g)
		}
		last = i
	}
	for i := range table {
		s := &table[i]
		if !strings.Contains(out, s.envName()) || (s.Name != "" && !strings.Contains(out, "--"+s.Name+" ")) {
			t.Errorf("--help does not list %s / --%s", s.envName(), s.Name)
		}
	}
	if n := strings.Count(out, "\n  celld ") + strings.Count(out, " celld --addr 0.0.0.0"); n < 2 {
		t.Errorf("--help shows %d examples, want 2:\n%s", n, out)
	}
}

// Names lists every flag, for documentation checks outside the package.
func TestNames(t *testing.T) {
	names := Names()
	if len(names) != len(table) || names[0].Flag != "--addr" || names[0].Env != "CELLD_ADDR" {
		t.Fatalf("Names: %v", names)
	}
}

// Ranges of the numeric settings, at and beyond their bounds.
func TestRanges(t *testing.T) {
	for _, tc := range []struct {
		flag    string
		ok, bad []string
	}{
		{"--io-loops", []string{"0", "1", "64"}, []string{"-1", "65", "many"}},
		{"--databases", []string{"1", "16", "65536"}, []string{"0", "-1", "65537", "many"}},
		{"--busy-poll", []string{"0", "10us", "1s"}, []string{"-1us", "2s", "soon"}},
		{"--maxclients", []string{"1", "100000"}, []string{"0", "-5", "1e3"}},
		{"--proto-max-bulk-len", []string{"1000", "512mb", "1k"}, []string{"0", "1", "999", "513mb", "-1"}},
		{"--log-fold-min-bytes", []string{"1", "64kb"}, []string{"0", "-5", "lots"}},
		{"--flush-interval", []string{"1ms", "100ms", "1h"}, []string{"0", "-1s", "100"}},
		{"--shutdown-grace", []string{"0", "30s"}, []string{"-1s", "ten"}},
		{"--tls-port", []string{"0"}, []string{"-1", "65536"}},
	} {
		for _, v := range tc.ok {
			if _, err := parse(t, nil, tc.flag, v); err != nil {
				t.Errorf("%s %s: %v", tc.flag, v, err)
			}
		}
		for _, v := range tc.bad {
			if _, err := parse(t, nil, tc.flag, v); err == nil {
				t.Errorf("%s %s accepted", tc.flag, v)
			}
		}
	}
}

// Port 0 is "no plain port" however it is spelled: "127.0.0.1:00" passes
// the address check (port 0), so it must not make net.Listen pick a random
// ephemeral port that nobody asked for.
func TestPortZeroSpellings(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", "127.0.0.1:00", "0.0.0.0:000", ":00", "[::1]:00"} {
		c := mustParse(t, nil, "--addr", addr, "--tls-port", "6380", "--tls-cert", "c", "--tls-key", "k")
		if c.PlainEnabled() {
			t.Errorf("--addr %s: a plain port is served", addr)
		}
		if _, err := parse(t, nil, "--addr", addr); err == nil {
			t.Errorf("--addr %s without --tls-port: accepted, though nothing is listened on", addr)
		}
	}
	if c := mustParse(t, nil, "--addr", "127.0.0.1:010"); !c.PlainEnabled() {
		t.Error("--addr 127.0.0.1:010 (port 10): no plain port")
	}
}

// The guard's request limits: --max-multibulk-len in Redis's range, and a
// --client-query-buffer-limit that is 0 (derived) or at least one bulk.
func TestRequestLimits(t *testing.T) {
	c := mustParse(t, env{})
	if c.MaxMultibulk != 1<<20 || c.QueryBufferLimit != 0 {
		t.Fatalf("defaults: %d, %d", c.MaxMultibulk, c.QueryBufferLimit)
	}
	c = mustParse(t, env{"CELLD_MAX_MULTIBULK_LEN": "2147483647"}, "--client-query-buffer-limit", "1gb")
	if c.MaxMultibulk != 1<<31-1 || c.QueryBufferLimit != 1<<30 {
		t.Fatalf("set: %d, %d", c.MaxMultibulk, c.QueryBufferLimit)
	}
	for _, args := range [][]string{
		{"--max-multibulk-len", "0"},
		{"--max-multibulk-len", "2147483648"},
		{"--client-query-buffer-limit", "-1"},
		{"--proto-max-bulk-len", "1mb", "--client-query-buffer-limit", "512kb"},
	} {
		if _, err := parse(t, env{}, args...); err == nil || !strings.Contains(err.Error(), strings.TrimPrefix(args[len(args)-2], "")) {
			t.Errorf("%q: %v, want an error naming %s", args, err, args[len(args)-2])
		}
	}
}

// The replication settings: parsed from flags and CELLD_*, bad values
// refused.
func TestReplicationSettings(t *testing.T) {
	c := mustParse(t, env{"CELLD_REPLICA_ACK": "sync"}, "--replicate-from", "10.0.0.1:16379",
		"--repl-addr", "0.0.0.0:16380", "--max-replica-lag", "25ms", "--replication", "yes", "--min-replicas", "1")
	if !c.Replication || c.ReplicateFrom != "10.0.0.1:16379" || c.ReplAddr != "0.0.0.0:16380" ||
		c.ReplicaAck != "sync" || c.MaxReplicaLag != 25*time.Millisecond || c.MinReplicas != 1 {
		t.Fatalf("parsed %+v", c)
	}
	for _, bad := range [][]string{
		{"--replica-ack", "quorum"},
		{"--max-replica-lag", "0"},
		{"--max-replica-lag", "2m"},
		{"--min-replicas", "-1"},
		{"--min-replicas", "two"},
		{"--replicate-from", "nohostport"},
		{"--repl-addr", "x"},
	} {
		if _, err := Parse(bad, func(string) (string, bool) { return "", false }); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// TestGiven: Given tells a setting set by a flag or the environment from
// one left at its default, even when the value given is the default.
func TestGiven(t *testing.T) {
	env := map[string]string{"CELLD_IO_LOOPS": "1"}
	c, err := Parse([]string{"--busy-poll", "50us"}, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	if !c.Given("busy-poll") || !c.Given("io-loops") || c.Given("upstream") || c.Given("addr") {
		t.Fatalf("Given: busy-poll %v io-loops %v upstream %v addr %v; want true true false false",
			c.Given("busy-poll"), c.Given("io-loops"), c.Given("upstream"), c.Given("addr"))
	}
	if Defaults().Given("busy-poll") {
		t.Fatal("Defaults: busy-poll given")
	}
}
