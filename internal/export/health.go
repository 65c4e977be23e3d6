package export

import (
	"sync"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/watch"
	"github.com/prometheus/client_golang/prometheus"
)

// healthCollector exposes watch's own coverage and cost from its latest
// snapshot. Watch keeps these totals itself; the collector only reports
// them, so they are exact whatever the scrape interval.
type healthCollector struct {
	mu sync.Mutex
	h  watch.Health
}

var (
	seenDesc = prometheus.NewDesc("gapscope_statements_seen_total",
		"Statements watch reported (joined or not), every digest included.", nil, nil)
	joinedAllDesc = prometheus.NewDesc("gapscope_statements_joined_all_total",
		"Statements joined with their performance_schema row, every digest included.", nil, nil)
	unjoinedDesc = prometheus.NewDesc("gapscope_statements_unjoined_total",
		"Statements left without a server-side half, by reason.", []string{"reason"}, nil)
	queueDropsDesc = prometheus.NewDesc("gapscope_wire_statements_dropped_total",
		"Wire statements dropped because the joiner's queue was full.", nil, nil)
	packetsDesc = prometheus.NewDesc("gapscope_packets_dropped_total",
		"Packets the capture lost (kernel ring and tracker queue); known when the capture stops.", nil, nil)
	ringLostDesc = prometheus.NewDesc("gapscope_ring_rows_lost_total",
		"performance_schema history rows overwritten before watch read them.", nil, nil)
	cpuDesc = prometheus.NewDesc("gapscope_cpu_seconds_total",
		"CPU time (user + system) gapscope's process used.", nil, nil)
)

// unjoinedReasons are always exported, zero or not, so that rate() works
// from the first scrape: the reasons a statement stays unjoined, and a
// replica's binlog stream, reported as such (event.UnjoinedReasons lists
// only the former).
var unjoinedReasons = event.UnjoinedReasons()

func (c *healthCollector) set(h watch.Health) {
	c.mu.Lock()
	defer c.mu.Unlock()
	// PacketsDropped is known only at the end: keep the last known value
	// rather than go back to 0.
	h.PacketsDropped = max(h.PacketsDropped, c.h.PacketsDropped)
	c.h = h
}

func (c *healthCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{seenDesc, joinedAllDesc, unjoinedDesc, queueDropsDesc, packetsDesc, ringLostDesc, cpuDesc} {
		ch <- d
	}
}

func (c *healthCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	h := c.h
	c.mu.Unlock()
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	counter(seenDesc, float64(h.Statements))
	counter(joinedAllDesc, float64(h.Joined))
	for _, r := range unjoinedReasons {
		counter(unjoinedDesc, float64(h.Unjoined[r.String()]), r.String())
	}
	counter(queueDropsDesc, float64(h.QueueDrops))
	counter(packetsDesc, float64(h.PacketsDropped))
	counter(ringLostDesc, float64(h.RingLost))
	counter(cpuDesc, h.CPUSeconds)
}
