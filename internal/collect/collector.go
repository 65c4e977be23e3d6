package collect

import (
	"context"
	"database/sql"
	"time"

	"github.com/gapscope/gapscope/internal/event"
)

// Collector reads one data source into samples. Collectors are small and
// independent; a Registry gates them by server and times each run.
type Collector interface {
	Name() string
	// Supports reports whether the server has this source (flavour,
	// version, performance_schema, thread pool).
	Supports(ServerInfo) bool
	Collect(ctx context.Context, db *sql.DB) ([]event.Sample, error)
}

// CollectorStats is one collector run: how long it took, whether it worked.
type CollectorStats struct {
	Name       string `json:"name"`
	DurationUS int64  `json:"duration_us"`
	Samples    int    `json:"samples"`
	OK         bool   `json:"ok"`
	Skipped    bool   `json:"skipped,omitempty"` // not supported by this server
	Error      string `json:"error,omitempty"`
}

// Registry runs a set of collectors against one server.
type Registry struct {
	collectors []Collector
	now        func() time.Time
}

// NewRegistry returns a registry of the given collectors (DefaultCollectors
// when none are given).
func NewRegistry(cs ...Collector) *Registry {
	if len(cs) == 0 {
		cs = DefaultCollectors()
	}
	return &Registry{collectors: cs, now: time.Now}
}

// DefaultCollectors returns every sample collector gapscope has.
func DefaultCollectors() []Collector {
	return []Collector{
		StatusCollector{}, ProcesslistCollector{}, ThreadsCollector{},
		PoolGroupsCollector{}, PoolQueuesCollector{}, PoolStatsCollector{}, PoolWaitsCollector{},
		DigestCollector{}, InnoDBStatsCollector{},
	}
}

// Collectors returns the registered collectors.
func (r *Registry) Collectors() []Collector { return r.collectors }

// Collect runs every collector the server supports, one after another (a
// monitor should not add concurrency to the server it measures). A failing
// collector is reported in its stats and does not stop the others. Samples
// without a time get the time their collector started.
func (r *Registry) Collect(ctx context.Context, db *sql.DB, info ServerInfo) ([]event.Sample, []CollectorStats) {
	var all []event.Sample
	stats := make([]CollectorStats, 0, len(r.collectors))
	for _, c := range r.collectors {
		st := CollectorStats{Name: c.Name()}
		if !c.Supports(info) {
			st.Skipped = true
			stats = append(stats, st)
			continue
		}
		start := r.now()
		samples, err := c.Collect(ctx, db)
		st.DurationUS = r.now().Sub(start).Microseconds()
		st.OK, st.Samples = err == nil, len(samples)
		if err != nil {
			st.Error = err.Error()
		}
		for i := range samples {
			if samples[i].TimeUS == 0 {
				samples[i].TimeUS = start.UnixMicro()
			}
			if samples[i].Source == "" {
				samples[i].Source = c.Name()
			}
		}
		all = append(all, samples...)
		stats = append(stats, st)
	}
	return all, stats
}
