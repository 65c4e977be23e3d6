package collect

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"

	"github.com/gapscope/gapscope/internal/event"
)

// MariaDB's thread pool tables (information_schema, 10.5+). Note what they
// cannot show (measured in the thread-pool case, docs/field-reports.md): a
// request waiting for a listener is invisible here (QUEUE_LENGTH 0, no
// QUEUES row); only the wire shows that wait.

// ThreadPoolGroups reads information_schema.THREAD_POOL_GROUPS.
func ThreadPoolGroups(ctx context.Context, db queryer) ([]PoolGroup, error) {
	var out []PoolGroup
	err := scanAll(ctx, db, "THREAD_POOL_GROUPS", Mark+" SELECT GROUP_ID, CONNECTIONS, THREADS, ACTIVE_THREADS, STANDBY_THREADS, QUEUE_LENGTH, HAS_LISTENER, IS_STALLED FROM information_schema.THREAD_POOL_GROUPS",
		func(rows *sql.Rows) error {
			var g PoolGroup
			err := rows.Scan(&g.GroupID, &g.Connections, &g.Threads, &g.ActiveThreads, &g.StandbyThreads, &g.QueueLength, &g.HasListener, &g.IsStalled)
			out = append(out, g)
			return err
		})
	return out, err
}

// ThreadPoolQueues reads information_schema.THREAD_POOL_QUEUES.
func ThreadPoolQueues(ctx context.Context, db queryer) ([]PoolQueued, error) {
	var out []PoolQueued
	err := scanAll(ctx, db, "THREAD_POOL_QUEUES", Mark+" SELECT GROUP_ID, POSITION, PRIORITY, CONNECTION_ID, QUEUEING_TIME_MICROSECONDS FROM information_schema.THREAD_POOL_QUEUES",
		func(rows *sql.Rows) error {
			var q PoolQueued
			var conn sql.NullInt64
			err := rows.Scan(&q.GroupID, &q.Position, &q.Priority, &conn, &q.QueueingUS)
			q.ConnectionID = uint64(conn.Int64)
			out = append(out, q)
			return err
		})
	return out, err
}

// ThreadPoolStats reads information_schema.THREAD_POOL_STATS.
func ThreadPoolStats(ctx context.Context, db queryer) ([]PoolStats, error) {
	var out []PoolStats
	err := scanAll(ctx, db, "THREAD_POOL_STATS", Mark+" SELECT GROUP_ID, THREAD_CREATIONS, THREAD_CREATIONS_DUE_TO_STALL, WAKES, WAKES_DUE_TO_STALL, THROTTLES, STALLS, POLLS_BY_LISTENER, POLLS_BY_WORKER, DEQUEUES_BY_LISTENER, DEQUEUES_BY_WORKER FROM information_schema.THREAD_POOL_STATS",
		func(rows *sql.Rows) error {
			var s PoolStats
			err := rows.Scan(&s.GroupID, &s.ThreadCreations, &s.ThreadCreationsDueToStall, &s.Wakes, &s.WakesDueToStall,
				&s.Throttles, &s.Stalls, &s.PollsByListener, &s.PollsByWorker, &s.DequeuesByListener, &s.DequeuesByWorker)
			out = append(out, s)
			return err
		})
	return out, err
}

// ThreadPoolWaits reads information_schema.THREAD_POOL_WAITS: how often
// workers waited, by reason (NET, ROW_LOCK, DISKIO, ...).
func ThreadPoolWaits(ctx context.Context, db queryer) (map[string]int64, error) {
	out := map[string]int64{}
	err := scanAll(ctx, db, "THREAD_POOL_WAITS", Mark+" SELECT REASON, COUNT FROM information_schema.THREAD_POOL_WAITS",
		func(rows *sql.Rows) error {
			var r string
			var n int64
			err := rows.Scan(&r, &n)
			out[r] = n
			return err
		})
	return out, err
}

func scanAll(ctx context.Context, db queryer, what, query string, scan func(*sql.Rows) error) error {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return fmt.Errorf("reading %s: %w", what, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return fmt.Errorf("reading %s: %w", what, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reading %s: %w", what, err)
	}
	return nil
}

func poolSupported(s ServerInfo) bool { return s.ThreadPoolTables }

func groupLabel(g int) map[string]string { return map[string]string{"group": strconv.Itoa(g)} }

// PoolGroupsCollector samples each thread-pool group's gauges.
type PoolGroupsCollector struct{}

func (PoolGroupsCollector) Name() string               { return "thread_pool_groups" }
func (PoolGroupsCollector) Supports(s ServerInfo) bool { return poolSupported(s) }

func (PoolGroupsCollector) Collect(ctx context.Context, db *sql.DB) ([]event.Sample, error) {
	groups, err := ThreadPoolGroups(ctx, db)
	if err != nil {
		return nil, err
	}
	var out []event.Sample
	for _, g := range groups {
		l := groupLabel(g.GroupID)
		for _, kv := range []struct {
			n string
			v int
		}{{"connections", g.Connections}, {"threads", g.Threads}, {"active_threads", g.ActiveThreads},
			{"standby_threads", g.StandbyThreads}, {"queue_length", g.QueueLength},
			{"has_listener", b2i(g.HasListener)}, {"is_stalled", b2i(g.IsStalled)}} {
			out = append(out, event.Sample{Name: kv.n, Value: float64(kv.v), Labels: l})
		}
	}
	return out, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// PoolQueuesCollector samples each queued connection's queueing time.
type PoolQueuesCollector struct{}

func (PoolQueuesCollector) Name() string               { return "thread_pool_queues" }
func (PoolQueuesCollector) Supports(s ServerInfo) bool { return poolSupported(s) }

func (PoolQueuesCollector) Collect(ctx context.Context, db *sql.DB) ([]event.Sample, error) {
	qs, err := ThreadPoolQueues(ctx, db)
	if err != nil {
		return nil, err
	}
	out := make([]event.Sample, 0, len(qs))
	for _, q := range qs {
		out = append(out, event.Sample{Name: "queueing_us", Value: float64(q.QueueingUS), Labels: map[string]string{
			"group": strconv.Itoa(q.GroupID), "connection_id": strconv.FormatUint(q.ConnectionID, 10),
			"position": strconv.Itoa(q.Position), "priority": strconv.Itoa(q.Priority),
		}})
	}
	return out, nil
}

// PoolStatsCollector samples each group's counters (stalls, throttles, ...).
type PoolStatsCollector struct{}

func (PoolStatsCollector) Name() string               { return "thread_pool_stats" }
func (PoolStatsCollector) Supports(s ServerInfo) bool { return poolSupported(s) }

func (PoolStatsCollector) Collect(ctx context.Context, db *sql.DB) ([]event.Sample, error) {
	stats, err := ThreadPoolStats(ctx, db)
	if err != nil {
		return nil, err
	}
	var out []event.Sample
	for _, s := range stats {
		l := groupLabel(s.GroupID)
		for _, kv := range []struct {
			n string
			v int64
		}{{"thread_creations", s.ThreadCreations}, {"thread_creations_due_to_stall", s.ThreadCreationsDueToStall},
			{"wakes", s.Wakes}, {"wakes_due_to_stall", s.WakesDueToStall}, {"throttles", s.Throttles},
			{"stalls", s.Stalls}, {"polls_by_listener", s.PollsByListener}, {"polls_by_worker", s.PollsByWorker},
			{"dequeues_by_listener", s.DequeuesByListener}, {"dequeues_by_worker", s.DequeuesByWorker}} {
			out = append(out, event.Sample{Name: kv.n, Value: float64(kv.v), Labels: l})
		}
	}
	return out, nil
}

// PoolWaitsCollector samples THREAD_POOL_WAITS counts by reason.
type PoolWaitsCollector struct{}

func (PoolWaitsCollector) Name() string               { return "thread_pool_waits" }
func (PoolWaitsCollector) Supports(s ServerInfo) bool { return poolSupported(s) }

func (PoolWaitsCollector) Collect(ctx context.Context, db *sql.DB) ([]event.Sample, error) {
	waits, err := ThreadPoolWaits(ctx, db)
	if err != nil {
		return nil, err
	}
	out := make([]event.Sample, 0, len(waits))
	for r, n := range waits {
		out = append(out, event.Sample{Name: "waits", Value: float64(n), Labels: map[string]string{"reason": r}})
	}
	return out, nil
}
