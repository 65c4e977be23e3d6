package report

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gapscope/gapscope/internal/event"
)

// TimeBound is --since or --until: absolute, or relative to the input's end.
type TimeBound struct {
	Set      bool
	US       int64         // absolute, Unix microseconds
	Before   time.Duration // relative: this long before the input's end
	Relative bool
}

// Resolve is the bound in Unix microseconds for an input ending at endUS.
func (b TimeBound) Resolve(endUS int64) int64 {
	if b.Relative {
		return endUS - b.Before.Microseconds()
	}
	return b.US
}

// ParseTimeBound reads an absolute time (zone-less ones in loc) or a
// duration with s, m, h or d, counted back from the input's end as
// pt-query-digest does. flag names the option in the error.
func ParseTimeBound(flag, s string, loc *time.Location) (TimeBound, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return TimeBound{}, nil
	}
	if d, ok := parseDays(s); ok {
		return TimeBound{Set: true, Relative: true, Before: d}, nil
	}
	for _, layout := range timeBoundLayouts {
		if t, err := time.ParseInLocation(layout, s, loc); err == nil {
			return TimeBound{Set: true, US: t.UnixMicro()}, nil
		}
	}
	return TimeBound{}, fmt.Errorf("%s %q: not a time (2024-05-06T07:08:09Z, '2024-05-06 07:08:09', 2024-05-06) nor a duration (30m, 2h, 1d)", flag, s)
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

// EmptyWindow reports whether since and until, both given in the same
// kind (absolute, or both counted back from the input's end), leave no time
// between them. Mixed kinds are judged only once the input's end is known.
func EmptyWindow(since, until TimeBound) bool {
	if !since.Set || !until.Set || since.Relative != until.Relative {
		return false
	}
	if since.Relative {
		return since.Before <= until.Before
	}
	return since.US >= until.US
}

// Selector decides which statements reach the profile and counts the
// others, so that the report says how many it left out and why.
type Selector struct {
	filter       *Filter
	from, to     int64 // Unix µs; 0: unbounded
	timed        bool
	filteredOut  int64
	outsideTime  int64
	withoutStart int64
}

// NewSelector keeps the statements filter matches (nil: all) that started
// between since and until, resolved against an input ending at endUS.
func NewSelector(filter *Filter, since, until TimeBound, endUS int64) *Selector {
	s := &Selector{filter: filter, timed: since.Set || until.Set}
	if since.Set {
		s.from = since.Resolve(endUS)
	}
	if until.Set {
		s.to = until.Resolve(endUS)
	}
	return s
}

// Keep reports whether st (with its slow-log extras x) is selected.
func (s *Selector) Keep(st *event.Statement, x *Extra) bool {
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

// Notes say how many statements were left out, and by which option.
func (s *Selector) Notes() []string {
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
