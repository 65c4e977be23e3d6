package overhead

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/report"
)

// WriteReport prints the result and its findings, as JSON or as the table
// (also after Ctrl-C: the rounds done so far).
func (res *Result) WriteReport(out io.Writer, json bool) error {
	findings := Findings(res)
	if json {
		if findings == nil {
			findings = []event.Finding{}
		}
		return report.WriteJSON(out, struct {
			*Result
			Findings any `json:"findings"`
		}{res, findings})
	}
	if err := res.WriteText(out); err != nil {
		return err
	}
	fmt.Fprintln(out)
	return report.WriteFindingsText(out, findings)
}

// ProgressPrinter shows each round on w as it starts (redrawn in place on
// a terminal) and a line when it ends, with the time left.
func ProgressPrinter(w io.Writer) func(Progress) {
	tty := report.IsTerminal(w)
	return func(p Progress) {
		line := ProgressLine(p)
		ended := p.Table != nil || p.Last != nil
		switch {
		case ended && tty:
			fmt.Fprintf(w, "\r\x1b[K%s\n", line)
		case ended:
			fmt.Fprintln(w, line)
		case tty:
			fmt.Fprintf(w, "\r\x1b[K%s", line)
		}
	}
}

// WriteText prints the overhead case's table with the run's conditions and method.
func (res *Result) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "\n%s OLTP read/write, %d tables x %d rows, %d threads; rounds of %s (warm-up %s), %s per setting, rotated, reversed every other rotation\n",
		res.Driver, res.Tables, res.TableSize, res.Threads, res.Duration, res.Warmup, roundsRange(res))
	fmt.Fprintf(w, "server %s%s\n\n", res.Server, map[bool]string{true: " (gapscope sandbox)", false: ""}[res.Sandbox])
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "config\tapplied\tTPS median\tmin–max\tratio\t95% interval\tCPU ms/tx\tcapacity\t95% interval\tavg ms\t95% interval\tp95 ms\t95% interval\tabove noise\t")
	for _, r := range res.Table {
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.0f–%.0f\t%s\t%s\t%s\t%s\t%s\t%.2f\t%s\t%.2f\t%s\t%s\t\n", r.Config, applied(r), r.TPS, r.TPSMin, r.TPSMax,
			ratio(r.Rounds, r.Ratio), interval(r, r.RatioLow, r.RatioHigh), cpuMS(r), ratio(r.Rounds, r.Capacity), interval(r, r.CapacityLow, r.CapacityHigh),
			r.LatAvgMS, msInterval(r, r.LatAvgLowMS, r.LatAvgHighMS), r.LatP95MS, msInterval(r, r.LatP95LowMS, r.LatP95HighMS), verdictText(r))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\napplied: startup = in place from the server's start (sandbox restarted with the options, same data directory, preload and warm-up); "+
		"runtime = set on the running server; runtime* = a startup setting that could only be set at runtime here: it understates\n")
	fmt.Fprintf(w, "ratio: TPS to %s; capacity: transactions per CPU second to %s (CPU ms/tx: the server and gapscope's process); "+
		"above noise (by capacity) or (by TPS): the interval the verdict was decided on; %s\n", res.Baseline, res.Baseline, Method)
	for _, r := range res.Table {
		if r.AboveNoise == VerdictUnknown && r.Pairs >= 2 {
			_, lo, hi := r.Decided()
			fmt.Fprintf(w, "undecided: %s after %d pairs (%s interval x%.3f–x%.3f), the time limit %s reached\n", r.Config, r.Pairs, r.VerdictOn, lo, hi, res.TimeLimit)
		}
	}
	for _, n := range res.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	restored := "settings restored and read back equal"
	if !res.Restored {
		restored = "WARNING: settings read back differ from the originals (see the error)"
	}
	_, err := fmt.Fprintln(w, restored)
	return err
}

func roundsRange(res *Result) string {
	lo, hi := 0, 0
	for i, r := range res.Table {
		if i == 0 || r.Rounds < lo {
			lo = r.Rounds
		}
		hi = max(hi, r.Rounds)
	}
	if lo == hi {
		return fmt.Sprintf("%d rounds", hi)
	}
	return fmt.Sprintf("%d-%d rounds", lo, hi)
}

func applied(r Row) string {
	if r.Understates {
		return r.Applied + "*"
	}
	return r.Applied
}

func ratio(rounds int, v float64) string {
	if rounds == 0 || v == 0 {
		return "-"
	}
	return fmt.Sprintf("x%.3f", v)
}

func interval(r Row, low, high float64) string {
	switch {
	case r.AboveNoise == VerdictBaseline:
		return "baseline"
	case low == 0:
		return "-"
	}
	return fmt.Sprintf("x%.3f–x%.3f", low, high)
}

func cpuMS(r Row) string {
	if r.CPUPerTxMS == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f", r.CPUPerTxMS)
}

// verdictText is the verdict with what it was decided on.
func verdictText(r Row) string {
	if r.AboveNoise == VerdictBaseline || r.VerdictOn == "" {
		return r.AboveNoise
	}
	return fmt.Sprintf("%s (by %s)", r.AboveNoise, map[string]string{VerdictOnCapacity: "capacity", VerdictOnTPS: "TPS"}[r.VerdictOn])
}

func msInterval(r Row, lo, hi float64) string {
	if r.AboveNoise == VerdictBaseline || lo == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f–%.2f", lo, hi)
}

// ProgressLine renders a Progress for a terminal or a log, one line.
func ProgressLine(p Progress) string {
	var b strings.Builder
	if p.Table != nil {
		fmt.Fprintf(&b, "after rotation %d:", p.Round)
		for _, r := range p.Table[1:] {
			if r.Pairs < 2 {
				continue
			}
			v := r.AboveNoise
			if v == VerdictUnknown {
				v = "undecided"
			}
			x, lo, hi := r.Decided()
			fmt.Fprintf(&b, " %s %s x%.3f [x%.3f–x%.3f] %s;", r.Config, r.VerdictOn, x, lo, hi, v)
		}
		fmt.Fprintf(&b, " (elapsed %s of %s)", p.Elapsed.Round(1e9), p.Limit)
		return b.String()
	}
	fmt.Fprintf(&b, "[%d] rotation %d %s", p.Step, p.Round, p.Config)
	if p.Last != nil {
		fmt.Fprintf(&b, " (%s): %.0f TPS, avg %.2f ms, p95 %.2f ms", applied(Row{Applied: p.Last.Applied, Understates: p.Last.Understates}),
			p.Last.TPS, ms(p.Last.LatAvg), ms(p.Last.LatP95))
		if p.Last.CPUPerTx > 0 {
			fmt.Fprintf(&b, ", CPU %.3f ms/tx", ms(p.Last.CPUPerTx))
		}
	} else {
		b.WriteString(" ...")
	}
	fmt.Fprintf(&b, " (elapsed %s, at most %s left)", p.Elapsed.Round(1e9), p.Left.Round(1e9))
	return b.String()
}
