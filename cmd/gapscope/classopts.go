package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/report"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

// classFlags are the report options digest and analyze share: which
// statements count, how they group, how classes rank and how many show.
type classFlags struct {
	groupBy string
	orderBy string
	limit   string
	filter  string
	since   string
	until   string
	width   int
}

func (f *classFlags) register(cmd *cobra.Command, groupBy bool) {
	fl := cmd.Flags()
	if groupBy {
		fl.StringVar(&f.groupBy, "group-by", "digest", "classes: digest (literals out, names kept) or fingerprint (pt-query-digest's classes and Query IDs)")
	}
	fl.StringVar(&f.orderBy, "order-by", "query_time:sum", "rank classes by ATTRIBUTE:sum|max|cnt (query_time, lock_time, rows_sent, rows_examined, rows_affected, bytes_sent, errors, zero_window)")
	fl.StringVar(&f.limit, "limit", "", "classes to report: N, N% (those making N% of the ranking total) or N%:M; overrides --top, applies to JSON too")
	fl.StringVar(&f.filter, "filter", "", "only statements matching this expression (see --help)")
	fl.StringVar(&f.since, "since", "", "only statements started at or after this time: 2024-05-06T07:08:09Z, '2024-05-06 07:08:09', 2024-05-06, or a duration (30m, 2h, 1d) before the input's end")
	fl.StringVar(&f.until, "until", "", "only statements started before this time (same forms as --since)")
	fl.IntVar(&f.width, "width", 0, "text line width (0: the terminal's, from COLUMNS or the tty; 120 when not a terminal)")
}

// classOptions are classFlags validated.
type classOptions struct {
	fingerprint bool
	order       report.OrderBy
	limit       *report.Limit
	filter      *report.Filter
	since       timeBound
	until       timeBound
	width       int
}

// timeBound is --since or --until: absolute, or relative to the input's end.
type timeBound struct {
	set      bool
	us       int64         // absolute, Unix microseconds
	before   time.Duration // relative: this long before the input's end
	relative bool
}

func (b timeBound) resolve(endUS int64) int64 {
	if b.relative {
		return endUS - b.before.Microseconds()
	}
	return b.us
}

func (f *classFlags) options(metric report.Metric, loc *time.Location) (classOptions, error) {
	var o classOptions
	var err error
	switch f.groupBy {
	case "", "digest":
	case "fingerprint":
		o.fingerprint = true
	default:
		return o, usagef("--group-by must be digest or fingerprint, not %q", f.groupBy)
	}
	if o.order, err = report.ParseOrderBy(f.orderBy); err != nil {
		return o, usageError{err}
	}
	if f.limit != "" {
		l, err := report.ParseLimit(f.limit)
		if err != nil {
			return o, usageError{err}
		}
		o.limit = &l
	}
	if strings.TrimSpace(f.filter) != "" {
		if o.filter, err = report.ParseFilter(f.filter, metric); err != nil {
			return o, usageError{err}
		}
	}
	if o.since, err = parseTimeBound("--since", f.since, loc); err != nil {
		return o, err
	}
	if o.until, err = parseTimeBound("--until", f.until, loc); err != nil {
		return o, err
	}
	if emptyWindow(o.since, o.until) {
		return o, usagef("--since is not before --until (%s, %s): no statement could be reported", f.since, f.until)
	}
	if f.width < 0 || (f.width > 0 && f.width < 60) {
		return o, usagef("--width must be 0 (the terminal's) or at least 60, not %d", f.width)
	}
	o.width = f.width
	return o, nil
}

// emptyWindow reports whether --since and --until, both given in the same
// kind (absolute, or both counted back from the input's end), leave no time
// between them. Mixed kinds are judged only once the input's end is known.
func emptyWindow(since, until timeBound) bool {
	if !since.set || !until.set || since.relative != until.relative {
		return false
	}
	if since.relative {
		return since.before <= until.before
	}
	return since.us >= until.us
}

// relative reports whether a bound needs the input's end.
func (o *classOptions) relative() bool { return o.since.relative || o.until.relative }

// parseTimeBound reads an absolute time (zone-less ones in loc) or a
// duration with s, m, h or d, counted back from the input's end as
// pt-query-digest does.
func parseTimeBound(flag, s string, loc *time.Location) (timeBound, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return timeBound{}, nil
	}
	if d, ok := parseDays(s); ok {
		return timeBound{set: true, relative: true, before: d}, nil
	}
	for _, layout := range timeBoundLayouts {
		if t, err := time.ParseInLocation(layout, s, loc); err == nil {
			return timeBound{set: true, us: t.UnixMicro()}, nil
		}
	}
	return timeBound{}, usagef("%s %q: not a time (2024-05-06T07:08:09Z, '2024-05-06 07:08:09', 2024-05-06) nor a duration (30m, 2h, 1d)", flag, s)
}

// timeBoundLayouts are the absolute forms --since and --until take, with a
// zone as RFC 3339 writes it (+01:00, Z) or as date(1) prints it (+0100),
// or without one (read in the --tz location).
var timeBoundLayouts = []string{
	time.RFC3339Nano, "2006-01-02T15:04:05.999999999Z0700",
	"2006-01-02 15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999Z0700",
	"2006-01-02 15:04:05.999999999 Z07:00", "2006-01-02 15:04:05.999999999 Z0700",
	"2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02",
}

// parseDays is time.ParseDuration plus whole days ("1d", "2d12h").
func parseDays(s string) (time.Duration, bool) {
	var days time.Duration
	if i := strings.IndexByte(s, 'd'); i > 0 {
		n, err := strconv.Atoi(s[:i])
		if err != nil || n < 0 {
			return 0, false
		}
		days, s = time.Duration(n)*24*time.Hour, s[i+1:]
		if s == "" {
			return days, true
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, false
	}
	return days + d, true
}

// selector decides which statements reach the profile and counts the
// others, so that the report says how many it left out and why.
type selector struct {
	filter       *report.Filter
	from, to     int64 // Unix µs; 0: unbounded
	timed        bool
	filteredOut  int64
	outsideTime  int64
	withoutStart int64
}

func newSelector(o classOptions, endUS int64) *selector {
	s := &selector{filter: o.filter, timed: o.since.set || o.until.set}
	if o.since.set {
		s.from = o.since.resolve(endUS)
	}
	if o.until.set {
		s.to = o.until.resolve(endUS)
	}
	return s
}

func (s *selector) keep(st *event.Statement, x *report.Extra) bool {
	if s.timed {
		switch t := st.TReqFirst; {
		case t <= 0:
			s.withoutStart++
			return false
		case (s.from != 0 && t < s.from) || (s.to != 0 && t >= s.to):
			s.outsideTime++
			return false
		}
	}
	if s.filter != nil && !s.filter.Match(st, x) {
		s.filteredOut++
		return false
	}
	return true
}

func (s *selector) notes() []string {
	var notes []string
	if s.outsideTime > 0 {
		notes = append(notes, fmt.Sprintf("%d statements outside --since/--until (%s .. %s) left out",
			s.outsideTime, boundText(s.from), boundText(s.to)))
	}
	if s.withoutStart > 0 {
		notes = append(notes, fmt.Sprintf("%d statements without a start time left out by --since/--until", s.withoutStart))
	}
	if s.filteredOut > 0 {
		notes = append(notes, fmt.Sprintf("%d statements left out by --filter", s.filteredOut))
	}
	return notes
}

func boundText(us int64) string {
	if us == 0 {
		return "-"
	}
	return time.UnixMicro(us).UTC().Format("2006-01-02T15:04:05Z")
}

// rank orders and cuts the result: --order-by, then --limit (or, in text
// output without --limit, --top).
func (o *classOptions) rank(r *report.ProfileResult, text bool, top int) {
	r.Sort(o.order)
	switch {
	case o.limit != nil:
		o.limit.Apply(r, o.order)
	case text && top > 0:
		report.Limit{N: top}.Apply(r, o.order)
	}
}

// writeClassText writes the class report at the terminal's width.
func (o *classOptions) writeClassText(w io.Writer, r *report.ProfileResult) error {
	heading := "digest"
	if o.fingerprint {
		heading = "fingerprint"
	}
	heading += ", ranked by " + o.order.String()
	return report.WriteClassReport(w, r, report.ClassTextOptions{Width: textWidth(o.width, w), Details: -1, Heading: heading})
}

// textWidth is --width, else COLUMNS, else the terminal's width when w is
// one, else report.DefaultWidth: piped output keeps a stable width.
func textWidth(flag int, w io.Writer) int {
	if flag > 0 {
		return flag
	}
	if c, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && c >= 60 {
		return c
	}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols >= 60 {
			return cols
		}
	}
	return report.DefaultWidth
}
