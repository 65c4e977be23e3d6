package watch

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"github.com/gapscope/gapscope/internal/collect"
)

// neededConsumers are what watch reads: the long history, for statements
// and the clock's marker statement; current, without which no history is
// recorded; and the per-thread history, where the statements that stand
// out are read (the last 10 of each thread survive however fast the long
// history turns over).
var neededConsumers = []string{collect.SourceCurrent, collect.SourceHistoryLong, collect.SourceHistory}

// prepareConsumers returns the statement history table to read, enabling
// missing consumers when enable allows (restore undoes that, nil when it
// enabled nothing; caps then says they are on), or "" (wire only) with a
// note saying how to enable them. Without the per-thread history alone,
// it reads history_long and says what is lost.
func prepareConsumers(ctx context.Context, db *sql.DB, caps collect.Capabilities, enable bool, notes *noteList) (table string, restore func(context.Context)) {
	if !caps.Server.PerformanceSchema {
		notes.add("performance_schema is OFF: wire only (no queue/exec split); enable with performance_schema=ON in my.cnf and restart")
		return "", nil
	}
	var missing []string
	for _, c := range neededConsumers {
		if !caps.Consumers[c] {
			missing = append(missing, c)
		}
	}
	if len(missing) == 0 {
		return collect.SourceHistoryLong, nil
	}
	if len(missing) == 1 && missing[0] == collect.SourceHistory && !enable {
		notes.add("%s", NoteNoThreadHistory)
		return collect.SourceHistoryLong, nil
	}
	list := "'" + strings.Join(missing, "','") + "'"
	turnOn := "UPDATE performance_schema.setup_consumers SET ENABLED='YES' WHERE NAME IN (" + list + ")"
	if !enable {
		notes.add("performance_schema consumers off: %s: wire only; enable them with: %s (or run watch with --enable-consumers)", strings.Join(missing, ", "), turnOn)
		return "", nil
	}
	if _, err := db.ExecContext(ctx, collect.Mark+" "+turnOn); err != nil {
		notes.add("could not enable consumers %s (%v): wire only", strings.Join(missing, ", "), err)
		return "", nil
	}
	for _, c := range missing { // the diagnosis judges the run, not the server before it
		caps.Consumers[c] = true
	}
	restore = func(ctx context.Context) {
		_, _ = db.ExecContext(ctx, collect.Mark+" UPDATE performance_schema.setup_consumers SET ENABLED='NO' WHERE NAME IN ("+list+")")
	}
	notes.add("enabled consumers %s for this run; restored on exit", strings.Join(missing, ", "))
	return collect.SourceHistoryLong, restore
}

// NoteNoThreadHistory says what watch cannot do without the per-thread
// statement history (`check` says it too).
const NoteNoThreadHistory = "performance_schema consumer events_statements_history off: a statement that stands out is joined only while " +
	"history_long still holds it or its thread runs nothing after it (events_statements_current); on a busy server most slow statements of busy " +
	"connections stay unjoined. Enable it with: UPDATE performance_schema.setup_consumers SET ENABLED='YES' WHERE NAME='events_statements_history' " +
	"(or run watch with --enable-consumers)"

// consumerSettings undoes, at the end of the run, the consumers it
// enabled: at the start, or again after a restart (the history reader's,
// on the poller's goroutine; undo runs after it ended).
type consumerSettings struct {
	restore func(context.Context) // nil: nothing to undo
}

// replace takes the undo of consumers enabled after a restart (nil:
// none were, the earlier undo stands).
func (c *consumerSettings) replace(restore func(context.Context)) {
	if restore != nil {
		c.restore = restore
	}
}

// undo restores the consumers this run enabled.
func (c *consumerSettings) undo() {
	if c.restore == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.restore(ctx)
}
