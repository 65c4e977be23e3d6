package overhead

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/gapscope/gapscope/internal/collect"
)

// Settings are the server settings the configurations change, read before
// a run so that every change can be undone, and read again after it to
// prove the undoing worked.
type Settings struct {
	PerfSchema bool `json:"performance_schema"`
	// Instruments maps setup_instruments NAME to its flags.
	Instruments map[string]Instrument `json:"-"`
	// Consumers maps setup_consumers NAME to ENABLED.
	Consumers map[string]bool `json:"consumers,omitempty"`
	// Timers maps setup_timers NAME to TIMER_NAME (watch switches waits
	// to NANOSECOND).
	Timers map[string]string `json:"timers,omitempty"`
	// InnoDBMetrics are the INNODB_METRICS counters that are on.
	InnoDBMetrics  []string `json:"innodb_metrics"`
	OptimizerTrace string   `json:"optimizer_trace"`
}

// Instrument is one setup_instruments row's flags.
type Instrument struct{ Enabled, Timed bool }

// ReadSettings reads the settings from the server.
func ReadSettings(ctx context.Context, db *sql.DB) (Settings, error) {
	var s Settings
	var ps string
	if err := db.QueryRowContext(ctx, collect.Mark+" SELECT @@GLOBAL.performance_schema, @@GLOBAL.optimizer_trace").Scan(&ps, &s.OptimizerTrace); err != nil {
		return s, fmt.Errorf("reading performance_schema and optimizer_trace: %w", err)
	}
	s.PerfSchema = ps == "1" || strings.EqualFold(ps, "ON")
	var err error
	if s.InnoDBMetrics, err = readStrings(ctx, db, collect.Mark+" SELECT NAME FROM information_schema.INNODB_METRICS WHERE ENABLED = 1 ORDER BY NAME"); err != nil {
		return s, fmt.Errorf("reading INNODB_METRICS: %w", err)
	}
	if !s.PerfSchema {
		return s, nil
	}
	if s.Instruments, err = readInstruments(ctx, db); err != nil {
		return s, err
	}
	if s.Consumers, err = readFlags(ctx, db, "setup_consumers", "ENABLED"); err != nil {
		return s, err
	}
	if s.Timers, err = readPairs(ctx, db, "SELECT NAME, TIMER_NAME FROM performance_schema.setup_timers"); err != nil {
		// MySQL 8 has no setup_timers: its timers are fixed.
		s.Timers = nil
	}
	return s, nil
}

func readStrings(ctx context.Context, db *sql.DB, query string) ([]string, error) {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

func readPairs(ctx context.Context, db *sql.DB, query string) (map[string]string, error) {
	rows, err := db.QueryContext(ctx, collect.Mark+" "+query)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, rows.Err()
}

func readFlags(ctx context.Context, db *sql.DB, table, col string) (map[string]bool, error) {
	pairs, err := readPairs(ctx, db, "SELECT NAME, "+col+" FROM performance_schema."+table)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", table, err)
	}
	out := make(map[string]bool, len(pairs))
	for k, v := range pairs {
		out[k] = v == "YES"
	}
	return out, nil
}

func readInstruments(ctx context.Context, db *sql.DB) (map[string]Instrument, error) {
	rows, err := db.QueryContext(ctx, collect.Mark+" SELECT NAME, ENABLED, TIMED FROM performance_schema.setup_instruments")
	if err != nil {
		return nil, fmt.Errorf("reading setup_instruments: %w", err)
	}
	defer rows.Close()
	out := map[string]Instrument{}
	for rows.Next() {
		var name, en, timed string
		if err := rows.Scan(&name, &en, &timed); err != nil {
			return nil, fmt.Errorf("reading setup_instruments: %w", err)
		}
		out[name] = Instrument{Enabled: en == "YES", Timed: timed == "YES"}
	}
	return out, rows.Err()
}

// Diff lists what differs between s (the original) and now, one line per
// setting class, empty when they are the same.
func (s Settings) Diff(now Settings) []string {
	var out []string
	if s.PerfSchema != now.PerfSchema {
		out = append(out, fmt.Sprintf("performance_schema %v, was %v", now.PerfSchema, s.PerfSchema))
	}
	if n := countDiff(s.Instruments, now.Instruments); n > 0 {
		out = append(out, fmt.Sprintf("%d setup_instruments rows differ", n))
	}
	if n := countDiff(s.Consumers, now.Consumers); n > 0 {
		out = append(out, fmt.Sprintf("%d setup_consumers rows differ", n))
	}
	if n := countDiff(s.Timers, now.Timers); n > 0 {
		out = append(out, fmt.Sprintf("%d setup_timers rows differ", n))
	}
	if !slices.Equal(s.InnoDBMetrics, now.InnoDBMetrics) {
		out = append(out, fmt.Sprintf("%d INNODB_METRICS counters on, were %d", len(now.InnoDBMetrics), len(s.InnoDBMetrics)))
	}
	if s.OptimizerTrace != now.OptimizerTrace {
		out = append(out, fmt.Sprintf("optimizer_trace %q, was %q", now.OptimizerTrace, s.OptimizerTrace))
	}
	return out
}

func countDiff[V comparable](a, b map[string]V) int {
	n := 0
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			n++
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			n++
		}
	}
	return n
}

// inBatch bounds the names in one UPDATE ... WHERE NAME IN (...).
const inBatch = 200

// restoreInstruments puts every setup_instruments row back to its original
// flags, grouped by flag combination so no instrument is ever switched off
// that was on (a blanket reset would open a gap in what others monitor).
func restoreInstruments(ctx context.Context, db *sql.DB, orig map[string]Instrument) error {
	groups := map[Instrument][]string{}
	for name, f := range orig {
		groups[f] = append(groups[f], name)
	}
	for f, names := range groups {
		set := fmt.Sprintf("ENABLED = '%s', TIMED = '%s'", yesNo(f.Enabled), yesNo(f.Timed))
		if err := updateNames(ctx, db, "setup_instruments", set, names); err != nil {
			return err
		}
	}
	return nil
}

// restoreConsumers puts setup_consumers back as they were.
func restoreConsumers(ctx context.Context, db *sql.DB, orig map[string]bool) error {
	for _, on := range []bool{true, false} {
		var names []string
		for name, v := range orig {
			if v == on {
				names = append(names, name)
			}
		}
		if err := updateNames(ctx, db, "setup_consumers", "ENABLED = '"+yesNo(on)+"'", names); err != nil {
			return err
		}
	}
	return nil
}

// restoreTimers puts setup_timers back as they were.
func restoreTimers(ctx context.Context, db *sql.DB, orig map[string]string) error {
	for _, name := range slices.Sorted(maps.Keys(orig)) {
		_, err := db.ExecContext(ctx, collect.Mark+" UPDATE performance_schema.setup_timers SET TIMER_NAME = ? WHERE NAME = ?", orig[name], name)
		if err != nil {
			return fmt.Errorf("restoring setup_timers %s: %w", name, err)
		}
	}
	return nil
}

// updateNames runs UPDATE performance_schema.table SET set WHERE NAME IN
// (names) in batches, names passed as parameters.
func updateNames(ctx context.Context, db *sql.DB, table, set string, names []string) error {
	sort.Strings(names)
	for len(names) > 0 {
		n := min(len(names), inBatch)
		args := make([]any, n)
		for i := range n {
			args[i] = names[i]
		}
		q := collect.Mark + " UPDATE performance_schema." + table + " SET " + set + " WHERE NAME IN (?" + strings.Repeat(",?", n-1) + ")"
		if _, err := db.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("updating %s: %w", table, err)
		}
		names = names[n:]
	}
	return nil
}

// restoreInnoDBMetrics turns every counter off, then the original ones on
// again: innodb_monitor_enable takes one name (or module, or 'all') at a
// time, so this is the only way back from 'all'.
func restoreInnoDBMetrics(ctx context.Context, db *sql.DB, orig []string) error {
	if _, err := db.ExecContext(ctx, collect.Mark+" SET GLOBAL innodb_monitor_disable = 'all'"); err != nil {
		return fmt.Errorf("restoring INNODB_METRICS: %w", err)
	}
	for _, name := range orig {
		if _, err := db.ExecContext(ctx, collect.Mark+" SET GLOBAL innodb_monitor_enable = ?", name); err != nil {
			return fmt.Errorf("restoring INNODB_METRICS counter %s: %w", name, err)
		}
	}
	return nil
}

func yesNo(b bool) string {
	if b {
		return "YES"
	}
	return "NO"
}
