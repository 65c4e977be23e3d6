package report

import (
	"html/template"
	"math"
	"strconv"
	"strings"
)

// svgWriter builds one inline SVG element. Every text it writes is escaped
// here, so the result is safe to hand to html/template as template.HTML.
// Colours are presentation attributes, not CSS classes, so a chart looks
// the same pasted anywhere.
type svgWriter struct {
	b strings.Builder
}

// point is a pixel position.
type point struct{ x, y float64 }

// newSVG opens an SVG of w x h pixels; label is its accessible name.
func newSVG(w, h float64, label string) *svgWriter {
	s := &svgWriter{}
	s.b.WriteString(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 `)
	s.num(w)
	s.b.WriteByte(' ')
	s.num(h)
	s.b.WriteString(`" width="`)
	s.num(w)
	s.b.WriteString(`" height="`)
	s.num(h)
	s.b.WriteString(`" role="img" aria-label="`)
	s.b.WriteString(escapeXML(label))
	s.b.WriteString(`" font-family="sans-serif" font-size="12">`)
	s.b.WriteByte('\n')
	return s
}

// HTML closes the element and returns it for a template.
func (s *svgWriter) HTML() template.HTML {
	s.b.WriteString("</svg>")
	return template.HTML(s.b.String()) // #nosec: built from numbers and escaped text only
}

// num writes a coordinate to a tenth of a pixel: enough for a screen and
// byte-for-byte stable for golden files.
func (s *svgWriter) num(v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		v = 0
	}
	v = math.Round(v*10) / 10
	if v == 0 {
		v = 0 // no "-0"
	}
	s.b.WriteString(strconv.FormatFloat(v, 'f', -1, 64))
}

func (s *svgWriter) attr(name string, v float64) {
	s.b.WriteByte(' ')
	s.b.WriteString(name)
	s.b.WriteString(`="`)
	s.num(v)
	s.b.WriteByte('"')
}

func (s *svgWriter) sattr(name, v string) {
	if v == "" {
		return
	}
	s.b.WriteByte(' ')
	s.b.WriteString(name)
	s.b.WriteString(`="`)
	s.b.WriteString(escapeXML(v))
	s.b.WriteByte('"')
}

// style is a set of presentation attributes for one element.
type style struct {
	fill, stroke string
	width        float64 // stroke width
	dash         string
	opacity      float64 // 0 means opaque
}

func (s *svgWriter) style(st style) {
	fill := st.fill
	if fill == "" {
		fill = "none"
	}
	s.sattr("fill", fill)
	s.sattr("stroke", st.stroke)
	if st.stroke != "" && st.width > 0 {
		s.attr("stroke-width", st.width)
	}
	s.sattr("stroke-dasharray", st.dash)
	if st.opacity > 0 && st.opacity < 1 {
		s.attr("opacity", st.opacity)
	}
}

// closeWithTitle ends an element, with a hover tooltip when title is set.
func (s *svgWriter) closeWithTitle(tag, title string) {
	if title == "" {
		s.b.WriteString("/>\n")
		return
	}
	s.b.WriteString("><title>")
	s.b.WriteString(escapeXML(title))
	s.b.WriteString("</title></")
	s.b.WriteString(tag)
	s.b.WriteString(">\n")
}

// path draws straight segments through pts (axes, grid lines, markers).
func (s *svgWriter) path(pts []point, st style) {
	if len(pts) < 2 {
		return
	}
	s.b.WriteString(`<path d="`)
	for i, p := range pts {
		if i == 0 {
			s.b.WriteByte('M')
		} else {
			s.b.WriteString(" L")
		}
		s.num(p.x)
		s.b.WriteByte(' ')
		s.num(p.y)
	}
	s.b.WriteByte('"')
	s.style(st)
	s.b.WriteString("/>\n")
}

// polyline draws a data series' line.
func (s *svgWriter) polyline(pts []point, st style, title string) {
	if len(pts) < 2 {
		return
	}
	s.b.WriteString(`<polyline points="`)
	for i, p := range pts {
		if i > 0 {
			s.b.WriteByte(' ')
		}
		s.num(p.x)
		s.b.WriteByte(',')
		s.num(p.y)
	}
	s.b.WriteByte('"')
	s.style(st)
	s.closeWithTitle("polyline", title)
}

func (s *svgWriter) circle(x, y, r float64, st style, title string) {
	s.b.WriteString("<circle")
	s.attr("cx", x)
	s.attr("cy", y)
	s.attr("r", r)
	s.style(st)
	s.closeWithTitle("circle", title)
}

func (s *svgWriter) rect(x, y, w, h float64, st style, title string) {
	if h < 0 {
		y, h = y+h, -h
	}
	if w < 0 {
		x, w = x+w, -w
	}
	s.b.WriteString("<rect")
	s.attr("x", x)
	s.attr("y", y)
	s.attr("width", w)
	s.attr("height", h)
	s.style(st)
	s.closeWithTitle("rect", title)
}

// textTitled writes a label whose full text (title) shows on hover.
func (s *svgWriter) textTitled(x, y float64, anchor, fill, txt, title string) {
	s.b.WriteString("<text")
	s.attr("x", x)
	s.attr("y", y)
	s.sattr("text-anchor", anchor)
	s.sattr("fill", fill)
	s.b.WriteString("><title>")
	s.b.WriteString(escapeXML(title))
	s.b.WriteString("</title>")
	s.b.WriteString(escapeXML(txt))
	s.b.WriteString("</text>\n")
}

// text writes a label; anchor is start, middle or end; rotate turns it
// about (x, y) in degrees.
func (s *svgWriter) text(x, y float64, anchor string, rotate float64, fill, txt string) {
	s.b.WriteString("<text")
	s.attr("x", x)
	s.attr("y", y)
	s.sattr("text-anchor", anchor)
	s.sattr("fill", fill)
	if rotate != 0 {
		s.b.WriteString(` transform="rotate(`)
		s.num(rotate)
		s.b.WriteByte(' ')
		s.num(x)
		s.b.WriteByte(' ')
		s.num(y)
		s.b.WriteString(`)"`)
	}
	s.b.WriteByte('>')
	s.b.WriteString(escapeXML(txt))
	s.b.WriteString("</text>\n")
}

// escapeXML escapes text and attribute values, and drops the characters
// XML 1.0 forbids (a NUL in a digest text must not break the document).
func escapeXML(v string) string {
	var b strings.Builder
	for _, r := range v {
		switch {
		case r == '<':
			b.WriteString("&lt;")
		case r == '>':
			b.WriteString("&gt;")
		case r == '&':
			b.WriteString("&amp;")
		case r == '"':
			b.WriteString("&#34;")
		case r == '\'':
			b.WriteString("&#39;")
		case r == '\t' || r == '\n' || r == '\r':
			b.WriteByte(' ')
		case r < 0x20 || r == 0xFFFE || r == 0xFFFF || r == 0x2028 || r == 0x2029 || (r >= 0xD800 && r <= 0xDFFF):
			// forbidden (or line-breaking) characters: dropped
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
