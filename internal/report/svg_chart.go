package report

import "math"

// frame is a chart's canvas and the margins around its plot area: axes and
// their labels live in the margins, the legend in the top one.
type frame struct {
	w, h                     float64
	left, right, top, bottom float64
}

func (f frame) x0() float64 { return f.left }
func (f frame) x1() float64 { return f.w - f.right }
func (f frame) y0() float64 { return f.h - f.bottom } // the bottom edge: y grows downwards
func (f frame) y1() float64 { return f.top }

// axis is a scale with its title and tick format.
type axis struct {
	sc    scale
	label string
	fmt   func(float64) string
}

// Chart colours (a colour-blind-safe-ish categorical palette).
const (
	colAxis    = "#444"
	colGrid    = "#e3e3e3"
	colText    = "#222"
	colMax     = "#d62728"
	colAvg     = "#ff7f0e"
	colMedian  = "#1f77b4"
	colRunning = "#2ca02c"
	colConn    = "#9a9a9a"
	colKnee    = "#9467bd"
	colCap     = "#8c564b"
)

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"}

const tickLen = 5

// xAxis draws the bottom axis with its ticks, vertical grid lines and title.
func (s *svgWriter) xAxis(f frame, a axis) {
	for _, t := range a.sc.Ticks() {
		x := a.sc.Map(t)
		if x < f.x0()-0.5 || x > f.x1()+0.5 {
			continue
		}
		s.path([]point{{x, f.y1()}, {x, f.y0()}}, style{stroke: colGrid, width: 1})
		s.path([]point{{x, f.y0()}, {x, f.y0() + tickLen}}, style{stroke: colAxis, width: 1})
		s.text(x, f.y0()+tickLen+13, "middle", 0, colText, a.fmt(t))
	}
	s.path([]point{{f.x0(), f.y0()}, {f.x1(), f.y0()}}, style{stroke: colAxis, width: 1})
	s.text((f.x0()+f.x1())/2, f.h-8, "middle", 0, colText, a.label)
}

// yAxis draws a vertical axis on the left or right edge of the plot; grid
// adds horizontal grid lines (one axis per chart should).
func (s *svgWriter) yAxis(f frame, a axis, right, grid bool) {
	x, dir, anchor := f.x0(), -1.0, "end"
	if right {
		x, dir, anchor = f.x1(), 1, "start"
	}
	for _, t := range a.sc.Ticks() {
		y := a.sc.Map(t)
		if y < f.y1()-0.5 || y > f.y0()+0.5 {
			continue
		}
		if grid {
			s.path([]point{{f.x0(), y}, {f.x1(), y}}, style{stroke: colGrid, width: 1})
		}
		s.path([]point{{x, y}, {x + dir*tickLen, y}}, style{stroke: colAxis, width: 1})
		s.text(x+dir*(tickLen+3), y+4, anchor, 0, colText, a.fmt(t))
	}
	s.path([]point{{x, f.y1()}, {x, f.y0()}}, style{stroke: colAxis, width: 1})
	lx, rot := 16.0, -90.0
	if right {
		lx, rot = f.w-16, 90
	}
	s.text(lx, (f.y0()+f.y1())/2, "middle", rot, colText, a.label)
}

// legend kinds.
const (
	legendLine = iota
	legendBar
	legendDash
	legendDot
)

type legendItem struct {
	label string
	st    style
	kind  int
}

// legend draws its items in a row across the top margin, wrapping when the
// row is full. Text width is estimated (no font metrics without a browser).
func (s *svgWriter) legend(f frame, items []legendItem) {
	x, y := f.x0(), 14.0
	for _, it := range items {
		w := 26 + 6.8*float64(len([]rune(it.label))) + 14
		if x+w > f.x1() && x > f.x0() {
			x, y = f.x0(), y+16
		}
		s.legendMark(x, y, it)
		s.text(x+24, y+4, "start", 0, colText, it.label)
		x += w
	}
}

func (s *svgWriter) legendMark(x, y float64, it legendItem) {
	switch it.kind {
	case legendBar:
		s.rect(x, y-6, 18, 12, style{fill: it.st.fill, opacity: it.st.opacity}, "")
	case legendDot:
		s.circle(x+9, y, 3.5, style{fill: it.st.fill}, "")
	default:
		s.path([]point{{x, y}, {x + 18, y}}, it.st)
		if it.kind == legendLine {
			s.circle(x+9, y, 3, style{fill: it.st.stroke}, "")
		}
	}
}

// lineSeries draws a line through pts with a marker on each point; a NaN
// coordinate is a gap that breaks the line. titles (optional, one per
// point) become the markers' tooltips.
func (s *svgWriter) lineSeries(pts []point, titles []string, colour string, markerR float64) {
	var run []point
	flush := func() {
		s.polyline(run, style{stroke: colour, width: 2}, "")
		run = run[:0]
	}
	for _, p := range pts {
		if math.IsNaN(p.x) || math.IsNaN(p.y) {
			flush()
			continue
		}
		run = append(run, p)
	}
	flush()
	for i, p := range pts {
		if math.IsNaN(p.x) || math.IsNaN(p.y) {
			continue
		}
		title := ""
		if i < len(titles) {
			title = titles[i]
		}
		s.circle(p.x, p.y, markerR, style{fill: colour}, title)
	}
}

// hMarker draws a horizontal reference line at pixel y, labelled at the
// right (anchor "end") or left ("start") end.
func (s *svgWriter) hMarker(f frame, y float64, colour, dash, anchor, label string) {
	if y < f.y1() || y > f.y0() {
		return
	}
	s.path([]point{{f.x0(), y}, {f.x1(), y}}, style{stroke: colour, width: 1.5, dash: dash})
	x := f.x1() - 4
	if anchor == "start" {
		x = f.x0() + 4
	}
	s.text(x, y-4, anchor, 0, colour, label)
}

// vMarker draws a labelled vertical reference line at pixel x.
func (s *svgWriter) vMarker(f frame, x float64, colour, dash, label string) {
	if x < f.x0() || x > f.x1() {
		return
	}
	s.path([]point{{x, f.y1()}, {x, f.y0()}}, style{stroke: colour, width: 1.5, dash: dash})
	if label != "" {
		s.text(x+4, f.y1()+12, "start", 0, colour, label)
	}
}
