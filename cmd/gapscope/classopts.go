package main

import (
	"strings"
	"time"

	"github.com/gapscope/gapscope/internal/report"
	"github.com/spf13/cobra"
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

// options validates the flags.
func (f *classFlags) options(metric report.Metric, loc *time.Location) (report.ClassOptions, error) {
	var o report.ClassOptions
	var err error
	switch f.groupBy {
	case "", "digest":
	case "fingerprint":
		o.Fingerprint = true
	default:
		return o, usagef("--group-by must be digest or fingerprint, not %q", f.groupBy)
	}
	if o.Order, err = report.ParseOrderBy(f.orderBy); err != nil {
		return o, usageError{err}
	}
	if f.limit != "" {
		l, err := report.ParseLimit(f.limit)
		if err != nil {
			return o, usageError{err}
		}
		o.Limit = &l
	}
	if strings.TrimSpace(f.filter) != "" {
		if o.Filter, err = report.ParseFilter(f.filter, metric); err != nil {
			return o, usageError{err}
		}
	}
	if o.Since, err = report.ParseTimeBound("--since", f.since, loc); err != nil {
		return o, usageError{err}
	}
	if o.Until, err = report.ParseTimeBound("--until", f.until, loc); err != nil {
		return o, usageError{err}
	}
	if report.EmptyWindow(o.Since, o.Until) {
		return o, usagef("--since is not before --until (%s, %s): no statement could be reported", f.since, f.until)
	}
	if f.width < 0 || (f.width > 0 && f.width < 60) {
		return o, usagef("--width must be 0 (the terminal's) or at least 60, not %d", f.width)
	}
	o.Width = f.width
	return o, nil
}
