package watch

import (
	"bufio"
	"fmt"
	"io"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/report"
	"github.com/gapscope/gapscope/internal/sqltext"
)

// terminalView is the terminal's live view, a sink of snapshots: the
// worst statements now with their five parts, queue time per pool group,
// the connections that lost most time waiting and the statement rules'
// findings, redrawn at each snapshot.
type terminalView struct{ w io.Writer }

// NewTerminalView is the live view drawn on w, a terminal, every
// LiveEvery. The last frame stays on the screen: the final snapshot is
// the run's result, which the command prints below it.
func NewTerminalView(w io.Writer) Sink { return terminalView{w} }

func (terminalView) Takes() Takes                   { return TakesSnapshots }
func (terminalView) Statement(*event.Statement)     {}
func (terminalView) Transaction(*event.Transaction) {}
func (terminalView) Close(*Snapshot) error          { return nil }

// Snapshot redraws the view.
func (v terminalView) Snapshot(s *Snapshot) {
	w := bufio.NewWriter(v.w)
	defer w.Flush()
	fmt.Fprint(w, "\x1b[H\x1b[2J")
	fmt.Fprintf(w, "gapscope watch  %s  statements %d  joined %d  dropped %d  pending %d%s\n\n",
		time.UnixMicro(s.TimeUS).Format(time.TimeOnly), s.Health.Statements, s.Health.Joined, s.Health.QueueDrops, s.Pending, s.Health.Following)
	if s.ServerOnly {
		writeWorstServer(w, s.Worst)
	} else {
		writeWorst(w, s.Worst)
	}
	writeGroups(w, s.Groups)
	writeConns(w, s.Conns)
	if s.Streams != "" {
		fmt.Fprintf(w, "\nreplicas: %s\n", s.Streams)
	}
	writeLiveFindings(w, s.Findings)
}

func writeConns(w *bufio.Writer, conns []ConnSummary) {
	if len(conns) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%-28s %-8s %-11s %-10s %-10s\n", "connection", "id", "statements", "queue", "stall")
	for _, c := range conns {
		fmt.Fprintf(w, "%-28s %-8d %-11d %-10s %-10s\n", sqltext.Clip(c.Conn, 28), c.ConnID, c.Statements, report.Duration(c.QueueUS), report.Duration(c.StallUS))
	}
}

func writeLiveFindings(w *bufio.Writer, fs []event.Finding) {
	if len(fs) == 0 {
		return
	}
	fmt.Fprintln(w, "\nfindings (last 10k statements):")
	for _, f := range fs {
		fmt.Fprintf(w, "  %s [%s] %s\n", f.Code, f.Severity, sqltext.Clip(f.Summary, 150))
	}
}

func writeWorst(w *bufio.Writer, worst []event.Statement) {
	fmt.Fprintf(w, "%-10s %-9s %-9s %-9s %-9s %-9s  %-22s %s\n", "client", "request", "queue", "exec", "stall", "delivery", "connection", "statement")
	for _, s := range worst {
		fmt.Fprintf(w, "%-10s %-9s %-9s %-9s %-9s %-9s  %-22s %s\n", report.Duration(s.ClientUS), part(s, s.RequestUS), part(s, s.QueueUS),
			part(s, s.ExecUS), part(s, s.SendStallUS), part(s, s.DeliveryUS), sqltext.Clip(s.Conn, 22), sqltext.Clip(s.SQL, 60))
	}
}

// writeWorstServer lists the server's slowest statements when there is no
// wire: the client's time and its parts are unknown, not zero.
func writeWorstServer(w *bufio.Writer, worst []event.Statement) {
	fmt.Fprintf(w, "%-10s %-10s  %-22s %s\n", "server", "client", "connection id", "statement (no wire: client time unknown)")
	for _, s := range worst {
		fmt.Fprintf(w, "%-10s %-10s  %-22d %s\n", report.Duration(s.ServerUS), "?", s.ConnID, sqltext.Clip(s.SQL, 60))
	}
}

func writeGroups(w *bufio.Writer, groups []GroupSummary) {
	if len(groups) == 0 {
		return
	}
	fmt.Fprintf(w, "\n%-6s %-10s %-12s %-12s\n", "group", "statements", "queue total", "max queue")
	for _, g := range groups {
		fmt.Fprintf(w, "%-6d %-10d %-12s %-12s\n", g.Group, g.Statements, report.Duration(g.QueueUS), report.Duration(g.MaxQueueUS))
	}
}

func part(s event.Statement, us int64) string {
	if !s.Joined {
		return "-"
	}
	return report.Duration(us)
}
