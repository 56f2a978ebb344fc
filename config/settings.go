package config

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Config is everything celld reads from its command line and environment.
// The zero value is not useful: Parse starts from the table's defaults.
// A Config is a plain value: read it from any goroutine once Parse has
// returned; nothing changes it afterwards.
type Config struct {
	// Network.

	// Addr is the plain-TCP listen address (host:port). "" or port 0
	// serves no plain port (TLS only, on --tls-port).
	Addr string
	// TLSPort is the TLS port on Addr's host (127.0.0.1 when Addr is "");
	// 0 = no TLS.
	TLSPort int
	// MaxClients bounds simultaneous connections, all ports together.
	MaxClients int
	// MaxBulk is the largest bulk string accepted, bytes.
	MaxBulk int64
	// MaxMultibulk is the most arguments one command may carry (a
	// multibulk count, or the words of an inline line).
	MaxMultibulk int
	// QueryBufferLimit is the most bytes one command may declare (headers,
	// payloads and the guard's per-argument overhead), Redis's
	// client-query-buffer-limit; 0 = twice MaxBulk, at least 1 MiB.
	QueryBufferLimit int64

	// Persistence.

	Dir           string        // data directory
	Persist       bool          // keep state in Dir
	FlushInterval time.Duration // sync window (> 0)
	Recover       string        // "fail" or "skip"
	FoldMinBytes  int64         // fold the log into a new base from this size (> 0)

	// Security.

	// RequirePass is the default user's password, from CELLD_REQUIREPASS
	// (never a flag: ps would show it). RequirePassFile, when set, wins:
	// main reads the file.
	RequirePass     string
	RequirePassFile string
	ProtectedMode   bool
	TLSCert         string
	TLSKey          string
	TLSCA           string

	// Cluster.

	ClusterNodes    string
	ClusterAnnounce string

	// Replication (docs/replication.md).

	Replication   bool          // stream effects to followers (or follow ReplicateFrom)
	ReplicateFrom string        // the leader's replication address; "" = lead
	ReplAddr      string        // this node's replication address; "" = client port + 10000
	ReplicaAck    string        // "async" or "sync"
	MaxReplicaLag time.Duration // async: refuse writes past this lag
	MinReplicas   int           // refuse writes with fewer synced followers (0 = stay available; docs/replica-availability.md)
	// HA mode (docs/ha.md): leadership and topology in etcd.

	Etcd       string        // etcd endpoints, comma-separated; "" = off
	HACluster  string        // the cluster's name in etcd (/celld/<name>/...)
	NodeID     string        // this node's id in the topology document
	HALeaseTTL time.Duration // leadership lease TTL (whole seconds, 2..60); ReplAddr (above) is where replicas reach a leader

	// Sidecar mode (docs/sidecar.md): forward keyed commands to their
	// owner upstream.

	Upstream             string        // seed addresses, comma-separated; "" = off
	UpstreamFallback     string        // "local", "open" or "closed"
	UpstreamTimeout      time.Duration // how long a command waits for its owner
	UpstreamBulkTimeout  time.Duration // the same for a bulk read (HGETALL, LRANGE, KEYS, ...)
	UpstreamPasswordFile string        // file holding the upstream's password
	UpstreamTLS          bool          // reach the upstream over TLS
	UpstreamTLSCA        string        // CA that signed the upstream's certificate ("" = system roots)
	UpstreamTLSCert      string        // client certificate for the upstream (with UpstreamTLSKey)
	UpstreamTLSKey       string

	// Observability.

	LogFormat   string // "text" or "json"
	LogLevel    string // "debug", "info", "warn" or "error"
	MetricsAddr string // "" = off
	PprofAddr   string // "" = off

	// LimiterSeparator ends a key's limiter name (the metrics' limiter
	// label); not empty. MetricsMaxLimiters bounds the distinct names
	// (later ones count as "other"); 0 = none, every decision is "other".
	// Shadow is the shadow-mode patterns (Redis globs, comma-separated;
	// "" = none): denials on matching keys are answered as allowed.
	// docs/limiter-metrics.md.
	LimiterSeparator   string
	MetricsMaxLimiters int
	Shadow             string

	// Tuning.

	IOLoops       int           // event loops; 0 = a goroutine per connection
	BusyPoll      time.Duration // 0 = never
	ShutdownGrace time.Duration // how long SIGTERM waits for connections

	// MaxMemory bounds the keyspace's accounted memory, bytes; 0 = none.
	MaxMemory int64
	// MaxMemoryPolicy is what a new key meets at MaxMemory, in Redis's
	// words (noeviction, volatile-ttl, ...).
	MaxMemoryPolicy string

	// OutputBufferLimit is Redis's client-output-buffer-limit for normal
	// clients; the zero value is no limit.
	OutputBufferLimit OutputBufferLimit

	// Databases is how many databases SELECT chooses from (Redis's
	// databases; docs/databases.md).
	Databases int

	// Actions: what to do instead of serving. No environment variable
	// sets these (CELLD_HEALTHCHECK=yes in an image would turn every start
	// into a health check).

	Help        bool // --help, -h or `celld help`: print Usage, exit 0
	Version     bool // --version
	Healthcheck bool // --healthcheck: PING the running server, exit 0/1

	given string // the settings a flag or the environment set, each as "|name|" (Given)
}

// Group is a heading of --help.
type Group int

const (
	Network Group = iota
	Persistence
	Security
	Cluster
	Observability
	Tuning
	numGroups
)

var groupNames = [numGroups]string{"Network", "Persistence", "Security", "Cluster", "Observability", "Tuning"}

func (g Group) String() string { return groupNames[g] }

// setting is one row of the table: a flag (--Name) and its environment
// variable (CELLD_ + Name upper-cased, '-' → '_', unless Env says
// otherwise), its group in --help, its default as an operator would write
// it (parsed by the same parser as flag and variable), a one-line usage,
// and bind, which points the parser at the Config field.
type setting struct {
	Name    string // "" for a variable with no flag (CELLD_REQUIREPASS)
	Env     string // "" = derived from Name
	Group   Group
	Default string
	Usage   string
	bind    func(*Config) value
}

// maxDuration is "no upper bound" for durationValue.
const maxDuration = time.Duration(math.MaxInt64)

// table is every setting celld reads, in --help order within each group.
// See the package comment for how to add one.
var table = []setting{
	// Network.
	{Name: "addr", Group: Network, Default: "127.0.0.1:6379",
		Usage: "plain-TCP listen address; '' or port 0 = no plain port (TLS only, see --tls-port)",
		bind:  func(c *Config) value { return stringValue{p: &c.Addr, m: "HOST:PORT", check: hostPort(true)} }},
	{Name: "tls-port", Group: Network, Default: "0",
		Usage: "TLS port on --addr's host (127.0.0.1 when --addr is ''); 0 = no TLS; needs --tls-cert and --tls-key",
		bind:  func(c *Config) value { return intValue{p: &c.TLSPort, min: 0, max: 65535} }},
	{Name: "maxclients", Group: Network, Default: "10000",
		Usage: "maximum simultaneous connections, all ports together",
		bind:  func(c *Config) value { return intValue{p: &c.MaxClients, min: 1, max: 1 << 24} }},
	{Name: "proto-max-bulk-len", Group: Network, Default: "524288",
		Usage: "largest bulk string accepted (Redis units: 512kb, 1mb; from 1k, below which no command but the shortest could be sent, to 512mb)",
		bind:  func(c *Config) value { return bytesValue{p: &c.MaxBulk, min: 1000, max: 512 << 20} }},
	{Name: "max-multibulk-len", Group: Network, Default: "1048576",
		Usage: "most arguments one command may carry (a multibulk count, or the words of an inline line)",
		bind:  func(c *Config) value { return intValue{p: &c.MaxMultibulk, min: 1, max: 1<<31 - 1} }},
	{Name: "client-query-buffer-limit", Group: Network, Default: "0",
		Usage: "most bytes one command may declare, each argument counted with 24 bytes of overhead (bounds a connection's query memory at about twice this); 0 = twice --proto-max-bulk-len, at least 1mb",
		bind:  func(c *Config) value { return bytesValue{p: &c.QueryBufferLimit, min: 0, max: 1 << 40} }},

	// Persistence.
	{Name: "dir", Group: Persistence, Default: "./data",
		Usage: "data directory for persisted state",
		bind:  func(c *Config) value { return stringValue{p: &c.Dir, m: "PATH"} }},
	{Name: "persist", Group: Persistence, Default: "yes",
		Usage: "keep limiter state in --dir across restarts; no = memory only",
		bind:  func(c *Config) value { return boolValue{&c.Persist} }},
	{Name: "flush-interval", Group: Persistence, Default: "100ms",
		Usage: "how often changes are synced to disk: at most this much is lost on kill -9",
		bind: func(c *Config) value {
			return durationValue{p: &c.FlushInterval, min: time.Millisecond, max: 24 * time.Hour}
		}},
	{Name: "recover", Group: Persistence, Default: "fail",
		Usage: "on an unreadable data directory: fail (refuse to start), or skip (move its contents aside, start empty)",
		bind:  func(c *Config) value { return enumValue{&c.Recover, []string{"fail", "skip"}} }},
	{Name: "log-fold-min-bytes", Group: Persistence, Default: "33554432",
		Usage: "fold the on-disk log into a new base once it is as big as the base and at least this big",
		bind:  func(c *Config) value { return bytesValue{p: &c.FoldMinBytes, min: 1, max: math.MaxInt64} }},

	// Security.
	{Env: "CELLD_REQUIREPASS", Group: Security, Default: "",
		Usage: "the default user's password (environment only: a flag would show in ps)",
		bind:  func(c *Config) value { return stringValue{p: &c.RequirePass, m: "PASSWORD"} }},
	{Name: "requirepass-file", Group: Security, Default: "",
		Usage: "file holding the default user's password (wins over CELLD_REQUIREPASS)",
		bind:  func(c *Config) value { return stringValue{p: &c.RequirePassFile, m: "PATH"} }},
	{Name: "protected-mode", Group: Security, Default: "yes",
		Usage: "with no password, refuse clients that are not on loopback",
		bind:  func(c *Config) value { return boolValue{&c.ProtectedMode} }},
	{Name: "tls-cert", Group: Security, Default: "",
		Usage: "TLS certificate file (PEM)",
		bind:  func(c *Config) value { return stringValue{p: &c.TLSCert, m: "PATH"} }},
	{Name: "tls-key", Group: Security, Default: "",
		Usage: "TLS private key file (PEM)",
		bind:  func(c *Config) value { return stringValue{p: &c.TLSKey, m: "PATH"} }},
	{Name: "tls-ca", Group: Security, Default: "",
		Usage: "CA file (PEM): when set, TLS clients must present a certificate it signed",
		bind:  func(c *Config) value { return stringValue{p: &c.TLSCA, m: "PATH"} }},

	// Cluster.
	{Name: "cluster-nodes", Group: Cluster, Default: "",
		Usage: "Redis Cluster mode: every node's announced host:port, in order, comma-separated; node i of N owns slots [i*16384/N, (i+1)*16384/N)",
		bind:  func(c *Config) value { return stringValue{p: &c.ClusterNodes, m: "HOST:PORT,..."} }},
	{Name: "cluster-announce", Group: Cluster, Default: "",
		Usage: "this node's entry in --cluster-nodes, when --addr is not it (e.g. --addr 0.0.0.0:6379)",
		bind: func(c *Config) value {
			return stringValue{p: &c.ClusterAnnounce, m: "HOST:PORT", check: hostPort(true)}
		}},
	{Name: "replication", Group: Cluster, Default: "no",
		Usage: "replicate: lead (stream every change to followers at epoch 1) or, with --replicate-from, follow a fixed leader (docs/replication.md)",
		bind:  func(c *Config) value { return boolValue{&c.Replication} }},
	{Name: "replicate-from", Group: Cluster, Default: "",
		Usage: "follow the leader whose replication address this is (implies --replication yes); '' = lead",
		bind:  func(c *Config) value { return stringValue{p: &c.ReplicateFrom, m: "HOST:PORT", check: hostPort(true)} }},
	{Name: "repl-addr", Group: Cluster, Default: "",
		Usage: "where a leader accepts followers (HA mode: published in the topology document); '' = the client port + 10000 on --addr's host",
		bind:  func(c *Config) value { return stringValue{p: &c.ReplAddr, m: "HOST:PORT", check: hostPort(true)} }},
	{Name: "replica-ack", Group: Cluster, Default: "async",
		Usage: "async: answer at once, refuse writes (-TRYAGAIN) while the oldest unacknowledged change is older than --max-replica-lag; sync: answer a batch of writes once a follower acknowledged it",
		bind:  func(c *Config) value { return enumValue{&c.ReplicaAck, []string{"async", "sync"}} }},
	{Name: "max-replica-lag", Group: Cluster, Default: "10ms",
		Usage: "oldest change a leader lets go unacknowledged before it refuses writes",
		bind: func(c *Config) value {
			return durationValue{p: &c.MaxReplicaLag, min: time.Millisecond, max: time.Minute}
		}},
	{Name: "min-replicas", Group: Cluster, Default: "0",
		Usage: "a leader refuses writes (-NOREPLICAS) while fewer followers than this are connected and synced; 0 = stay available with none, the lag bound applying only while a follower is connected (docs/replica-availability.md)",
		bind:  func(c *Config) value { return intValue{p: &c.MinReplicas, min: 0, max: 16} }},
	{Name: "etcd", Group: Cluster, Default: "",
		Usage: "HA mode: etcd endpoints (URL[,URL]) holding the topology and the shards' leadership; needs --cluster and --node-id; '' = off (docs/ha.md)",
		bind:  func(c *Config) value { return stringValue{p: &c.Etcd, m: "URL,..."} }},
	{Name: "cluster", Group: Cluster, Default: "",
		Usage: "HA mode: the cluster's name; its keys in etcd are under /celld/<name>/",
		bind:  func(c *Config) value { return stringValue{p: &c.HACluster, m: "NAME"} }},
	{Name: "node-id", Group: Cluster, Default: "",
		Usage: "HA mode: this node's id in the topology document (celld cluster init/add-node)",
		bind:  func(c *Config) value { return stringValue{p: &c.NodeID, m: "ID"} }},
	{Name: "ha-lease-ttl", Group: Cluster, Default: "2s",
		Usage: "HA mode: leadership lease TTL (whole seconds); a leader cut off from etcd stops answering before it ends, a new one is elected after it",
		bind: func(c *Config) value {
			return durationValue{p: &c.HALeaseTTL, min: 2 * time.Second, max: time.Minute}
		}},
	{Name: "upstream", Group: Cluster, Default: "",
		Usage: "sidecar mode: forward every keyed command to its owner in this celld cluster or Redis (seed addresses, comma-separated; the topology comes from CLUSTER SLOTS of any of them); '' = off (docs/sidecar.md)",
		bind:  func(c *Config) value { return stringValue{p: &c.Upstream, m: "HOST:PORT,...", check: hostPortList} }},
	{Name: "upstream-fallback", Group: Cluster, Default: "local",
		Usage: "while a key's owner cannot be reached: local (decide with this sidecar's own state), open (CL.THROTTLE allowed, other commands an error), closed (an error naming the owner)",
		bind:  func(c *Config) value { return enumValue{&c.UpstreamFallback, []string{"local", "open", "closed"}} }},
	{Name: "upstream-timeout", Group: Cluster, Default: "250ms",
		Usage: "how long a forwarded command waits for its owner before the owner is taken as down and the fallback answers (a dead owner is known at once from a refused or reset connection; this bounds a silent or trickling one: a request not fully answered within it counts as the owner down; value and bulk reads are waited for while their reply arrives, docs/sidecar.md)",
		bind: func(c *Config) value {
			return durationValue{p: &c.UpstreamTimeout, min: time.Millisecond, max: time.Minute}
		}},
	{Name: "upstream-bulk-timeout", Group: Cluster, Default: "10s",
		Usage: "the same bound for a bulk read (HGETALL, HKEYS, HVALS, LRANGE, SMEMBERS, ZRANGE, set algebra, SORT, DUMP, KEYS), whose owner may compute its reply for longer than --upstream-timeout before the first byte; bulk reads travel on connections of their own, so decisions never wait behind one (docs/sidecar-bulk.md)",
		bind: func(c *Config) value {
			return durationValue{p: &c.UpstreamBulkTimeout, min: time.Millisecond, max: time.Hour}
		}},
	{Name: "upstream-password-file", Group: Cluster, Default: "",
		Usage: "file holding the upstream's password (AUTH); '' = none",
		bind:  func(c *Config) value { return stringValue{p: &c.UpstreamPasswordFile, m: "PATH"} }},
	{Name: "upstream-tls", Group: Cluster, Default: "no",
		Usage: "reach the upstream over TLS",
		bind:  func(c *Config) value { return boolValue{&c.UpstreamTLS} }},
	{Name: "upstream-tls-ca", Group: Cluster, Default: "",
		Usage: "CA file (PEM) that signed the upstream's certificates; '' = the system's roots",
		bind:  func(c *Config) value { return stringValue{p: &c.UpstreamTLSCA, m: "PATH"} }},
	{Name: "upstream-tls-cert", Group: Cluster, Default: "",
		Usage: "client certificate (PEM) presented to the upstream, with --upstream-tls-key",
		bind:  func(c *Config) value { return stringValue{p: &c.UpstreamTLSCert, m: "PATH"} }},
	{Name: "upstream-tls-key", Group: Cluster, Default: "",
		Usage: "client private key (PEM) for --upstream-tls-cert",
		bind:  func(c *Config) value { return stringValue{p: &c.UpstreamTLSKey, m: "PATH"} }},

	// Observability.
	{Name: "log-format", Group: Observability, Default: "text",
		Usage: "log format",
		bind:  func(c *Config) value { return enumValue{&c.LogFormat, []string{"text", "json"}} }},
	{Name: "log-level", Group: Observability, Default: "info",
		Usage: "least severe log level written",
		bind:  func(c *Config) value { return enumValue{&c.LogLevel, []string{"debug", "info", "warn", "error"}} }},
	{Name: "metrics-addr", Group: Observability, Default: "",
		Usage: "serve Prometheus /metrics and /livez, /readyz, /healthz over HTTP here (e.g. 127.0.0.1:9121); '' = off",
		bind:  func(c *Config) value { return stringValue{p: &c.MetricsAddr, m: "HOST:PORT", check: hostPort(true)} }},
	{Name: "limiter-separator", Group: Observability, Default: ":",
		Usage: "a key's limiter (the metrics' limiter label) is its first segment before this string; a key without it is limiter ''",
		bind:  func(c *Config) value { return stringValue{p: &c.LimiterSeparator, m: "STRING", check: notEmpty} }},
	{Name: "metrics-max-limiters", Group: Observability, Default: "100",
		Usage: "most distinct limiter labels counted (about 2 KiB each); later ones count as limiter 'other'; 0 = count every decision as 'other'",
		bind:  func(c *Config) value { return intValue{p: &c.MetricsMaxLimiters, min: 0, max: 10000} }},
	{Name: "shadow", Group: Observability, Default: "",
		Usage: "shadow mode: comma-separated Redis glob patterns on the key; a denial on a matching key is answered as allowed, writes nothing and counts as shadow_denied (CONFIG SET shadow at run time)",
		bind:  func(c *Config) value { return stringValue{p: &c.Shadow, m: "PATTERN,..."} }},
	{Name: "pprof-addr", Group: Observability, Default: "",
		Usage: "serve Go's /debug/pprof/ profiles here (keep it on loopback); '' = off",
		bind:  func(c *Config) value { return stringValue{p: &c.PprofAddr, m: "HOST:PORT", check: hostPort(true)} }},

	// Tuning.
	{Name: "io-loops", Group: Tuning, Default: "1",
		Usage: "epoll event loops (one goroutine each) serving plain-TCP clients; 0 = a goroutine per connection",
		bind:  func(c *Config) value { return intValue{p: &c.IOLoops, min: 0, max: 64} }},
	{Name: "busy-poll", Group: Tuning, Default: "50us",
		Usage: "how long a busy event loop polls for more events before sleeping; 0 = never (a sidecar, --upstream: 0 unless given)",
		bind:  func(c *Config) value { return durationValue{p: &c.BusyPoll, min: 0, max: time.Second} }},
	{Name: "shutdown-grace", Group: Tuning, Default: "10s",
		Usage: "how long SIGTERM waits for connections to drain and the final flush (then exits, saying what was not flushed)",
		bind:  func(c *Config) value { return durationValue{p: &c.ShutdownGrace, min: 0, max: maxDuration} }},
	{Name: "maxmemory", Group: Tuning, Default: "0",
		Usage: "bound on the keyspace's memory (Redis units: 64mb, 2gb); 0 = no bound (docs/memory.md)",
		bind:  func(c *Config) value { return bytesValue{p: &c.MaxMemory, min: 0, max: 1 << 50} }},
	{Name: "maxmemory-policy", Group: Tuning, Default: "noeviction",
		Usage: "what a new key meets at --maxmemory: noeviction (refused with -OOM), volatile-ttl (evict the key nearest its expiry: the one for limiters), volatile-lru, allkeys-lru, volatile-random, allkeys-random",
		bind: func(c *Config) value {
			return enumValue{&c.MaxMemoryPolicy, []string{"noeviction", "volatile-ttl", "volatile-lru", "allkeys-lru", "volatile-random", "allkeys-random"}}
		}},
	{Name: "client-output-buffer-limit", Group: Tuning, Default: "normal 0 0 0",
		Usage: "Redis's limit on a client's unread replies: 'normal <hard> <soft> <soft-seconds>' (e.g. 'normal 256mb 64mb 60'); a client past hard, or at or above soft for longer than soft-seconds, is closed; 0 = no limit",
		bind:  func(c *Config) value { return outputBufferValue{&c.OutputBufferLimit} }},
	{Name: "databases", Group: Tuning, Default: "16",
		Usage: "number of databases (SELECT 0 to N-1), as Redis's; a database costs memory only once used; cluster mode serves database 0 only (docs/databases.md)",
		bind:  func(c *Config) value { return intValue{p: &c.Databases, min: 1, max: 1 << 16} }},
}

// validateHA checks the HA mode's settings against each other.
func (c *Config) validateHA() error {
	if c.Etcd == "" {
		if c.HACluster != "" || c.NodeID != "" {
			return errors.New("--cluster and --node-id (env CELLD_CLUSTER, CELLD_NODE_ID) need --etcd (env CELLD_ETCD)")
		}
		return nil
	}
	switch {
	case c.HACluster == "" || c.NodeID == "":
		return errors.New("--etcd (env CELLD_ETCD) needs --cluster and --node-id (env CELLD_CLUSTER, CELLD_NODE_ID)")
	case strings.Contains(c.HACluster, "/") || strings.ContainsAny(c.NodeID, "/ \t\r\n"):
		return errors.New("--cluster and --node-id may not contain '/' or spaces")
	case c.ClusterNodes != "":
		return errors.New("--etcd and --cluster-nodes exclude each other (HA or static cluster mode)")
	case c.Upstream != "":
		return errors.New("--etcd and --upstream exclude each other (a sidecar reaches an HA cluster through --upstream)")
	case c.HALeaseTTL%time.Second != 0:
		return fmt.Errorf("--ha-lease-ttl %v: whole seconds (etcd's leases are)", c.HALeaseTTL)
	}
	return nil
}
