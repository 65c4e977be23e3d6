package watch

import (
	"context"
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
// missing consumers when allowed (restored on exit), or "" (wire only) with
// a note saying how to enable them. Without the per-thread history alone,
// it reads history_long and says what is lost.
func (p *poller) prepareConsumers(ctx context.Context) string {
	if !p.info.PerformanceSchema {
		p.notes.add("performance_schema is OFF: wire only (no queue/exec split); enable with performance_schema=ON in my.cnf and restart")
		return ""
	}
	var missing []string
	for _, c := range neededConsumers {
		if !p.caps.Consumers[c] {
			missing = append(missing, c)
		}
	}
	if len(missing) == 0 {
		return collect.SourceHistoryLong
	}
	if len(missing) == 1 && missing[0] == collect.SourceHistory && !p.enableConsumers {
		p.notes.add("%s", NoteNoThreadHistory)
		return collect.SourceHistoryLong
	}
	list := "'" + strings.Join(missing, "','") + "'"
	enable := "UPDATE performance_schema.setup_consumers SET ENABLED='YES' WHERE NAME IN (" + list + ")"
	if !p.enableConsumers {
		p.notes.add("performance_schema consumers off: %s: wire only; enable them with: %s (or run watch with --enable-consumers)", strings.Join(missing, ", "), enable)
		return ""
	}
	if _, err := p.db.ExecContext(ctx, collect.Mark+" "+enable); err != nil {
		p.notes.add("could not enable consumers %s (%v): wire only", strings.Join(missing, ", "), err)
		return ""
	}
	for _, c := range missing { // the diagnosis judges the run, not the server before it
		p.caps.Consumers[c] = true
	}
	p.restore = func(ctx context.Context) {
		_, _ = p.db.ExecContext(ctx, collect.Mark+" UPDATE performance_schema.setup_consumers SET ENABLED='NO' WHERE NAME IN ("+list+")")
	}
	p.notes.add("enabled consumers %s for this run; restored on exit", strings.Join(missing, ", "))
	return collect.SourceHistoryLong
}

// NoteNoThreadHistory says what watch cannot do without the per-thread
// statement history (`check` says it too).
const NoteNoThreadHistory = "performance_schema consumer events_statements_history off: a statement that stands out is joined only while " +
	"history_long still holds it or its thread runs nothing after it (events_statements_current); on a busy server most slow statements of busy " +
	"connections stay unjoined. Enable it with: UPDATE performance_schema.setup_consumers SET ENABLED='YES' WHERE NAME='events_statements_history' " +
	"(or run watch with --enable-consumers)"

// restoreSettings undoes the consumers this run enabled (after the
// poller's goroutine ended).
func (p *poller) restoreSettings() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if p.restore != nil {
		p.restore(ctx)
	}
}
