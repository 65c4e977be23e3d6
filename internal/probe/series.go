package probe

// Point is one probe run: the canary's latencies beside the concurrency the
// server reported while it ran. It is the unit the knee fit and the charts
// (gapscope report) work on.
type Point struct {
	// TimeUS is when the run started (Unix µs); DurationUS how long it took.
	TimeUS     int64 `json:"t"`
	DurationUS int64 `json:"duration_us"`
	// Calls is the number of repetitions timed (the canary's --repeat).
	Calls int `json:"calls"`
	// Latency of one repetition (µs).
	MinUS    int64 `json:"min_us"`
	AvgUS    int64 `json:"avg_us"`
	MedianUS int64 `json:"median_us"`
	MaxUS    int64 `json:"max_us"`
	// ThreadsRunning is the mean of Threads_running over the status reads
	// taken during the run, less the read's own statement;
	// ThreadsRunningMax the highest such read.
	ThreadsRunning    float64 `json:"threads_running"`
	ThreadsRunningMax int64   `json:"threads_running_max"`
	// ThreadsConnected is the mean of Threads_connected as the server
	// reports it: it counts the canary's connection, and the monitor's
	// unless that came through the thread pool's extra port (MariaDB leaves
	// those out).
	ThreadsConnected float64 `json:"threads_connected"`
	// PoolQueue is the mean, PoolQueueMax the highest, of the thread pool's
	// queued requests summed over groups (THREAD_POOL_GROUPS.QUEUE_LENGTH);
	// zero without a thread pool. Requests waiting for a listener are not
	// counted there (the thread-pool case, docs/field-reports.md), so this
	// undercounts.
	PoolQueue    float64 `json:"pool_queue"`
	PoolQueueMax int64   `json:"pool_queue_max"`
	// Samples is the number of status reads behind the thread figures.
	Samples int `json:"samples"`
	// Load is the number of load connections a lab applied (0 otherwise).
	Load int `json:"load,omitempty"`
}

// Series is a probe's points in time order.
type Series struct {
	Name   string  `json:"name"`
	Points []Point `json:"points"`
}

// Knee fits the runs' median latency against their mean Threads_running.
// The median of a run's repetitions resists the one repetition that hit a
// checkpoint or a purge.
func (s Series) Knee(o KneeOptions) Knee {
	x := make([]float64, len(s.Points))
	y := make([]float64, len(s.Points))
	for i, p := range s.Points {
		x[i], y[i] = p.ThreadsRunning, float64(p.MedianUS)
	}
	return FitKnee(x, y, o)
}
