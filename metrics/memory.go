package metrics

import (
	"github.com/celld/celld/server"
	"github.com/prometheus/client_golang/prometheus"
)

// The memory bound's metrics (see docs/memory.md), named as
// redis_exporter names Redis's: used and maximum memory in bytes, evicted
// keys, and the policy as a label.

var (
	descMemUsed = prometheus.NewDesc("celld_memory_used_bytes",
		"The keyspace's accounted memory (INFO used_memory), which the maxmemory bound applies to.", nil, nil)
	descMemMax = prometheus.NewDesc("celld_memory_max_bytes",
		"The maxmemory bound in bytes; 0 when there is none.", nil, nil)
	descEvicted = prometheus.NewDesc("celld_evicted_keys_total",
		"Keys evicted to stay under maxmemory (INFO evicted_keys).", nil, nil)
	descPolicy = prometheus.NewDesc("celld_maxmemory_policy_info",
		"The maxmemory-policy in force, as a label; always 1.", []string{"policy"}, nil)
)

// describeMemory and collectMemory are the server collector's memory
// part: the same snapshot as the other server metrics of a scrape.
func describeMemory(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descMemUsed, descMemMax, descEvicted, descPolicy} {
		ch <- d
	}
}

func collectMemory(ch chan<- prometheus.Metric, st *server.Stats) {
	ch <- prometheus.MustNewConstMetric(descMemUsed, prometheus.GaugeValue, float64(st.UsedMemory))
	ch <- prometheus.MustNewConstMetric(descMemMax, prometheus.GaugeValue, float64(st.MaxMemory))
	ch <- prometheus.MustNewConstMetric(descEvicted, prometheus.CounterValue, float64(st.EvictedKeys))
	ch <- prometheus.MustNewConstMetric(descPolicy, prometheus.GaugeValue, 1, st.MaxMemoryPolicy)
}
