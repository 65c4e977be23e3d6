package collect

import (
	"context"
	"database/sql"
	"fmt"
)

// Instruments counts the setup_instruments rows of one class.
type Instruments struct {
	Total   int `json:"total"`
	Enabled int `json:"enabled"`
	Timed   int `json:"timed"`
}

// Capabilities is what the server offers gapscope, read once; the rules
// that judge it live in package diagnose (gather, then decide).
type Capabilities struct {
	Server    ServerInfo
	Consumers map[string]bool // setup_consumers NAME -> ENABLED
	// Instruments counts setup_instruments by class: the first part of the
	// name ("statement", "stage", "memory", "idle"), two parts for waits
	// ("wait/synch", "wait/lock") and three for I/O waits ("wait/io/socket",
	// "wait/io/file"), because their costs and uses differ.
	Instruments map[string]Instruments
	Grants      []string          // SHOW GRANTS lines
	PoolTables  map[string]string // THREAD_POOL_* table -> "" or the read error
}

// GatherCapabilities reads what Check needs; missing privileges become
// evidence, not errors, so that check still reports what it can.
func GatherCapabilities(ctx context.Context, db *sql.DB) (Capabilities, error) {
	info, err := DetectServer(ctx, db)
	if err != nil {
		return Capabilities{}, err
	}
	c := Capabilities{Server: info, Instruments: map[string]Instruments{}, PoolTables: map[string]string{}}
	if c.Grants, err = readGrants(ctx, db); err != nil {
		return c, err
	}
	if info.PerformanceSchema {
		c.Consumers = readConsumers(ctx, db)
		c.Instruments = InstrumentClasses(ctx, db)
	}
	if info.ThreadPoolTables {
		for _, t := range PoolTables {
			c.PoolTables[t] = ""
			if _, err := db.ExecContext(ctx, Mark+" SELECT 1 FROM information_schema."+t+" LIMIT 1"); err != nil {
				c.PoolTables[t] = err.Error()
			}
		}
	}
	return c, nil
}

// PoolTables are the thread-pool tables gapscope reads.
var PoolTables = []string{"THREAD_POOL_GROUPS", "THREAD_POOL_QUEUES", "THREAD_POOL_STATS", "THREAD_POOL_WAITS"}

func readGrants(ctx context.Context, db queryer) ([]string, error) {
	rows, err := db.QueryContext(ctx, Mark+" SHOW GRANTS")
	if err != nil {
		return nil, fmt.Errorf("reading grants: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var g string
		if err := rows.Scan(&g); err != nil {
			return nil, fmt.Errorf("reading grants: %w", err)
		}
		out = append(out, g)
	}
	return out, rows.Err()
}

func readConsumers(ctx context.Context, db queryer) map[string]bool {
	pairs, err := readPairs(ctx, db, Mark+" SELECT NAME, ENABLED FROM performance_schema.setup_consumers", "setup_consumers")
	if err != nil {
		return nil
	}
	out := map[string]bool{}
	for k, v := range pairs {
		out[k] = isOn(v)
	}
	return out
}

// instrumentClass names an instrument's class as Capabilities.Instruments
// keys it.
const instrumentClass = `CASE WHEN NAME LIKE 'wait/io/%' THEN SUBSTRING_INDEX(NAME, '/', 3)
	WHEN NAME LIKE 'wait/%' THEN SUBSTRING_INDEX(NAME, '/', 2) ELSE SUBSTRING_INDEX(NAME, '/', 1) END`

// InstrumentClasses counts setup_instruments by class (see
// Capabilities.Instruments); an unreadable table leaves the map empty, and
// the rules then stay silent about instruments.
func InstrumentClasses(ctx context.Context, db queryer) map[string]Instruments {
	out := map[string]Instruments{}
	rows, err := db.QueryContext(ctx, Mark+" SELECT "+instrumentClass+" AS class, COUNT(*), SUM(ENABLED = 'YES'), SUM(TIMED = 'YES') FROM performance_schema.setup_instruments GROUP BY class")
	if err != nil {
		return out
	}
	defer rows.Close()
	for rows.Next() {
		var class string
		var n Instruments
		var en, tm sql.NullInt64
		if rows.Scan(&class, &n.Total, &en, &tm) != nil {
			return out
		}
		n.Enabled, n.Timed = int(en.Int64), int(tm.Int64)
		out[class] = n
	}
	return out
}
