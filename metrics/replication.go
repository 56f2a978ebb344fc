package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Replication's series (--replication, --replicate-from, HA mode;
// docs/replication.md):
//
//	replication_role{role}                  1 for the node's role: none, leader, follower, fenced
//	replication_epoch                       the epoch of the current role
//	replication_connected_followers         followers connected and synced (leader)
//	replication_offset                      the last batch sent (leader) or applied (follower)
//	replication_acked_offset                the highest batch a follower acknowledged (leader)
//	replication_lag_seconds                 age of the oldest unacknowledged change now (leader)
//	replication_ack_lag_seconds             histogram: each batch's lag until a follower acknowledged it
//	replication_refused_writes_total{reason} writes the leader refused: lag (max-replica-lag), no_replicas (min-replicas)
//	replication_sent_bytes_total            bytes streamed to followers
//	replication_received_bytes_total        bytes read from the leader
//	replication_synced                      1 while a follower holds its leader's snapshot and applies the stream

// Replication is a snapshot of the node's replication (main converts the
// repl package's Status: this package does not import it).
type Replication struct {
	Role                   string // "none", "leader", "follower", "fenced"
	Epoch                  uint64
	Followers              int
	Offset, AckedOffset    uint64
	LagSeconds             float64
	LagBuckets             map[float64]uint64 // upper bound in seconds → cumulative count
	LagCount               uint64
	LagSum                 float64 // seconds
	RefusedLag, RefusedMin int64
	SentBytes, RecvBytes   int64
	Synced                 bool
}

var (
	descReplRole      = prometheus.NewDesc("celld_replication_role", "1 for the node's replication role: none, leader, follower or fenced.", []string{"role"}, nil)
	descReplEpoch     = prometheus.NewDesc("celld_replication_epoch", "The epoch (fencing token) of the node's current replication role.", nil, nil)
	descReplFollowers = prometheus.NewDesc("celld_replication_connected_followers", "Followers connected to this leader that hold its snapshot and apply its stream.", nil, nil)
	descReplOffset    = prometheus.NewDesc("celld_replication_offset", "The last batch of changes sent (leader) or applied (follower).", nil, nil)
	descReplAcked     = prometheus.NewDesc("celld_replication_acked_offset", "The highest batch a follower acknowledged (leader).", nil, nil)
	descReplLag       = prometheus.NewDesc("celld_replication_lag_seconds", "Age of the oldest change no follower has acknowledged, now (leader; 0 when none).", nil, nil)
	descReplAckLag    = prometheus.NewDesc("celld_replication_ack_lag_seconds", "Each batch's lag from the earliest its changes can have been made to a follower's acknowledgement.", nil, nil)
	descReplRefused   = prometheus.NewDesc("celld_replication_refused_writes_total", "Writes the leader refused: reason lag (-TRYAGAIN, past --max-replica-lag) or no_replicas (-NOREPLICAS, under --min-replicas).", []string{"reason"}, nil)
	descReplSent      = prometheus.NewDesc("celld_replication_sent_bytes_total", "Bytes streamed to followers.", nil, nil)
	descReplRecv      = prometheus.NewDesc("celld_replication_received_bytes_total", "Bytes read from the leader.", nil, nil)
	descReplSynced    = prometheus.NewDesc("celld_replication_synced", "1 while this follower holds its leader's snapshot and applies the stream.", nil, nil)
)

// SetReplication turns on the replication series; fn is called once per
// scrape. Call it once.
func (e *Exporter) SetReplication(fn func() Replication) {
	e.reg.MustRegister(replCollector{fn})
}

type replCollector struct{ fn func() Replication }

func (c replCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descReplRole, descReplEpoch, descReplFollowers, descReplOffset, descReplAcked,
		descReplLag, descReplAckLag, descReplRefused, descReplSent, descReplRecv, descReplSynced} {
		ch <- d
	}
}

func (c replCollector) Collect(ch chan<- prometheus.Metric) {
	r := c.fn()
	gauge := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	counter := func(d *prometheus.Desc, v int64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), l...)
	}
	for _, role := range []string{"none", "leader", "follower", "fenced"} {
		v := 0.0
		if role == r.Role {
			v = 1
		}
		gauge(descReplRole, v, role)
	}
	gauge(descReplEpoch, float64(r.Epoch))
	gauge(descReplFollowers, float64(r.Followers))
	gauge(descReplOffset, float64(r.Offset))
	gauge(descReplAcked, float64(r.AckedOffset))
	gauge(descReplLag, r.LagSeconds)
	ch <- prometheus.MustNewConstHistogram(descReplAckLag, r.LagCount, r.LagSum, r.LagBuckets)
	counter(descReplRefused, r.RefusedLag, "lag")
	counter(descReplRefused, r.RefusedMin, "no_replicas")
	counter(descReplSent, r.SentBytes)
	counter(descReplRecv, r.RecvBytes)
	synced := 0.0
	if r.Synced {
		synced = 1
	}
	gauge(descReplSynced, synced)
}
