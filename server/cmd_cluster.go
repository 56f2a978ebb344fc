package server

import (
	"net"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/celld/celld/cluster"
	"github.com/celld/celld/store"
)

// Redis Cluster protocol: slot routing (MOVED, CROSSSLOT) for every command
// with keys, and CLUSTER SLOTS|SHARDS|NODES|INFO|MYID|KEYSLOT|
// COUNTKEYSINSLOT|GETKEYSINSLOT|HELP, READONLY, READWRITE, ASKING, in
// Redis 7's reply shapes. Config.Cluster == nil turns all of it off: dispatch
// then pays one nil check, and the commands answer as Redis does without
// cluster-enabled.

const (
	errClusterDisabled = "ERR This instance has cluster support disabled"
	errCrossSlot       = "CROSSSLOT Keys in request don't hash to the same slot"
)

// clusterStats are the routing counters INFO cluster reports.
type clusterStats struct {
	moved     atomic.Int64 // -MOVED replies sent
	crossSlot atomic.Int64 // -CROSSSLOT replies sent
	down      atomic.Int64 // -TRYAGAIN (fenced) and -CLUSTERDOWN (slot not served) replies sent
}

// Replies of a node that must not decide (HA mode): fenced, it still lists
// the slot as its own but its lease is not confirmed; or no node serves
// the slot while its shard elects a leader. Clients retry both (go-redis,
// redis-py and ioredis treat TRYAGAIN and CLUSTERDOWN as retryable).
const (
	errFenced      = "TRYAGAIN this node's leadership of the slot is not confirmed (fenced); retry"
	errSlotUnowned = "CLUSTERDOWN Hash slot not served"
)

// movableKeys reports whether name is an EVAL-style command whose keys are
// "numkeys key ..." from args[2] rather than fixed positions; a scripting
// implementation that adds these names is routed without further change.
func movableKeys(name string) bool {
	switch name {
	case "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro":
		return true
	}
	return false
}

// foldKeySlot folds the hash slots of cmd's keys in args into slot (-1 when
// no key has been seen yet) and returns the slot shared by all of them, or
// false when two keys hash to different slots. Key positions come from the
// command table (cl.throttle's key is args[1]); positions past the end of
// args are ignored, so a command short of its key is served locally and
// answers its own usage error, as in Redis.
func foldKeySlot(cmd *command, args [][]byte, slot int) (int, bool) {
	if cmd.keynum != nil { // ZUNIONSTORE, LMPOP, ...: keyspecs.go
		ok := true
		cmd.keynum.each(args, false, func(k []byte) {
			if ks := cluster.KeySlot(k); slot < 0 {
				slot = ks
			} else if ks != slot {
				ok = false
			}
		})
		return slot, ok
	}
	first, last, step := cmd.firstKey, cmd.lastKey, cmd.step
	if movableKeys(cmd.name) {
		first, last, step = 0, 0, 1
		if len(args) > 2 {
			// More keys than arguments: no keys, and EVAL answers its own
			// error here, as Redis's evalGetKeys makes it.
			if n, ok := parseRedisInt(args[2]); ok && n > 0 && n <= int64(len(args)-3) {
				first, last = 3, 2+int(n)
			}
		}
	}
	if first <= 0 {
		return slot, true
	}
	if last < 0 {
		last += len(args)
	}
	if last >= len(args) {
		last = len(args) - 1
	}
	if step < 1 {
		step = 1
	}
	for i := first; i <= last; i += step {
		ks := cluster.KeySlot(args[i])
		if slot < 0 {
			slot = ks
		} else if ks != slot {
			return slot, false
		}
	}
	return slot, true
}

// clusterRoute is Redis 7's getNodeByQuery as processCommand applies it. It
// runs for every command in cluster mode, before the command is run or
// queued, and reports whether this node may serve it. Otherwise it has
// appended the error: -CROSSSLOT when the keys span slots, -MOVED <slot>
// <host>:<port> when another node owns their slot. Inside MULTI a rejected
// command flags the transaction (EXEC then answers EXECABORT); EXEC itself
// checks the keys of every queued command together, and when they span
// slots or belong elsewhere it discards the transaction (and its WATCHes)
// and answers the error instead. Under HA (topo has replicas), a replica
// serves a read-only command of a READONLY connection for its primary's
// slots; a fenced node answers -TRYAGAIN for its own slots, and a slot
// without a leader answers -CLUSTERDOWN.
func (s *Server) clusterRoute(c *client, topo *cluster.Topology, cmd *command, args [][]byte) bool {
	slot, ok := -1, true
	isExec := cmd.name == "exec"
	switch {
	case isExec:
		if !c.inMulti {
			return true // EXEC answers "EXEC without MULTI"
		}
		for _, q := range c.queue {
			if qc := lookup(commands, q[0]); qc != nil {
				if slot, ok = foldKeySlot(qc, q, slot); !ok {
					break
				}
			}
		}
	case cmd.firstKey == 0 && !movableKeys(cmd.name):
		return true
	default:
		slot, ok = foldKeySlot(cmd, args, -1)
	}
	if ok && (slot < 0 || topo.Owns(slot)) {
		return true
	}
	if ok && c.readonly && !isExec && topo.ServesReplica(slot) && has(cmd.flags, "readonly") {
		return true
	}
	if isExec {
		c.discardMulti()
		s.watch.unwatchAll(c)
	} else if c.inMulti {
		c.multiError = true
	}
	if !ok {
		s.clusterStats.crossSlot.Add(1)
		c.out = appendError(c.out, errCrossSlot)
		return false
	}
	owner := topo.Owner(slot)
	switch {
	case topo.FencedSlot(slot):
		s.clusterStats.down.Add(1)
		c.out = appendError(c.out, errFenced)
	case owner == nil:
		s.clusterStats.down.Add(1)
		c.out = appendError(c.out, errSlotUnowned)
	default:
		s.clusterStats.moved.Add(1)
		c.out = appendError(c.out, "MOVED "+strconv.Itoa(slot)+" "+owner.Addr())
	}
	return false
}

// clusterOnly wraps a CLUSTER subcommand or READONLY-style command: without
// a topology it answers Redis's "cluster support disabled".
func clusterOnly(fn cmdFunc) cmdFunc {
	return func(s *Server, c *client, args [][]byte) {
		if !s.clusterOn() {
			c.out = appendError(c.out, errClusterDisabled)
			return
		}
		fn(s, c, args)
	}
}

func cmdCluster(s *Server, c *client, args [][]byte) { s.subcommand(c, commands["cluster"], args) }

// cmdClusterOK is ASKING: no slot is ever migrating, so it changes nothing
// and answers OK.
func cmdClusterOK(s *Server, c *client, _ [][]byte) { c.out = append(c.out, replyOK...) }

// cmdReadonly (READONLY) lets this connection read from a replica: under
// HA, a replica then serves read-only commands on its primary's slots.
func cmdReadonly(s *Server, c *client, _ [][]byte) {
	c.readonly = true
	c.out = append(c.out, replyOK...)
}

// cmdReadwrite (READWRITE) ends READONLY.
func cmdReadwrite(s *Server, c *client, _ [][]byte) {
	c.readonly = false
	c.out = append(c.out, replyOK...)
}

// clusterEntry is one slot range and its node, for CLUSTER SLOTS.
type clusterEntry struct {
	r cluster.SlotRange
	n *cluster.Node
}

// cmdClusterSlots answers CLUSTER SLOTS: one entry per slot range, in slot
// order: start, end, then the master as [host, port, id, {}] (the empty
// map is the "additional networking metadata" of Redis 7), then each of its
// replicas the same way. Unowned ranges are left out, as in Redis.
func cmdClusterSlots(s *Server, c *client, _ [][]byte) {
	topo := s.topo.Load()
	nodes := topo.Nodes()
	var entries []clusterEntry
	for i := range nodes {
		for _, r := range nodes[i].Slots {
			entries = append(entries, clusterEntry{r, &nodes[i]})
		}
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].r.First < entries[j].r.First })
	b := appendArray(c.out, len(entries))
	for _, e := range entries {
		replicas := topo.Replicas(e.n.ID)
		b = appendArray(b, 3+len(replicas))
		b = appendInt(b, int64(e.r.First))
		b = appendInt(b, int64(e.r.Last))
		for _, n := range append([]*cluster.Node{e.n}, replicas...) {
			b = appendArray(b, 4)
			b = appendBulkString(b, n.Host)
			b = appendInt(b, int64(n.Port))
			b = appendBulkString(b, n.ID)
			b = c.appendMap(b, 0)
		}
	}
	c.out = b
}

// cmdClusterShards answers CLUSTER SHARDS: one shard per master, each a
// map of its slot ranges (flat start/end pairs) and its nodes: the master,
// then its replicas.
func cmdClusterShards(s *Server, c *client, _ [][]byte) {
	topo := s.topo.Load()
	nodes := topo.Nodes()
	masters := 0
	for i := range nodes {
		if nodes[i].Role == cluster.RolePrimary {
			masters++
		}
	}
	b := appendArray(c.out, masters)
	for i := range nodes {
		m := &nodes[i]
		if m.Role != cluster.RolePrimary {
			continue
		}
		b = c.appendMap(b, 2)
		b = appendBulkString(b, "slots")
		b = appendArray(b, 2*len(m.Slots))
		for _, r := range m.Slots {
			b = appendInt(b, int64(r.First))
			b = appendInt(b, int64(r.Last))
		}
		b = appendBulkString(b, "nodes")
		members := append([]*cluster.Node{m}, topo.Replicas(m.ID)...)
		b = appendArray(b, len(members))
		for _, n := range members {
			b = c.appendShardNode(b, n)
		}
	}
	c.out = b
}

// appendShardNode is one node's map in CLUSTER SHARDS.
func (c *client) appendShardNode(b []byte, n *cluster.Node) []byte {
	hostname := net.ParseIP(n.Host) == nil // announced by name: say so, as Redis 7.2 does
	fields := 7
	if hostname {
		fields = 8
	}
	b = c.appendMap(b, fields)
	b = appendBulkString(b, "id")
	b = appendBulkString(b, n.ID)
	b = appendBulkString(b, "port")
	b = appendInt(b, int64(n.Port))
	b = appendBulkString(b, "ip")
	b = appendBulkString(b, n.Host)
	b = appendBulkString(b, "endpoint")
	b = appendBulkString(b, n.Host)
	if hostname {
		b = appendBulkString(b, "hostname")
		b = appendBulkString(b, n.Host)
	}
	b = appendBulkString(b, "role")
	b = appendBulkString(b, n.Role.String())
	b = appendBulkString(b, "replication-offset")
	b = appendInt(b, 0)
	b = appendBulkString(b, "health")
	b = appendBulkString(b, "online")
	return b
}

// clusterNodesText is CLUSTER NODES: one line per node, "<id>
// <host>:<port>@<bus-port> <flags> <master> <ping-sent> <pong-recv>
// <config-epoch> <link-state> <slot ranges>", each ending in "\n". celld
// has no cluster bus, so the bus port is 0 and the ping/pong times are 0.
func (s *Server) clusterNodesText() string {
	topo := s.topo.Load()
	var b strings.Builder
	for i, n := range topo.Nodes() {
		b.WriteString(n.ID + " " + n.Addr() + "@0 ")
		if i == topo.SelfIndex() {
			b.WriteString("myself,")
		}
		if n.Role == cluster.RoleReplica {
			b.WriteString("slave " + n.MasterID)
		} else {
			b.WriteString("master -")
		}
		b.WriteString(" 0 0 " + strconv.Itoa(n.Epoch) + " connected")
		for _, r := range n.Slots {
			b.WriteString(" " + strconv.Itoa(r.First))
			if r.Last != r.First {
				b.WriteString("-" + strconv.Itoa(r.Last))
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func cmdClusterNodes(s *Server, c *client, _ [][]byte) {
	c.out = c.appendVerbatim(c.out, s.clusterNodesText())
}

// cmdClusterInfo answers CLUSTER INFO with Redis 7's fields. A static
// topology always covers every slot, so the state is always ok; under HA
// the state is fail while some slot has no leader or this node is fenced,
// and the epochs are the leaders' (etcd revisions).
func cmdClusterInfo(s *Server, c *client, _ [][]byte) {
	topo := s.topo.Load()
	nodes := topo.Nodes()
	size := 0
	for _, n := range nodes {
		if len(n.Slots) > 0 {
			size++
		}
	}
	epoch := strconv.FormatUint(topo.Epoch(), 10)
	state := "ok"
	if topo.SlotsAssigned() < cluster.SlotCount || topo.Fenced() {
		state = "fail"
	}
	assigned := strconv.Itoa(topo.SlotsAssigned())
	lines := []string{
		"cluster_state:" + state,
		"cluster_slots_assigned:" + assigned,
		"cluster_slots_ok:" + assigned,
		"cluster_slots_pfail:0",
		"cluster_slots_fail:0",
		"cluster_known_nodes:" + strconv.Itoa(len(nodes)),
		"cluster_size:" + strconv.Itoa(size),
		"cluster_current_epoch:" + epoch,
		"cluster_my_epoch:" + strconv.Itoa(topo.Self().Epoch),
		"cluster_stats_messages_sent:0",
		"cluster_stats_messages_received:0",
		"total_cluster_links_buffer_limit_exceeded:0",
	}
	c.out = c.appendVerbatim(c.out, strings.Join(lines, "\r\n")+"\r\n")
}

func cmdClusterMyID(s *Server, c *client, _ [][]byte) {
	c.out = appendBulkString(c.out, s.topo.Load().Self().ID)
}

func cmdClusterKeySlot(s *Server, c *client, args [][]byte) {
	c.out = appendInt(c.out, int64(cluster.KeySlot(args[2])))
}

// cmdClusterCountKeysInSlot walks every key held (O(keys): about 20 ns a
// key, so ~20 ms per million keys, holding one shard lock at a time).
func cmdClusterCountKeysInSlot(s *Server, c *client, args [][]byte) {
	slot, ok := parseRedisInt(args[2])
	if !ok {
		c.out = appendError(c.out, errNotInt)
		return
	}
	if slot < 0 || slot >= cluster.SlotCount {
		c.out = appendError(c.out, "ERR Invalid slot")
		return
	}
	n := int64(0)
	s.dbs.DB(0).EachKey(s.nowMs(), func(key []byte) bool {
		if cluster.KeySlotString(store.KeyString(key)) == int(slot) {
			n++
		}
		return true
	})
	c.out = appendInt(c.out, n)
}

// cmdClusterGetKeysInSlot walks the keys like COUNTKEYSINSLOT, stopping
// once it has count of them.
func cmdClusterGetKeysInSlot(s *Server, c *client, args [][]byte) {
	slot, ok := parseRedisInt(args[2])
	if !ok {
		c.out = appendError(c.out, errNotInt)
		return
	}
	count, ok := parseRedisInt(args[3])
	if !ok {
		c.out = appendError(c.out, errNotInt)
		return
	}
	if slot < 0 || slot >= cluster.SlotCount || count < 0 {
		c.out = appendError(c.out, "ERR Invalid slot or number of keys")
		return
	}
	var keys []string
	if count > 0 {
		s.dbs.DB(0).EachKey(s.nowMs(), func(key []byte) bool {
			if cluster.KeySlotString(store.KeyString(key)) == int(slot) {
				keys = append(keys, string(key))
			}
			return int64(len(keys)) < count
		})
	}
	c.out = appendArray(c.out, len(keys))
	for _, k := range keys {
		c.out = appendBulkString(c.out, k)
	}
}

func cmdClusterHelp(s *Server, c *client, _ [][]byte) {
	lines := []string{
		"CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
		"COUNTKEYSINSLOT <slot>", "    Return the number of keys in <slot>.",
		"GETKEYSINSLOT <slot> <count>", "    Return key names stored by current node in a slot.",
		"INFO", "    Return information about the cluster.",
		"KEYSLOT <key>", "    Return the hash slot for <key>.",
		"MYID", "    Return the node id.",
		"NODES", "    Return cluster configuration seen by node. Output format:",
		"    <id> <ip:port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
		"SLOTS", "    Return information about slots range mappings. Each range is made of:",
		"    start, end, master and replicas IP addresses, ports and ids",
		"SHARDS", "    Return information about slot range mappings and the nodes associated with them.",
		"HELP", "    Prints this help.",
	}
	c.out = appendArray(c.out, len(lines))
	for _, l := range lines {
		c.out = appendSimple(c.out, l)
	}
}

// infoCluster is INFO's Cluster section: Redis's cluster_enabled, then
// celld's routing counters when cluster mode is on.
func (s *Server) infoCluster() []string {
	topo := s.topo.Load()
	if topo == nil {
		return []string{"cluster_enabled:0"}
	}
	lines := []string{
		"cluster_enabled:1",
		"cluster_redirects:" + strconv.FormatInt(s.clusterStats.moved.Load(), 10),
		"cluster_crossslot_errors:" + strconv.FormatInt(s.clusterStats.crossSlot.Load(), 10),
	}
	if topo.HA() {
		fenced := "0"
		if topo.Fenced() {
			fenced = "1"
		}
		lines = append(lines,
			"cluster_epoch:"+strconv.FormatUint(topo.Epoch(), 10),
			"cluster_role:"+topo.Self().Role.String(),
			"cluster_fenced:"+fenced,
			"cluster_down_replies:"+strconv.FormatInt(s.clusterStats.down.Load(), 10))
	}
	return lines
}

// redisMode is INFO's redis_mode and HELLO's mode.
func (s *Server) redisMode() string {
	if s.clusterOn() {
		return "cluster"
	}
	return "standalone"
}

// clusterScriptCheck is the check Redis 7 applies to every command a script
// calls (scriptVerifyClusterState), for a scripting implementation to call
// before running cmd from inside a script: the command's keys must share a
// slot that this node serves, and, unless the script was declared
// allow-cross-slot-keys, the same slot as every key the script touched
// before (*scriptSlot, -1 before the first). It returns "" when the command
// may run, else the error text the script raises (the caller adds Redis's
// "script: <sha>, on @user_script:<line>." suffix). The EVAL itself has
// already been routed by its declared keys in dispatch.
func (s *Server) clusterScriptCheck(cmd *command, args [][]byte, scriptSlot *int, allowCrossSlot bool) string {
	topo := s.topo.Load()
	if topo == nil {
		return ""
	}
	slot, ok := foldKeySlot(cmd, args, -1)
	switch {
	case !ok:
		return "Command '" + cmd.name + "' in script attempted to access keys that don't hash to the same slot"
	case slot < 0:
		return ""
	case !topo.Owns(slot):
		return "Script attempted to access a non local key in a cluster node"
	case allowCrossSlot:
		return ""
	case *scriptSlot < 0:
		*scriptSlot = slot
	case *scriptSlot != slot:
		return "Script attempted to access keys that do not hash to the same slot"
	}
	return ""
}
