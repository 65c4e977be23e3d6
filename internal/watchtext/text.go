// Package watchtext writes a watch result as text: the profile (and the
// statements not on the wire), the thread-pool groups, how the two sides
// met, what watch cost, and the findings.
package watchtext

import (
	"fmt"
	"io"
	"time"

	"github.com/gapscope/gapscope/internal/capture"
	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/report"
	"github.com/gapscope/gapscope/internal/sqltext"
	"github.com/gapscope/gapscope/internal/txn"
	"github.com/gapscope/gapscope/internal/watch"
)

// Write writes res with the top digests of each profile (0: all) at width.
func Write(out io.Writer, res *watch.Result, top, width int) error {
	if err := report.WriteProfileText(out, res.Profile, top, width); err != nil {
		return err
	}
	if res.NotOnWire != nil {
		fmt.Fprintln(out, "\nNot on the captured wire (unix-socket clients and the like): the server's time only")
		if err := report.WriteProfileText(out, res.NotOnWire, top, width); err != nil {
			return err
		}
	}
	writeGroupSummary(out, res.Groups)
	writeTxnSummary(out, res.Transactions)
	writeJoinSummary(out, res)
	writeOwnCost(out, res.Own)
	return report.WriteFindingsText(out, res.Findings)
}

// writeTxnSummary says how long applications held their transactions open
// and which held one open longest, when any transaction was seen.
func writeTxnSummary(out io.Writer, t txn.Summary) {
	if t.Count == 0 {
		return
	}
	fmt.Fprintf(out, "\ntransactions %d: open %s in all, %s of it idle in the application between statements",
		t.Count, report.Micros(t.OpenUS), report.Micros(t.InAppUS))
	if t.LockWaitUS > 0 {
		fmt.Fprintf(out, ", their statements waited %s for locks", report.Micros(t.LockWaitUS))
	}
	if t.Kept < int(t.Count) {
		fmt.Fprintf(out, " (sums over the last %d)", t.Kept)
	}
	fmt.Fprintln(out)
	for _, x := range t.LongestIdle {
		lead := x.LeadSQL
		if lead == "" {
			lead = x.FirstSQL
		}
		fmt.Fprintf(out, "  %s (conn %d, %s): idle %s at most, open %s, %d statement(s), %s: %s\n",
			x.Conn, x.ConnID, x.User, report.Micros(x.MaxIdleUS), report.Micros(x.OpenUS), x.Statements, x.EndKind, sqltext.Clip(lead, 80))
	}
}

// writeJoinSummary says how the two sides met; without the wire, how many
// server rows the profile holds.
func writeJoinSummary(out io.Writer, res *watch.Result) {
	if res.ServerOnly {
		fmt.Fprintf(out, "\nserver rows %d, no wire: queue, delivery and client time unknown\n", res.ServerSide.Rows)
		return
	}
	fmt.Fprintf(out, "\n%sclock error ±%dµs\n", res.Coverage.Summary(), res.Clock.ErrorUS)
	fmt.Fprintln(out, describePath(res.Capture.Path, res.Clock))
	if k := res.KernelPath; k != nil {
		fmt.Fprintf(out, "kernel's round trip of this host's %d connection(s) to the server: min %s, smoothed %s ± %s\n",
			k.Sockets, report.Micros(k.MinRTTUS), report.Micros(k.RTTUS), report.Micros(k.RTTVarUS))
	}
}

// describePath says where the capture ran and what it measured of the
// path to the server, and the calibration's error.
func describePath(p capture.PathStats, c collect.Clock) string {
	where := map[string]string{capture.PointServer: "the server's host", capture.PointClient: "the application's host",
		capture.PointBetween: "between client and server", "mixed": "mixed (connections differ)"}[p.Point]
	if where == "" {
		where = "unknown"
	}
	line := "capture point: " + where
	if p.Conns > 0 {
		line += fmt.Sprintf("; round trip to the server %s (median over %d connections of each one's smallest; range %s-%s, samples stray %s)",
			report.Micros(p.RTTMedianUS), p.Conns, report.Micros(p.RTTMinUS), report.Micros(p.RTTMaxUS), report.Micros(p.SpreadUS))
	}
	line += fmt.Sprintf("\nclock calibration: ±%s", report.Micros(c.ErrorUS))
	if c.PathRTTUS > 0 {
		line += fmt.Sprintf(" (markers' connection round trip %s", report.Micros(c.PathRTTUS))
		if c.PathRTTUS*1000 >= collect.LinkRTTFloorNS {
			line += ", corrected for: each way assumed half"
		}
		line += ")"
	}
	return line
}

// writeOwnCost says what watch cost the host: its CPU over the run.
func writeOwnCost(out io.Writer, o watch.OwnCost) {
	fmt.Fprintf(out, "watch itself: %.1f s CPU, %.2f%% of %d CPUs", o.CPUSeconds, 100*o.Share, o.CPUs)
	if o.Budget > 0 {
		fmt.Fprintf(out, " (budget %g%%", 100*o.Budget)
		if n := len(o.Steps); n > 0 {
			fmt.Fprintf(out, "; joining the fast statements of 1 in %d connections at the end", o.Steps[n-1].Sample)
			if o.AppConns != nil && *o.AppConns > 0 && o.JoinedConns != nil {
				fmt.Fprintf(out, ": %d of %d", *o.JoinedConns, *o.AppConns)
			}
		}
		fmt.Fprint(out, ")")
	}
	fmt.Fprint(out, "\n\n")
}

func writeGroupSummary(out io.Writer, groups []watch.GroupSummary) {
	if len(groups) == 0 {
		return
	}
	fmt.Fprintf(out, "\nthread-pool groups:\n  %-6s %-11s %-14s %-14s\n", "group", "statements", "queue total", "max queue")
	for _, g := range groups {
		fmt.Fprintf(out, "  %-6d %-11d %-14s %-14s\n", g.Group, g.Statements, time.Duration(g.QueueUS)*time.Microsecond, time.Duration(g.MaxQueueUS)*time.Microsecond)
	}
}
