package watch

import (
	"bufio"
	"fmt"
	"strconv"
	"time"

	"github.com/gapscope/gapscope/internal/capture"
	"github.com/gapscope/gapscope/internal/diagnose"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/report"
	"github.com/gapscope/gapscope/internal/sqltext"
)

// drawLive redraws the terminal view: the worst statements now with their
// five parts, and queue time per pool group.
func (e *engine) drawLive() {
	if e.opts.Live == nil {
		return
	}
	e.tally.mu.Lock()
	worst := append([]event.Statement(nil), e.tally.worst...)
	total, joined := e.tally.total, e.tally.joined
	groups := e.tally.groupList()
	conns := e.tally.topConns(5)
	serverOnly := e.tally.serverOnly
	streams := e.tally.streamsNote()
	e.tally.mu.Unlock()
	e.refreshLiveFindings()
	w := bufio.NewWriter(e.opts.Live)
	defer w.Flush()
	fmt.Fprint(w, "\x1b[H\x1b[2J")
	fmt.Fprintf(w, "gapscope watch  %s  statements %d  joined %d  dropped %d  pending %d%s\n\n",
		time.Now().Format(time.TimeOnly), total, joined, e.wire.queueDrops.Load(), e.joiner.Pending(), e.followingNote())
	if serverOnly {
		writeWorstServer(w, worst)
	} else {
		writeWorst(w, worst)
	}
	writeGroups(w, groups)
	writeConns(w, conns)
	if streams != "" {
		fmt.Fprintf(w, "\nreplicas: %s\n", streams)
	}
	writeLiveFindings(w, e.liveFindings)
}

// followingNote tells the live view that only a sample of the connections
// is joined.
func (e *engine) followingNote() string {
	if s := e.sample.get(); s.On() {
		return "  joining " + describeSample(s) + " (every statement counted)"
	}
	return ""
}

// describeSample names the connections a join sample holds.
func describeSample(s capture.Sample) string {
	if s.N <= 1 {
		return "every connection"
	}
	return "1 in " + strconv.Itoa(int(s.N)) + " connections"
}

// liveFindingsEvery is how often the live view re-runs the statement rules,
// on the latest liveFindingsWindow statements.
const (
	liveFindingsEvery  = 5 * time.Second
	liveFindingsWindow = 10_000
)

func (e *engine) refreshLiveFindings() {
	if time.Since(e.liveFindingsAt) < liveFindingsEvery {
		return
	}
	e.liveFindingsAt = time.Now()
	w := &diagnose.Window{Statements: e.tally.recent(liveFindingsWindow), Vars: e.liveVars}
	w.Transactions, w.TxnSeen = e.txns.recent()
	e.liveFindings = diagnose.Run(w, diagnose.StatementRules()...)
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
