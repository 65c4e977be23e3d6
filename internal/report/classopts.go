package report

import (
	"io"
	"os"
	"strconv"

	"golang.org/x/term"
)

// ClassOptions are the class report's options that digest and analyze
// share, validated: which statements count (Filter, Since, Until), how
// they group (Fingerprint), how classes rank (Order) and how many show
// (Limit), at what line width (0: the terminal's).
type ClassOptions struct {
	Fingerprint bool
	Order       OrderBy
	Limit       *Limit
	Filter      *Filter
	Since       TimeBound
	Until       TimeBound
	Width       int
}

// Relative reports whether a bound needs the input's end.
func (o *ClassOptions) Relative() bool { return o.Since.Relative || o.Until.Relative }

// Selector keeps the statements Filter, Since and Until select, for an
// input ending at endUS.
func (o *ClassOptions) Selector(endUS int64) *Selector {
	return NewSelector(o.Filter, o.Since, o.Until, endUS)
}

// Rank orders and cuts the result: Order, then Limit (or, in text output
// without a Limit, the top classes).
func (o *ClassOptions) Rank(r *ProfileResult, text bool, top int) {
	r.Sort(o.Order)
	switch {
	case o.Limit != nil:
		o.Limit.Apply(r, o.Order)
	case text && top > 0:
		Limit{N: top}.Apply(r, o.Order)
	}
}

// WriteClassText writes the class report at the terminal's width.
func (o *ClassOptions) WriteClassText(w io.Writer, r *ProfileResult) error {
	heading := "digest"
	if o.Fingerprint {
		heading = "fingerprint"
	}
	heading += ", ranked by " + o.Order.String()
	return WriteClassReport(w, r, ClassTextOptions{Width: TextWidth(o.Width, w), Details: -1, Heading: heading})
}

// TextWidth is width when positive, else COLUMNS, else the terminal's
// width when w is one, else DefaultWidth: piped output keeps a stable
// width.
func TextWidth(width int, w io.Writer) int {
	if width > 0 {
		return width
	}
	if c, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && c >= 60 {
		return c
	}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols >= 60 {
			return cols
		}
	}
	return DefaultWidth
}

// IsTerminal reports whether w is a terminal (live views and progress
// lines redraw in place only there).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
