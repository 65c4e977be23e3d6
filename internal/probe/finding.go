package probe

import (
	"fmt"
	"math"
	"time"

	"github.com/gapscope/gapscope/internal/event"
)

// CodeConcurrencyKnee is the finding code for a latency knee.
const CodeConcurrencyKnee = "CONCURRENCY_KNEE"

// KneeFinding turns a fitted knee into a finding: tied to the cap within
// tolerance of it when there is one (evidence knee_threads, cap_threads,
// cap_variable, cap_config), otherwise an informational finding that
// lists the caps considered. It returns nil when no knee was found.
func KneeFinding(k Knee, caps []Cap, tolerance float64) *event.Finding {
	if !k.Found {
		return nil
	}
	ev := kneeEvidence(k)
	c, ok := MatchCap(k.Threads, caps, tolerance)
	if !ok {
		ev["caps_considered"] = caps
		return &event.Finding{
			Code: CodeConcurrencyKnee, Severity: event.SeverityInfo, Evidence: ev,
			Summary: fmt.Sprintf("canary latency jumps above %.1f running threads (x%.1f the trend below: %s at the knee, up to %s), and no configured limit lies within %.0f%% of that knee",
				k.Threads, k.Rise, us(k.KneeUS), us(k.PeakUS), tolerance*100),
			Fix: "find what the running threads wait for above the knee (gapscope watch: queue, exec and stall per statement; SHOW PROCESSLIST states) and bound the application's concurrency below it meanwhile",
		}
	}
	ev["cap_threads"] = c.Threads
	ev["cap_variable"] = c.Variable
	ev["cap_formula"] = c.Formula
	ev["cap_config"] = c.Config
	sev := event.SeverityWarning
	if !c.Config {
		sev = event.SeverityInfo
	}
	return &event.Finding{
		Code: CodeConcurrencyKnee, Severity: sev, Evidence: ev,
		Summary: fmt.Sprintf("canary latency jumps above %.1f running threads (x%.1f the trend below: %s at the knee, up to %s): the knee sits at the cap %s = %d",
			k.Threads, k.Rise, us(k.KneeUS), us(k.PeakUS), c.Formula, c.Threads),
		Fix: capFix(c),
	}
}

func kneeEvidence(k Knee) map[string]any {
	return map[string]any{
		"knee_threads":     round1(k.Threads),
		"knee_range":       []float64{round1(k.Low), round1(k.High)},
		"slope_below":      perThread(k.Below.Slope),
		"slope_above":      perThread(k.Above.Slope),
		"latency_below_us": math.Round(k.At(k.LastBelow)),
		"latency_max_us":   math.Round(k.At(k.MaxThreads)),
		"rise":             round1(k.Rise),
		"fit_improvement":  round3(k.Improvement),
		"f":                round1(k.F),
		"z":                round1(k.Z),
		"p":                k.P,
		"test":             "permutation: one-line residuals reshuffled; robust rise over the lower trend and two-line F, maximised over cuts",
		"points":           k.Points,
		"metric":           "median canary repetition vs mean Threads_running",
	}
}

// perThread renders a log-latency slope as the factor latency changes by
// per additional thread.
func perThread(slope float64) string { return fmt.Sprintf("x%.3f", math.Exp(slope)) }

// us renders microseconds for a summary.
func us(v float64) string {
	return (time.Duration(v) * time.Microsecond).Round(100 * time.Microsecond).String()
}

func round1(v float64) float64 {
	if math.Abs(v) > 1e300 { // an exact fit's F: rounding would overflow
		return v
	}
	return math.Round(v*10) / 10
}
func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

func capFix(c Cap) string {
	switch c.Variable {
	case "thread_pool_max_threads":
		return "raise thread_pool_max_threads (SET GLOBAL and in my.cnf) well above the peak of concurrently waiting statements: a statement that waits (sleep, lock, I/O) holds its pool thread; or shorten what holds them"
	case CapPoolActive:
		return "raise thread_pool_oversubscribe or thread_pool_size (one group per core) with SET GLOBAL and in my.cnf, or lower thread_pool_stall_limit so a busy group gets another thread sooner"
	case "innodb_thread_concurrency":
		return "SET GLOBAL innodb_thread_concurrency=0 (no cap, the default) and in my.cnf; rerun gapscope probe to confirm the knee is gone"
	case "max_connections":
		return fmt.Sprintf("SET GLOBAL max_connections=%d (and in my.cnf), or bound the application's connection pools below it", c.Threads*2)
	case CapCPU:
		return "the server is CPU-bound above this many running statements: cap the application's concurrency near the core count, make the statements cheaper, or add cores"
	}
	return "raise " + c.Variable
}
