package overhead

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteText prints the overhead case's table with the run's conditions and method.
func (res *Result) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "\n%s OLTP read/write, %d tables x %d rows, %d threads; %d rounds of %s per setting (warm-up %s), rotated\n",
		res.Driver, res.Tables, res.TableSize, res.Threads, roundsPer(res), res.Duration, res.Warmup)
	fmt.Fprintf(w, "server %s%s\n\n", res.Server, map[bool]string{true: " (gapscope sandbox)", false: ""}[res.Sandbox])
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "config\tTPS median\tmin–max\tratio\t95% interval\tavg ms\tp95 ms\tabove noise\t")
	for _, r := range res.Table {
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f–%.0f\t%s\t%s\t%.2f\t%.2f\t%s\t\n", r.Config, r.TPS, r.TPSMin, r.TPSMax,
			ratio(r), interval(r), r.LatAvgMS, r.LatP95MS, r.AboveNoise)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nratio: to %s, paired by rotation; %s\n", res.Baseline, Method)
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

func roundsPer(res *Result) int {
	n := 0
	for _, r := range res.Table {
		n = max(n, r.Rounds)
	}
	return n
}

func ratio(r Row) string {
	if r.Rounds == 0 || r.Ratio == 0 {
		return "-"
	}
	return fmt.Sprintf("x%.3f", r.Ratio)
}

func interval(r Row) string {
	switch {
	case r.AboveNoise == VerdictBaseline:
		return "baseline"
	case r.RatioLow == 0:
		return "-"
	}
	return fmt.Sprintf("x%.3f–x%.3f", r.RatioLow, r.RatioHigh)
}

// ProgressLine renders a Progress for a terminal or a log, one line.
func ProgressLine(p Progress) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%d/%d] round %d/%d %s", p.Step, p.Steps, p.Round, p.Rounds, p.Config)
	if p.Last != nil {
		fmt.Fprintf(&b, ": %.0f TPS, avg %.2f ms, p95 %.2f ms", p.Last.TPS, ms(p.Last.LatAvg), ms(p.Last.LatP95))
	} else {
		b.WriteString(" ...")
	}
	fmt.Fprintf(&b, " (elapsed %s, about %s left)", p.Elapsed.Round(1e9), p.Left.Round(1e9))
	return b.String()
}
