package report

import (
	"fmt"
	"html/template"
	"math"

	"github.com/gapscope/gapscope/internal/sqltext"
)

// partColours follow the order of the decomposition: request, queue, exec,
// send stall, delivery.
var partColours = [5]string{"#8c564b", "#d62728", "#1f77b4", "#ff7f0e", "#2ca02c"}

var partNames = [5]string{"request", "queue", "exec", "send stall", "delivery"}

func partValues(p *Parts) [5]int64 {
	return [5]int64{p.RequestUS, p.QueueUS, p.ExecUS, p.SendStallUS, p.DeliveryUS}
}

// decompositionSVG draws one horizontal stacked bar per digest: its
// joined statements' total client time split into the five parts.
func decompositionSVG(rows []DigestRow) template.HTML {
	const rowH = 26
	f := frame{w: 960, left: 320, right: 30, top: 44, bottom: 52}
	f.h = f.top + f.bottom + rowH*float64(len(rows))
	s := newSVG(f.w, f.h, "decomposition of client time per digest")
	items := make([]legendItem, len(partNames))
	for i, n := range partNames {
		items[i] = legendItem{n, style{fill: partColours[i]}, legendBar}
	}
	s.legend(f, items)
	hi := 0.0
	for _, r := range rows {
		hi = math.Max(hi, float64(r.Parts.ClientUS))
	}
	xs := niceLinear(0, hi, 6, f.x0(), f.x1())
	s.xAxis(f, axis{xs, "total client time of joined statements", fmtDurationUS})
	for i, r := range rows {
		y := f.y1() + rowH*float64(i)
		drawStack(s, r, xs, y+4, rowH-8)
		label := r.DigestText
		if label == "" {
			label = r.Digest
		}
		s.textTitled(f.x0()-8, y+rowH/2+4, "end", colText, sqltext.Clip(label, 40), label)
	}
	s.path([]point{{f.x0(), f.y1()}, {f.x0(), f.y0()}}, style{stroke: colAxis, width: 1})
	return s.HTML()
}

func drawStack(s *svgWriter, r DigestRow, xs linearScale, y, h float64) {
	vals := partValues(r.Parts)
	var acc int64
	for i, v := range vals {
		if v <= 0 {
			continue
		}
		x0, x1 := xs.Map(float64(acc)), xs.Map(float64(acc+v))
		share := 0.0
		if r.Parts.ClientUS > 0 {
			share = 100 * float64(v) / float64(r.Parts.ClientUS)
		}
		s.rect(x0, y, x1-x0, h, style{fill: partColours[i]},
			fmt.Sprintf("%s: %s (%s%%) of %s, %d joined calls", partNames[i], fmtDurationUS(float64(v)), fmtNum(share),
				sqltext.Clip(r.DigestText, 80), r.Joined))
		acc += v
	}
}

// poolQueueSVG draws, per thread-pool group, the worst queue wait of a
// statement in each time bucket.
func poolQueueSVG(groups []GroupQueue) template.HTML {
	f := frame{w: 960, h: 360, left: 78, right: 30, top: 44, bottom: 52}
	s := newSVG(f.w, f.h, "queue wait per thread-pool group over time")
	lo, hi, top := int64(math.MaxInt64), int64(math.MinInt64), 0.0
	for _, g := range groups {
		for _, p := range g.Points {
			lo, hi = min(lo, clampTime(p.TimeUS)), max(hi, clampTime(p.TimeUS)+min(g.WidthUS, maxTimeUS))
			top = math.Max(top, float64(p.MaxUS))
		}
	}
	xs := niceTime(lo, hi, 8, f.x0(), f.x1())
	ys := niceLinear(0, top, 5, f.y0(), f.y1())
	items := make([]legendItem, len(groups))
	for i, g := range groups {
		items[i] = legendItem{fmt.Sprintf("group %d", g.Group), style{stroke: palette[i%len(palette)], width: 2}, legendLine}
	}
	s.legend(f, items)
	s.yAxis(f, axis{ys, "worst queue wait", fmtDurationUS}, false, true)
	s.xAxis(f, axis{xs, "time (UTC)", xs.Label})
	for i, g := range groups {
		s.lineSeries(queuePoints(g, xs, ys), queueTitles(g, xs), palette[i%len(palette)], 3)
	}
	return s.HTML()
}

// queuePoints places each bucket at its middle; a missing bucket (no
// statement of the group then) breaks the line rather than drawing a
// wait nobody measured.
func queuePoints(g GroupQueue, xs timeScale, ys linearScale) []point {
	var out []point
	for i, p := range g.Points {
		if i > 0 && p.TimeUS-g.Points[i-1].TimeUS > g.WidthUS {
			out = append(out, point{math.NaN(), math.NaN()})
		}
		out = append(out, point{xs.Map(float64(p.TimeUS) + float64(g.WidthUS)/2), ys.Map(float64(p.MaxUS))})
	}
	return out
}

// queueTitles has one title per point of queuePoints (gaps included).
func queueTitles(g GroupQueue, xs timeScale) []string {
	var out []string
	for i, p := range g.Points {
		if i > 0 && p.TimeUS-g.Points[i-1].TimeUS > g.WidthUS {
			out = append(out, "")
		}
		out = append(out, fmt.Sprintf("group %d at %s: worst %s, total %s over %d statements", g.Group,
			xs.Label(float64(p.TimeUS)), fmtDurationUS(float64(p.MaxUS)), fmtDurationUS(float64(p.TotalUS)), p.Calls))
	}
	return out
}
