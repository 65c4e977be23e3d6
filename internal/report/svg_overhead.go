package report

import (
	"fmt"
	"html/template"
	"math"

	"github.com/gapscope/gapscope/internal/sqltext"
)

const (
	colCost    = "#d62728"
	colNoCost  = "#9a9a9a"
	colUnsure  = "#e7ba52"
	colBaseRef = "#1f77b4"
)

// overheadSVG draws each configuration's TPS ratio to the baseline as a
// bar with its confidence interval as a whisker, and the baseline (1.0) as
// a vertical line. Bars whose difference stands above the noise are red.
func overheadSVG(rows []OverheadRow) template.HTML {
	const rowH = 28
	f := frame{w: 960, left: 180, right: 30, top: 44, bottom: 52}
	f.h = f.top + f.bottom + rowH*float64(len(rows))
	s := newSVG(f.w, f.h, "throughput ratio to the baseline per instrumentation setting")
	s.legend(f, []legendItem{
		{"cost above noise", style{fill: colCost}, legendBar},
		{"within noise", style{fill: colNoCost}, legendBar},
		{"noise too high to tell", style{fill: colUnsure}, legendBar},
		{"interval", style{stroke: colAxis, width: 1.5}, legendDash},
		{"baseline", style{stroke: colBaseRef, width: 1.5, dash: "6 4"}, legendDash},
	})
	hi := 1.0
	for _, r := range rows {
		hi = math.Max(hi, math.Max(r.Ratio, r.RatioHigh))
	}
	xs := niceLinear(0, hi, 6, f.x0(), f.x1())
	s.xAxis(f, axis{xs, "TPS ratio to baseline (1 = no cost)", fmtNum})
	for i, r := range rows {
		drawOverheadRow(s, f, xs, r, f.y1()+rowH*float64(i), rowH)
	}
	s.path([]point{{f.x0(), f.y1()}, {f.x0(), f.y0()}}, style{stroke: colAxis, width: 1})
	s.vMarker(f, xs.Map(1), colBaseRef, "6 4", "")
	return s.HTML()
}

func drawOverheadRow(s *svgWriter, f frame, xs linearScale, r OverheadRow, y, rowH float64) {
	colour := colNoCost
	switch r.Verdict {
	case VerdictAbove:
		colour = colCost
	case VerdictUnknown:
		colour = colUnsure
	}
	title := fmt.Sprintf("%s: ratio %.3f [%.3f, %.3f], median %s TPS, above noise: %s", r.Config, r.Ratio, r.RatioLow,
		r.RatioHigh, fmtNum(r.MedianTPS), r.Verdict)
	s.rect(f.x0(), y+6, xs.Map(r.Ratio)-f.x0(), rowH-12, style{fill: colour, opacity: 0.85}, title)
	if r.RatioHigh > r.RatioLow {
		mid := y + rowH/2
		lo, hi := xs.Map(r.RatioLow), xs.Map(r.RatioHigh)
		s.path([]point{{lo, mid}, {hi, mid}}, style{stroke: colAxis, width: 1.5})
		s.path([]point{{lo, mid - 5}, {lo, mid + 5}}, style{stroke: colAxis, width: 1.5})
		s.path([]point{{hi, mid - 5}, {hi, mid + 5}}, style{stroke: colAxis, width: 1.5})
	}
	s.text(f.x0()-8, y+rowH/2+4, "end", 0, colText, sqltext.Clip(r.Config, 24))
}
