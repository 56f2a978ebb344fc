package repl

import (
	"fmt"
	"net"
	"sync"
	"time"
)

// LagBounds are the upper bounds of the replication lag histogram
// (Status.LagCounts; Prometheus's celld_replication_ack_lag_seconds): the
// lag of a batch is from the start of the round before it (the earliest
// its changes can have been made) to the first follower's acknowledgement.
var LagBounds = []time.Duration{
	500 * time.Microsecond, time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond,
	10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond,
	250 * time.Millisecond, 500 * time.Millisecond, time.Second,
}

// lagHistogram counts acknowledged batches by lag. observe is called by
// the ack goroutines (a short mutex: one per acknowledged batch, never on
// a client's path); snapshot by STATUS, INFO and scrapes.
type lagHistogram struct {
	mu     sync.Mutex
	counts [12]uint64 // per bucket of LagBounds, the last for larger lags
	sum    time.Duration
}

func (h *lagHistogram) observe(d time.Duration) {
	i := 0
	for i < len(LagBounds) && d > LagBounds[i] {
		i++
	}
	h.mu.Lock()
	h.counts[i]++
	h.sum += d
	h.mu.Unlock()
}

// snapshot returns cumulative counts (len(LagBounds)+1: the last is the
// total) and the sum.
func (h *lagHistogram) snapshot() ([]uint64, time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]uint64, len(h.counts))
	var c uint64
	for i, n := range h.counts {
		c += n
		out[i] = c
	}
	return out, h.sum
}

// PeerStatus is one connected follower as its leader sees it.
type PeerStatus struct {
	Addr     string        // the follower's address (its replication connection's source)
	Synced   bool          // it holds the snapshot and applies the stream
	Acked    uint64        // the highest batch it acknowledged
	SinceAck time.Duration // since its last acknowledgement (0 before the first)
}

// Info is the lines of INFO's replication section, in Redis's layout
// where a field has a Redis meaning, plus celld's own (repl_*): a leader
// (or a node with no role yet) is role:master with a slave<n> line per
// connected follower; a follower is role:slave, its master_host/port
// being the leader's REPLICATION address. Offsets are batch numbers (the
// round that sent them; rounds without a change send nothing), not bytes:
// a follower's slave_repl_offset equals its leader's master_repl_offset
// once it has applied everything. The
// caller adds master_replid. Safe for concurrent use.
func (n *Node) Info() []string {
	st := n.Status()
	us := func(d time.Duration) int64 { return d.Microseconds() }
	var out []string
	if st.Role == "follower" {
		host, port, _ := net.SplitHostPort(st.Leader)
		link, ago := "down", int64(-1)
		if st.Synced {
			link = "up"
		}
		if !st.LastIO.IsZero() {
			ago = int64(time.Since(st.LastIO) / time.Second)
		}
		syncing := 0
		if !st.Synced {
			syncing = 1
		}
		out = append(out, "role:slave", "master_host:"+host, "master_port:"+port,
			"master_link_status:"+link, fmt.Sprintf("master_last_io_seconds_ago:%d", ago),
			fmt.Sprintf("master_sync_in_progress:%d", syncing),
			fmt.Sprintf("slave_read_repl_offset:%d", st.Acked), fmt.Sprintf("slave_repl_offset:%d", st.Acked),
			"slave_priority:100", "slave_read_only:1", "replica_announced:1", "connected_slaves:0",
			"master_failover_state:no-failover", fmt.Sprintf("master_repl_offset:%d", st.Acked))
	} else {
		out = append(out, "role:master", fmt.Sprintf("connected_slaves:%d", len(st.Peers)))
		for i, p := range st.Peers {
			host, port, _ := net.SplitHostPort(p.Addr)
			state := "wait_bgsave"
			if p.Synced {
				state = "online"
			}
			out = append(out, fmt.Sprintf("slave%d:ip=%s,port=%s,state=%s,offset=%d,lag=%d", i, host, port, state, p.Acked, int64(p.SinceAck/time.Second)))
		}
		out = append(out, "master_failover_state:no-failover", fmt.Sprintf("master_repl_offset:%d", st.LastBatch))
	}
	out = append(out, "master_replid2:0000000000000000000000000000000000000000", "second_repl_offset:-1",
		"repl_backlog_active:0", "repl_backlog_size:0", "repl_backlog_first_byte_offset:0", "repl_backlog_histlen:0",
		"repl_role:"+st.Role, fmt.Sprintf("repl_shard:%d", st.Shard), fmt.Sprintf("repl_epoch:%d", st.Epoch),
		"repl_ack:"+st.Ack, fmt.Sprintf("repl_min_replicas:%d", st.MinReplicas), fmt.Sprintf("repl_max_lag_us:%d", us(st.MaxLag)),
		fmt.Sprintf("repl_synced_followers:%d", st.Followers), fmt.Sprintf("repl_acked_offset:%d", st.Acked),
		fmt.Sprintf("repl_lag_us:%d", us(st.Lag)), fmt.Sprintf("repl_lag_p50_us:%d", us(st.LagP50)), fmt.Sprintf("repl_lag_p99_us:%d", us(st.LagP99)),
		fmt.Sprintf("repl_refused_lag:%d", st.Refused), fmt.Sprintf("repl_refused_no_replicas:%d", st.RefusedNoReplicas),
		fmt.Sprintf("repl_bytes_sent:%d", st.BytesSent), fmt.Sprintf("repl_bytes_received:%d", st.BytesRecv))
	return out
}
