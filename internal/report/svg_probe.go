package report

import (
	"fmt"
	"html/template"
	"math"
)

// probeFrame leaves room for a log latency axis on the left and a thread
// count axis on the right.
var probeFrame = frame{w: 960, h: 420, left: 78, right: 70, top: 44, bottom: 52}

// probeTimelineSVG is the chart of the concurrency-cap case (docs/field-reports.md): canary max/avg/median per round
// on a log axis (lines and markers), Threads_connected and Threads_running
// as bars on a linear second axis, the knee as a horizontal line on that
// axis, time on x.
func probeTimelineSVG(pts []ProbePoint, knee *Knee) template.HTML {
	f := probeFrame
	s := newSVG(f.w, f.h, "canary latency and threads over time")
	if len(pts) == 0 {
		return s.HTML()
	}
	half := min(halfGapUS(pts), maxTimeUS)
	xs := niceTime(clampTime(pts[0].TimeUS)-half, clampTime(pts[len(pts)-1].TimeUS)+half, 8, f.x0(), f.x1())
	ly := latencyScale(pts, f)
	ry := threadScale(pts, knee, f)
	s.legend(f, []legendItem{
		{"max", style{stroke: colMax, width: 2}, legendLine},
		{"avg", style{stroke: colAvg, width: 2}, legendLine},
		{"median", style{stroke: colMedian, width: 2}, legendLine},
		{"Threads_connected", style{fill: colConn, opacity: 0.45}, legendBar},
		{"Threads_running", style{fill: colRunning, opacity: 0.6}, legendBar},
		{"knee", style{stroke: colKnee, width: 1.5, dash: "6 4"}, legendDash},
	})
	s.yAxis(f, axis{ly, "canary latency (log)", fmtDurationUS}, false, true)
	s.yAxis(f, axis{ry, "threads", fmtCount}, true, false)
	s.xAxis(f, axis{xs, "time (UTC)", xs.Label})
	drawThreadBars(s, pts, xs, ry, f, barWidth(xs.Map(float64(2*half))-xs.Map(0)))
	drawKneeLines(s, f, ry, knee)
	drawLatencyLines(s, pts, func(p ProbePoint) float64 { return xs.Map(float64(p.TimeUS)) }, ly)
	return s.HTML()
}

// drawKneeLines marks the knee and, when it differs, the configured cap
// on the thread axis; labels sit at opposite ends so they never overlap.
func drawKneeLines(s *svgWriter, f frame, ry linearScale, knee *Knee) {
	if knee == nil {
		return
	}
	hasCap := knee.CapThreads > 0 && knee.CapVariable != ""
	if hasCap && math.Abs(knee.CapThreads-knee.Threads) < 0.5 {
		s.hMarker(f, ry.Map(knee.Threads), colKnee, "6 4", "end",
			fmt.Sprintf("knee: %s running = %s", fmtNum(knee.Threads), knee.CapVariable))
		return
	}
	s.hMarker(f, ry.Map(knee.Threads), colKnee, "6 4", "end", fmt.Sprintf("knee: %s running", fmtNum(knee.Threads)))
	if hasCap {
		s.hMarker(f, ry.Map(knee.CapThreads), colCap, "2 3", "start",
			fmt.Sprintf("cap: %s = %s", knee.CapVariable, fmtNum(knee.CapThreads)))
	}
}

// halfGapUS is half the smallest interval between rounds: the room each
// round's bars get, and the padding that keeps the first and last bars
// inside the plot.
func halfGapUS(pts []ProbePoint) int64 {
	gap := int64(math.MaxInt64)
	for i := 1; i < len(pts); i++ {
		if d := clampTime(pts[i].TimeUS) - clampTime(pts[i-1].TimeUS); d > 0 {
			gap = min(gap, d)
		}
	}
	if gap == math.MaxInt64 {
		return 30e6 // one round: a minute's room
	}
	return max(gap/2, 1)
}

// barWidth is the width of a thread bar given the pixel room of a round:
// two bars side by side with a gap, never thinner than a line.
func barWidth(slot float64) float64 {
	return math.Max(1, math.Min(slot*0.4, 18))
}

func latencyScale(pts []ProbePoint, f frame) logScale {
	lo, hi := math.Inf(1), 0.0
	for _, p := range pts {
		for _, v := range []int64{p.MedianUS, p.AvgUS, p.MaxUS} {
			if v > 0 {
				lo, hi = math.Min(lo, float64(v)), math.Max(hi, float64(v))
			}
		}
	}
	return niceLog(lo, hi, f.y0(), f.y1())
}

func threadScale(pts []ProbePoint, knee *Knee, f frame) linearScale {
	hi := 0.0
	for _, p := range pts {
		hi = math.Max(hi, float64(max(p.ThreadsConnected, p.ThreadsRunning)))
	}
	if knee != nil {
		hi = math.Max(hi, math.Max(knee.Threads, knee.CapThreads))
	}
	return niceLinear(0, hi, 5, f.y0(), f.y1())
}

// drawThreadBars draws, for each round, Threads_connected and, right of
// it, Threads_running, centred on the round's time.
func drawThreadBars(s *svgWriter, pts []ProbePoint, xs timeScale, ry linearScale, f frame, w float64) {
	for _, p := range pts {
		x := xs.Map(float64(p.TimeUS))
		when := xs.Label(float64(p.TimeUS))
		s.rect(x-w, ry.Map(float64(p.ThreadsConnected)), w, f.y0()-ry.Map(float64(p.ThreadsConnected)),
			style{fill: colConn, opacity: 0.45}, fmt.Sprintf("%s Threads_connected %d", when, p.ThreadsConnected))
		s.rect(x, ry.Map(float64(p.ThreadsRunning)), w, f.y0()-ry.Map(float64(p.ThreadsRunning)),
			style{fill: colRunning, opacity: 0.6}, fmt.Sprintf("%s Threads_running %d", when, p.ThreadsRunning))
	}
}

// drawLatencyLines draws median, avg and max (max last, on top) with a
// tooltip per marker.
func drawLatencyLines(s *svgWriter, pts []ProbePoint, x func(ProbePoint) float64, ly logScale) {
	lines := []struct {
		name   string
		colour string
		get    func(ProbePoint) int64
	}{
		{"median", colMedian, func(p ProbePoint) int64 { return p.MedianUS }},
		{"avg", colAvg, func(p ProbePoint) int64 { return p.AvgUS }},
		{"max", colMax, func(p ProbePoint) int64 { return p.MaxUS }},
	}
	for _, l := range lines {
		xy := make([]point, len(pts))
		titles := make([]string, len(pts))
		for i, p := range pts {
			xy[i] = point{x(p), ly.Map(float64(l.get(p)))}
			titles[i] = fmt.Sprintf("%s %s (%d calls, %d running)", l.name, fmtDurationUS(float64(l.get(p))), p.Calls, p.ThreadsRunning)
		}
		s.lineSeries(xy, titles, l.colour, 3)
	}
}

// probeScatterSVG plots each round's latency against Threads_running (log
// y), median and max, with the knee as a vertical line.
func probeScatterSVG(pts []ProbePoint, knee *Knee) template.HTML {
	f := frame{w: 960, h: 380, left: 78, right: 30, top: 44, bottom: 52}
	s := newSVG(f.w, f.h, "canary latency against Threads_running")
	if len(pts) == 0 {
		return s.HTML()
	}
	hi := 0.0
	for _, p := range pts {
		hi = math.Max(hi, float64(p.ThreadsRunning))
	}
	if knee != nil {
		hi = math.Max(hi, math.Max(knee.Threads, knee.CapThreads))
	}
	xs := niceLinear(0, hi, 8, f.x0(), f.x1())
	ly := latencyScale(pts, f)
	s.legend(f, []legendItem{
		{"max", style{fill: colMax}, legendDot},
		{"median", style{fill: colMedian}, legendDot},
		{"knee", style{stroke: colKnee, width: 1.5, dash: "6 4"}, legendDash},
	})
	s.yAxis(f, axis{ly, "canary latency (log)", fmtDurationUS}, false, true)
	s.xAxis(f, axis{xs, "Threads_running", fmtCount})
	if knee != nil {
		s.vMarker(f, xs.Map(knee.Threads), colKnee, "6 4", fmt.Sprintf("knee: %s", fmtNum(knee.Threads)))
		if knee.CapThreads > 0 && knee.CapVariable != "" && knee.CapThreads != knee.Threads {
			s.vMarker(f, xs.Map(knee.CapThreads), colCap, "2 3", fmt.Sprintf("%s = %s", knee.CapVariable, fmtNum(knee.CapThreads)))
		}
	}
	for _, p := range pts {
		x := xs.Map(float64(p.ThreadsRunning))
		s.circle(x, ly.Map(float64(p.MedianUS)), 3.5, style{fill: colMedian, opacity: 0.8},
			fmt.Sprintf("%d running: median %s", p.ThreadsRunning, fmtDurationUS(float64(p.MedianUS))))
		s.circle(x, ly.Map(float64(p.MaxUS)), 3.5, style{fill: colMax, opacity: 0.8},
			fmt.Sprintf("%d running: max %s", p.ThreadsRunning, fmtDurationUS(float64(p.MaxUS))))
	}
	return s.HTML()
}
