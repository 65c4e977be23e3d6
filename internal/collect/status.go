package collect

import (
	"context"
	"database/sql"
	"strconv"
	"strings"

	"github.com/gapscope/gapscope/internal/event"
)

// StatusCollector turns SHOW GLOBAL STATUS into samples: every numeric
// counter or gauge (Threads_running, Threads_connected, Questions, Com_*,
// Innodb_*, ...). ON/OFF values read as 1/0; text values are skipped.
type StatusCollector struct{}

func (StatusCollector) Name() string             { return "global_status" }
func (StatusCollector) Supports(ServerInfo) bool { return true }

func (StatusCollector) Collect(ctx context.Context, db *sql.DB) ([]event.Sample, error) {
	st, err := GlobalStatus(ctx, db)
	if err != nil {
		return nil, err
	}
	return statusSamples(st), nil
}

func statusSamples(st map[string]string) []event.Sample {
	out := make([]event.Sample, 0, len(st))
	for k, v := range st {
		f, ok := numericStatus(v)
		if !ok {
			continue
		}
		out = append(out, event.Sample{Name: k, Value: f})
	}
	return out
}

func numericStatus(v string) (float64, bool) {
	switch strings.ToUpper(v) {
	case "ON", "YES":
		return 1, true
	case "OFF", "NO":
		return 0, true
	}
	f, err := strconv.ParseFloat(v, 64)
	return f, err == nil
}

// ProcesslistCollector samples each client connection's time in its current
// command (time_ms), labelled with id, user, host, command and state.
type ProcesslistCollector struct{}

func (ProcesslistCollector) Name() string             { return "processlist" }
func (ProcesslistCollector) Supports(ServerInfo) bool { return true }

func (ProcesslistCollector) Collect(ctx context.Context, db *sql.DB) ([]event.Sample, error) {
	procs, err := Processlist(ctx, db)
	if err != nil {
		return nil, err
	}
	out := make([]event.Sample, 0, len(procs))
	for _, p := range procs {
		out = append(out, event.Sample{Name: "time_ms", Value: float64(p.TimeMS), Labels: map[string]string{
			"id": strconv.FormatUint(p.ID, 10), "user": p.User, "host": p.Host,
			"command": p.Command, "state": p.State,
		}})
	}
	return out, nil
}

// ThreadsCollector samples the THREAD_ID -> PROCESSLIST_ID map (value =
// PROCESSLIST_ID, label thread_id), so that stored samples can be joined.
type ThreadsCollector struct{}

func (ThreadsCollector) Name() string               { return "threads" }
func (ThreadsCollector) Supports(s ServerInfo) bool { return s.PerformanceSchema }

func (ThreadsCollector) Collect(ctx context.Context, db *sql.DB) ([]event.Sample, error) {
	m, err := Threads(ctx, db)
	if err != nil {
		return nil, err
	}
	out := make([]event.Sample, 0, len(m))
	for tid, pid := range m {
		out = append(out, event.Sample{Name: "processlist_id", Value: float64(pid),
			Labels: map[string]string{"thread_id": strconv.FormatUint(tid, 10)}})
	}
	return out, nil
}
