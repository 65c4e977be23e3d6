package diagnose

import (
	"fmt"

	"github.com/gapscope/gapscope/internal/event"
)

// checkConcurrencyCap finds settings that cap how many statements run at
// once, so that beyond the cap latency explodes while the server looks idle
// (the concurrency-cap case of docs/field-reports.md:
// innodb_thread_concurrency=32 on a shared MariaDB 10.4).
func checkConcurrencyCap(w *Window) []event.Finding {
	var out []event.Finding
	for _, check := range []func(*Window) *event.Finding{innodbConcurrencyCap, poolCap, connectionCap} {
		if f := check(w); f != nil {
			out = append(out, *f)
		}
	}
	return out
}

// load returns the status and cores evidence every cap finding carries.
func (w *Window) load() map[string]any {
	ev := map[string]any{}
	for _, name := range []string{"Threads_running", "Threads_connected", "Max_used_connections"} {
		if v, ok := w.statusInt(name); ok {
			ev[name] = v
		}
	}
	if w.Cores > 0 {
		ev["cores"] = w.Cores
	}
	return ev
}

// innodbConcurrencyCap: the variable exists in MySQL and MariaDB before
// 10.6; 0 means no cap.
func innodbConcurrencyCap(w *Window) *event.Finding {
	n, ok := w.varInt("innodb_thread_concurrency")
	if !ok || n <= 0 {
		return nil
	}
	ev := w.load()
	ev["innodb_thread_concurrency"] = n
	for _, v := range []string{"innodb_concurrency_tickets", "innodb_thread_sleep_delay", "innodb_commit_concurrency"} {
		if s, ok := w.Vars[v]; ok {
			ev[v] = s
		}
	}
	sev := event.SeverityWarning
	running, _ := w.statusInt("Threads_running")
	if running >= n {
		sev = event.SeverityCritical
	}
	return &event.Finding{
		Code:     CodeConcurrencyCap,
		Severity: sev,
		Summary: fmt.Sprintf("innodb_thread_concurrency=%d lets only %d threads inside InnoDB at once (Threads_running=%d); beyond that statements queue inside the server and latency climbs steeply",
			n, n, running),
		Evidence: ev,
		Fix:      "SET GLOBAL innodb_thread_concurrency=0 (no cap, the default) and set innodb_thread_concurrency=0 under [mysqld] in my.cnf; confirm with gapscope probe that the latency knee is gone",
	}
}

// poolCap: a thread pool runs at most Cap() statements before new ones
// wait for a stall; a cap below the cores or at the running threads is a
// bottleneck.
func poolCap(w *Window) *event.Finding {
	p := w.pool()
	if !p.Enabled {
		return nil
	}
	running, hasRunning := w.statusInt("Threads_running")
	small := w.Cores > 0 && p.Cap() < int64(w.Cores)
	full := hasRunning && running >= p.Cap()
	if !small && !full {
		return nil
	}
	ev := w.load()
	ev["settings"] = p.Settings
	ev["active_limit"] = p.Cap()
	ev["implication"] = p.implication()
	return &event.Finding{
		Code:     CodeConcurrencyCap,
		Severity: event.SeverityWarning,
		Summary: fmt.Sprintf("the thread pool runs at most %d statements at once (%s) with %d running and %d cores; further requests wait unseen by the server",
			p.Cap(), p.implication(), running, w.Cores),
		Evidence: ev,
		Fix:      poolFix(p),
	}
}

// connectionCap: when Max_used_connections reaches max_connections, new
// connections are refused or the application's pool waits.
func connectionCap(w *Window) *event.Finding {
	limit, ok1 := w.varInt("max_connections")
	used, ok2 := w.statusInt("Max_used_connections")
	refused, _ := w.statusInt("Connection_errors_max_connections")
	if !ok1 || !ok2 || limit <= 0 || (float64(used) < 0.9*float64(limit) && refused == 0) {
		return nil
	}
	ev := w.load()
	ev["max_connections"] = limit
	ev["Connection_errors_max_connections"] = refused
	return &event.Finding{
		Code:     CodeConcurrencyCap,
		Severity: event.SeverityWarning,
		Summary: fmt.Sprintf("Max_used_connections=%d reached %s of max_connections=%d (%d connection(s) refused)",
			used, pct(share(used, limit)), limit, refused),
		Evidence: ev,
		Fix:      fmt.Sprintf("SET GLOBAL max_connections=%d (and in my.cnf), or bound the application's connection pools so their sum stays below it", limit*2),
	}
}

// checkPoolSizing flags thread-pool settings that fit the host badly: fewer
// groups than cores leaves CPUs idle; a long stall limit lets one long
// statement hold back every other connection of its group (the thread-pool case).
func checkPoolSizing(w *Window) []event.Finding {
	p := w.pool()
	if !p.Enabled {
		return nil
	}
	var out []event.Finding
	ev := func() map[string]any {
		return map[string]any{"settings": p.Settings, "cores": w.Cores, "implication": p.implication()}
	}
	if w.Cores > 0 && p.Size < int64(w.Cores) {
		out = append(out, event.Finding{
			Code: CodePoolSizing, Severity: event.SeverityWarning, Evidence: ev(),
			Summary: fmt.Sprintf("thread_pool_size=%d on %d cores: at most %d group(s) of connections share the CPUs, so one busy group leaves cores idle while its connections wait", p.Size, w.Cores, p.Size),
			Fix:     fmt.Sprintf("SET GLOBAL thread_pool_size=%d (one group per core) and in my.cnf", w.Cores),
		})
	}
	if p.StallLimitMS > 1000 {
		def := "thread_pool_stall_limit=500"
		if p.Flavor == FlavorMySQL {
			def = "thread_pool_stall_limit=6 (60 ms)"
		}
		out = append(out, event.Finding{
			Code: CodePoolSizing, Severity: event.SeverityWarning, Evidence: ev(),
			Summary: fmt.Sprintf("thread_pool_stall_limit is %d ms: a group busy with long statements makes every other request on its connections wait up to %s before another thread starts", p.StallLimitMS, dur(p.StallLimitMS*1000)),
			Fix:     "SET GLOBAL " + def + " (the default) and in my.cnf",
		})
	}
	return out
}
