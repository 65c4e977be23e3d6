package collect

import (
	"context"
	"database/sql"
	"fmt"
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
