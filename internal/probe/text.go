package probe

import (
	"fmt"
	"io"
	"time"

	"github.com/gapscope/gapscope/internal/report"
)

// Name says what runs: the canary, with its size, or the workload file.
func (o Options) Name() string {
	if o.Script != nil {
		return "workload " + o.ScriptName
	}
	return fmt.Sprintf("canary (%d x TRUNCATE + %d INSERTs)", o.Canary.Repeat, o.Canary.Inserts)
}

// PointLine is one run as probe prints it while it runs and in its
// result.
func PointLine(p Point) string {
	return fmt.Sprintf("%s  median %-9s avg %-9s max %-9s Threads_running %5.1f (max %d)  connected %5.1f  pool queue %4.1f",
		time.UnixMicro(p.TimeUS).Format("15:04:05"), report.Micros(p.MedianUS), report.Micros(p.AvgUS), report.Micros(p.MaxUS),
		p.ThreadsRunning, p.ThreadsRunningMax, p.ThreadsConnected, p.PoolQueue)
}

// WriteText prints the runs, the knee, the caps in force and the findings.
func (res *Result) WriteText(out io.Writer) error {
	fmt.Fprintf(out, "\n%s: %d runs (%d discarded)\n", res.Series.Name, len(res.Series.Points), res.Discarded)
	for _, p := range res.Series.Points {
		fmt.Fprintln(out, "  "+PointLine(p))
	}
	k := res.Knee
	if k.Found {
		fmt.Fprintf(out, "\nknee: %.1f running threads (80%% range %.1f-%.1f); above it x%.1f the trend below; fit improvement %.0f%% over one line, permutation p=%.2g\n",
			k.Threads, k.Low, k.High, k.Rise, k.Improvement*100, k.P)
	} else {
		fmt.Fprintf(out, "\nno knee: %s (%d runs)\n", k.Reason, k.Points)
	}
	fmt.Fprintln(out, "\ncaps in force:")
	for _, c := range res.Caps {
		fmt.Fprintf(out, "  %-48s %6d  %s\n", c.Variable, c.Threads, c.Formula)
	}
	fmt.Fprintln(out, "\nfindings:")
	return report.WriteFindingsText(out, res.Findings)
}
