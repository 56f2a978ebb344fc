package server

import (
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"time"
)

// INFO [section ...], in Redis 7's layout: "# Section" headers,
// "field:value" lines, CRLF line ends, a blank line between sections.
// Tools read it with a split on CRLF and on the first ':' (ioredis's ready
// check looks for loading:0; redis_exporter reads most fields; cmdstat_*
// lines are "calls=...,usec=...,usec_per_call=...,rejected_calls=...,
// failed_calls=..."). Sections, as Redis:
//
//	(none), default  server clients memory persistence stats replication
//	                 cpu modules errorstats cluster keyspace
//	all              default + commandstats latencystats
//	everything       all
//	a name           that section (several may be given)
//
// Fields that have no meaning in celld keep Redis's neutral value (0,
// "no") so that parsers find them.

// infoSection is one section: its header and how to build its lines.
type infoSection struct {
	name    string // as in the header; matched case-insensitively
	dflt    bool   // part of the default set
	collect func(s *Server, now time.Time) []string
}

var infoSections = []infoSection{
	{"Server", true, (*Server).infoServer},
	{"Clients", true, (*Server).infoClients},
	{"Memory", true, (*Server).infoMemory},
	{"Persistence", true, (*Server).infoPersistence},
	{"Stats", true, (*Server).infoStats},
	{"Replication", true, (*Server).infoReplication},
	{"CPU", true, func(*Server, time.Time) []string { return infoCPU() }},
	{"Modules", true, func(*Server, time.Time) []string {
		return []string{"module:name=redis-cell,ver=1,api=1,filters=0,usedby=[],using=[],options=[]"}
	}},
	{"Errorstats", true, (*Server).infoErrorstats},
	{"Cluster", true, func(s *Server, _ time.Time) []string { return s.infoCluster() }},
	{"Keyspace", true, (*Server).infoKeyspace},
	{"Upstream", true, func(s *Server, _ time.Time) []string { return s.infoUpstream() }}, // forward.go, sidecar mode only
	{"Commandstats", false, (*Server).infoCommandstats},
	{"Latencystats", false, (*Server).infoLatencystats},
	{"Limiters", false, (*Server).infoLimiters}, // decisions.go
}

func cmdInfo(s *Server, c *client, args [][]byte) {
	// Count this pipeline's commands so far; INFO itself is counted after
	// it returns, as Redis does.
	if c.pending > 0 {
		c.pending--
		c.publishCommands()
		c.pending++
	}
	want := map[string]bool{}
	for _, a := range args[1:] {
		want[strings.ToLower(string(a))] = true
	}
	all := want["all"] || want["everything"]
	dflt := len(want) == 0 || want["default"]
	now := time.Now()
	var b strings.Builder
	for _, sec := range infoSections {
		if !all && !(dflt && sec.dflt) && !want[strings.ToLower(sec.name)] {
			continue
		}
		if sec.name == "Upstream" && s.cfg.Forwarder == nil {
			continue // sidecar mode only
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		b.WriteString("# " + sec.name + "\r\n")
		for _, l := range sec.collect(s, now) {
			b.WriteString(l)
			b.WriteString("\r\n")
		}
	}
	c.out = c.appendVerbatim(c.out, b.String())
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func (s *Server) port() string {
	for _, p := range s.configParams() {
		if p[0] == "port" {
			return p[1]
		}
	}
	return "6379"
}

func (s *Server) infoServer(now time.Time) []string {
	uptime := int64(now.Sub(s.start) / time.Second)
	exe, _ := os.Executable()
	return []string{
		"redis_version:" + RedisVersion,
		"redis_git_sha1:00000000",
		"redis_git_dirty:0",
		"redis_build_id:0",
		"redis_mode:" + s.redisMode(),
		"os:" + osName(),
		"arch_bits:" + strconv.Itoa(strconv.IntSize),
		"monotonic_clock:POSIX clock_gettime",
		"multiplexing_api:go",
		"atomicvar_api:go",
		"gcc_version:0.0.0",
		"process_id:" + strconv.Itoa(os.Getpid()),
		"process_supervised:no",
		"run_id:" + s.ext.id(),
		"tcp_port:" + s.port(),
		"server_time_usec:" + itoa(now.UnixMicro()),
		"uptime_in_seconds:" + itoa(uptime),
		"uptime_in_days:" + itoa(uptime/86400),
		"hz:10",
		"configured_hz:10",
		"lru_clock:" + itoa(now.Unix()&(1<<24-1)),
		"executable:" + exe,
		"config_file:",
		"io_threads_active:0",
		"celld_version:" + s.cfg.Version,
		"go_version:" + runtime.Version(),
	}
}

func (s *Server) infoClients(time.Time) []string {
	s.mu.Lock()
	n := len(s.clients)
	s.mu.Unlock()
	_, maxClients := s.ext.listenerTotals()
	return []string{
		"connected_clients:" + strconv.Itoa(n),
		"cluster_connections:0",
		"maxclients:" + strconv.Itoa(maxClients),
		"client_recent_max_input_buffer:0",
		"client_recent_max_output_buffer:0",
		"blocked_clients:0",
		"tracking_clients:" + itoa(s.ext.trk.active.Load()),
		"clients_in_timeout_table:0",
		"total_blocking_keys:0",
		"total_blocking_keys_on_nokey:0",
	}
}

// bytesToHuman is Redis's: B below 1 KiB, else two decimals and K, M, G, T.
func bytesToHuman(n uint64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatUint(n, 10) + "B"
	}
	d, suffix := float64(n), ""
	for _, u := range []string{"K", "M", "G", "T", "P"} {
		d /= unit
		suffix = u
		if d < unit {
			break
		}
	}
	return strconv.FormatFloat(d, 'f', 2, 64) + suffix
}

// goHeapStats are the Go runtime's figures INFO memory reports.
type goHeapStats struct {
	alloc, sys uint64 // MemStats.HeapAlloc and HeapSys
	mapped     uint64 // MemStats.Sys - HeapReleased: RSS's stand-in off Linux
	gcs        uint64 // MemStats.NumGC
}

// goHeapSamples are the runtime/metrics names readGoHeap reads, in the
// order it uses them.
var goHeapSamples = [...]string{
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/released:bytes",
	"/memory/classes/total:bytes",
	"/gc/cycles/total:gc-cycles",
}

// readGoHeap reads goHeapStats from runtime/metrics. It is for INFO
// memory, which monitoring polls and which runs on an event loop:
// runtime.ReadMemStats, used before, stops the world, and under a key
// spray at the bound (2 cores, INFO polled every 50 ms) those pauses were
// 97 of the 5 s trace's stop-the-world pauses and up to 8 ms each, longer
// than the collector's own; PING's p99 on the loop followed them.
// metrics.Read takes no stop-the-world. Safe for concurrent use; a few
// µs, allocation-free but for the samples slice.
func readGoHeap() goHeapStats {
	var s [len(goHeapSamples)]metrics.Sample
	for i, n := range goHeapSamples {
		s[i].Name = n
	}
	metrics.Read(s[:])
	v := func(i int) uint64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0 // not this runtime's metric
		}
		return s[i].Value.Uint64()
	}
	objects, unused, free, released, total := v(0), v(1), v(2), v(3), v(4)
	return goHeapStats{
		alloc:  objects,
		sys:    objects + unused + free + released, // heapInUse + heapFree + heapReleased
		mapped: total - released,
		gcs:    v(5),
	}
}

func (s *Server) infoMemory(time.Time) []string {
	ms := readGoHeap()
	// The keyspace's accounted memory, which the bound applies to
	// (store/memory.go); the Go heap is go_heap_alloc.
	used := uint64(s.store.UsedMemory())
	rss := residentBytes()
	if rss == 0 {
		rss = ms.mapped
	}
	peak := s.ext.notePeak(used)
	sm := s.scriptEngine().MemStats() // script/memstats.go
	frag := 0.0
	if used > 0 {
		frag = float64(rss) / float64(used)
	}
	return append([]string{
		"used_memory:" + strconv.FormatUint(used, 10),
		"used_memory_human:" + bytesToHuman(used),
		"used_memory_rss:" + strconv.FormatUint(rss, 10),
		"used_memory_rss_human:" + bytesToHuman(rss),
		"used_memory_peak:" + strconv.FormatUint(peak, 10),
		"used_memory_peak_human:" + bytesToHuman(peak),
		// Scripts, in Redis 7.0's order (no functions in celld).
		"used_memory_lua:" + itoa(sm.VMBytes),
		"used_memory_vm_eval:" + itoa(sm.VMBytes),
		"used_memory_lua_human:" + bytesToHuman(uint64(sm.VMBytes)),
		"used_memory_scripts_eval:" + itoa(sm.ScriptBytes),
		"number_of_cached_scripts:" + strconv.Itoa(sm.Scripts),
		"number_of_functions:0",
		"used_memory_vm_functions:0",
		"used_memory_vm_total:" + itoa(sm.VMBytes),
		"used_memory_vm_total_human:" + bytesToHuman(uint64(sm.VMBytes)),
		"used_memory_functions:0",
		"used_memory_scripts:" + itoa(sm.ScriptBytes),
		"used_memory_scripts_human:" + bytesToHuman(uint64(sm.ScriptBytes)),
		"total_system_memory:" + strconv.FormatUint(systemMemory(), 10),
	}, append(s.infoMemoryBound(), // memory.go
		"mem_fragmentation_ratio:"+strconv.FormatFloat(frag, 'f', 2, 64),
		"mem_allocator:go",
		"go_heap_alloc:"+strconv.FormatUint(ms.alloc, 10),
		"go_heap_sys:"+strconv.FormatUint(ms.sys, 10),
		"go_gc_cycles:"+strconv.FormatUint(ms.gcs, 10),
	)...)
}

// infoPersistence is loading first (ioredis waits while it is not 0), then
// the Persister's lines, then Redis's fields it did not give.
func (s *Server) infoPersistence(now time.Time) []string {
	loading := "0"
	if s.loading() {
		loading = "1"
	}
	lines := []string{"loading:" + loading, "async_loading:0"}
	if p := s.cfg.Persister; p != nil {
		lines = append(lines, p.InfoPersistence()...)
	}
	given := map[string]bool{}
	for _, l := range lines {
		if k, _, ok := strings.Cut(l, ":"); ok {
			given[k] = true
		}
	}
	lastSave := s.start.Unix()
	if p := s.cfg.Persister; p != nil {
		if ls := p.LastSave(); !ls.IsZero() {
			lastSave = ls.Unix()
		}
	}
	for _, d := range [][2]string{
		{"rdb_changes_since_last_save", "0"},
		{"rdb_bgsave_in_progress", "0"},
		{"rdb_last_save_time", itoa(lastSave)},
		{"rdb_last_bgsave_status", "ok"},
		{"aof_enabled", "0"},
		{"aof_rewrite_in_progress", "0"},
		{"aof_last_write_status", "ok"},
	} {
		if !given[d[0]] {
			lines = append(lines, d[0]+":"+d[1])
		}
	}
	return lines
}

func (s *Server) infoStats(now time.Time) []string {
	cmds := s.commandsProcessed()
	rejected, _ := s.ext.listenerTotals()
	var hits, misses int64
	for _, cs := range s.commandStats() {
		hits += cs.Hits
		misses += cs.Misses
	}
	errs := s.ext.totalErrors()
	tk, ti, tp := s.ext.trk.counts()
	polls, pollHits := s.busyPollCounts()
	wakes, events := s.wakeCounts()
	netIn, netOut := s.netBytes()
	tAllowed, tDenied := s.dec.throttleTotals() // decisions.go
	return []string{
		"total_connections_received:" + itoa(s.stats.connections.Load()),
		"total_commands_processed:" + itoa(cmds),
		"instantaneous_ops_per_sec:" + strconv.FormatInt(int64(s.ext.opsPerSec(cmds, now)+0.5), 10),
		"total_net_input_bytes:" + itoa(netIn),
		"total_net_output_bytes:" + itoa(netOut),
		"rejected_connections:" + itoa(rejected),
		"sync_full:0",
		"sync_partial_ok:0",
		"sync_partial_err:0",
		"expired_keys:" + itoa(s.store.ExpiredKeys()),
		"evicted_keys:" + itoa(s.store.EvictedKeys()),
		"keyspace_hits:" + itoa(hits),
		"keyspace_misses:" + itoa(misses),
		"pubsub_channels:0",
		"pubsub_patterns:0",
		"pubsubshard_channels:0",
		"latest_fork_usec:0",
		"total_forks:0",
		"migrate_cached_sockets:0",
		"tracking_total_keys:" + strconv.Itoa(tk),
		"tracking_total_items:" + strconv.Itoa(ti),
		"tracking_total_prefixes:" + strconv.Itoa(tp),
		"unexpected_error_replies:0",
		"total_error_replies:" + itoa(errs),
		"client_output_buffer_limit_disconnections:" + itoa(s.stats.obufDisconnects.Load()),
		"throttle_allowed:" + itoa(tAllowed),
		"throttle_denied:" + itoa(tDenied),
		"handler_panics:" + itoa(s.stats.panics.Load()),
		"busy_polls:" + itoa(polls),
		"busy_poll_hits:" + itoa(pollHits),
		"loop_wakes:" + itoa(wakes),
		"loop_events:" + itoa(events),
		"loop_yields:" + itoa(s.loopYields()),
	}
}

func (s *Server) infoReplication(time.Time) []string {
	if f := s.cfg.ReplicationInfo; f != nil { // replication on (repl.Node.Info)
		return append(f(), "master_replid:"+s.ext.id())
	}
	return []string{
		"role:master",
		"connected_slaves:0",
		"master_failover_state:no-failover",
		"master_replid:" + s.ext.id(),
		"master_replid2:0000000000000000000000000000000000000000",
		"master_repl_offset:0",
		"second_repl_offset:-1",
		"repl_backlog_active:0",
		"repl_backlog_size:1048576",
		"repl_backlog_first_byte_offset:0",
		"repl_backlog_histlen:0",
	}
}

func (s *Server) infoErrorstats(time.Time) []string {
	var lines []string
	for _, e := range s.ext.errorCounts() { // errorstats.go
		lines = append(lines, "errorstat_"+e.code+":count="+itoa(e.count))
	}
	return lines
}

func (s *Server) infoKeyspace(time.Time) []string { return s.keyspaceLines() } // databases.go

// infoCommandstats: usec is the sampled time scaled to all calls.
func (s *Server) infoCommandstats(time.Time) []string {
	var lines []string
	for _, cs := range s.commandStats() {
		usec := cs.EstimatedTime().Microseconds()
		per := 0.0
		if cs.Calls > 0 {
			per = float64(usec) / float64(cs.Calls)
		}
		lines = append(lines, "cmdstat_"+cs.Name+":calls="+itoa(cs.Calls)+
			",usec="+itoa(usec)+
			",usec_per_call="+strconv.FormatFloat(per, 'f', 2, 64)+
			",rejected_calls="+itoa(cs.Rejected)+
			",failed_calls="+itoa(cs.Failed))
	}
	return lines
}

// infoLatencystats gives p50, p99 and p99.9 of the sampled latencies, each
// as the upper bound of the histogram bucket it falls in (in µs, as Redis).
func (s *Server) infoLatencystats(time.Time) []string {
	var lines []string
	for _, cs := range s.commandStats() {
		if cs.Sampled == 0 {
			continue
		}
		l := "latency_percentiles_usec_" + cs.Name + ":"
		for i, q := range []float64{0.5, 0.99, 0.999} {
			if i > 0 {
				l += ","
			}
			l += []string{"p50=", "p99=", "p99.9="}[i] + strconv.FormatFloat(percentileUsec(&cs, q), 'f', 3, 64)
		}
		lines = append(lines, l)
	}
	return lines
}

func percentileUsec(cs *CommandStats, q float64) float64 {
	rank := int64(q*float64(cs.Sampled) + 0.999999)
	var seen int64
	for i, n := range cs.Latency {
		seen += n
		if seen >= rank {
			if i < len(LatencyBuckets) {
				return float64(LatencyBuckets[i]) / float64(time.Microsecond)
			}
			break
		}
	}
	return float64(LatencyBuckets[len(LatencyBuckets)-1]) / float64(time.Microsecond)
}
