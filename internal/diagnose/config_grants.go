package diagnose

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/gapscope/gapscope/internal/event"
)

// grantRE splits one SHOW GRANTS line into its privileges and object. Role
// grants (no ON) and PROXY grants do not match or are skipped.
var grantRE = regexp.MustCompile(`(?i)^GRANT\s+(.+?)\s+ON\s+(\S+)\s+TO\s+.*?(WITH\s+GRANT\s+OPTION)?\s*$`)

// needed are the global privileges gapscope uses: PROCESS for the
// processlist, other sessions' threads and SHOW EXPLAIN; USAGE is none.
var needed = []string{"USAGE", "PROCESS"}

// minimalGrants is the fix: an account with just what gapscope reads, and
// the one update it makes (switching a CYCLE wait timer to NANOSECOND).
const minimalGrants = "CREATE USER 'gapscope'@'%' IDENTIFIED BY '...'; GRANT PROCESS ON *.* TO 'gapscope'@'%'; GRANT SELECT ON performance_schema.* TO 'gapscope'@'%'; GRANT UPDATE ON performance_schema.setup_timers TO 'gapscope'@'%'; then run gapscope with that account"

// checkExcessGrants warns when gapscope runs with more than it needs:
// a monitoring tool holding SUPER or write privileges is a risk for no gain.
func checkExcessGrants(w *Window) []event.Finding {
	excess := excessPrivileges(w.Grants)
	if len(excess) == 0 {
		return nil
	}
	sev := event.SeverityWarning
	if slices.Contains(excess, "ALL PRIVILEGES") || slices.Contains(excess, "SUPER") {
		sev = event.SeverityCritical
	}
	who := "gapscope"
	ev := map[string]any{"grants": redactGrants(w.Grants), "excess": excess, "needed": "PROCESS ON *.*, SELECT ON performance_schema.*"}
	if w.Server != nil && w.Server.CurrentUser != "" {
		who += " (as " + w.Server.CurrentUser + ")"
		ev["current_user"] = w.Server.CurrentUser
	}
	return []event.Finding{{
		Code:     CodeExcessGrants,
		Severity: sev,
		Summary:  fmt.Sprintf("%s runs with %s on *.*; it needs only PROCESS and SELECT ON performance_schema.*", who, strings.Join(excess, ", ")),
		Evidence: ev,
		Fix:      minimalGrants,
	}}
}

// excessPrivileges returns the global privileges beyond what gapscope needs,
// in the order they were granted.
func excessPrivileges(grants []string) []string {
	var out []string
	for _, g := range grants {
		m := grantRE.FindStringSubmatch(strings.TrimSpace(g))
		if m == nil || strings.ReplaceAll(m[2], "`", "") != "*.*" {
			continue
		}
		for _, p := range strings.Split(m[1], ",") {
			p = strings.ToUpper(strings.Join(strings.Fields(p), " "))
			if p == "ALL" {
				p = "ALL PRIVILEGES"
			}
			if p != "" && p != "PROXY" && !slices.Contains(needed, p) && !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
		if m[3] != "" && !slices.Contains(out, "GRANT OPTION") {
			out = append(out, "GRANT OPTION")
		}
	}
	return out
}
