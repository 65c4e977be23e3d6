package collect

import "fmt"

// A history row becomes visible when its event ends, and TIMER_END is read
// just before that. So an incremental read asks only for rows whose
// TIMER_END is above the highest one returned so far (the high-water mark)
// minus a slack. The slack covers rows that become visible after a row of
// another thread that ended later: the thread was descheduled between
// reading its timer and writing its row, or the previous read's scan had
// passed the row's slot when it was written. Rows inside the slack that were
// returned before are recognised by the thread marks, so the slack costs
// transfer, never duplicates.

// Slack bounds, in picoseconds. The slack is four times the largest
// lateness observed recently, within these bounds: late rows are rare and
// late by milliseconds (docs/performance.md, "Rows written late to
// history_long").
const (
	defaultMinSlack = 50 * 1_000_000_000 // 50 ms
	maxSlack        = 2 * PicosPerSec
)

// halfRange is half the uint64 range: TIMER_END is compared modulo 2^64
// (picoseconds wrap after 213 days of uptime), a value being "after"
// another when it is less than halfRange ahead of it.
const halfRange = 1 << 63

// after reports whether timer a is after timer b, modulo 2^64.
func after(a, b uint64) bool { return int64(a-b) > 0 }

// window is the TIMER_END range a read covers: all rows, or the rows with
// TIMER_END in (from, from+2^63) modulo 2^64 and the rows without one
// (NULL: an untimed instrument, never filtered out).
type window struct {
	all  bool
	from uint64
}

// admits reports whether a row with this TIMER_END (0 for NULL) is inside
// the window; it is the Go twin of sql.
func (w window) admits(timerEnd uint64) bool {
	return w.all || timerEnd == 0 || after(timerEnd, w.from)
}

// sql renders the window as a WHERE condition on col ("" for all rows).
func (w window) sql(col string) string {
	if w.all {
		return ""
	}
	if w.from < halfRange {
		return fmt.Sprintf("(%[1]s > %[2]d AND %[1]s < %[3]d OR %[1]s IS NULL)", col, w.from, w.from+halfRange)
	}
	return fmt.Sprintf("(%[1]s > %[2]d OR %[1]s < %[3]d OR %[1]s IS NULL)", col, w.from, w.from-halfRange)
}

// timerWindow tracks the high-water mark, the observed lateness and the
// window start of an incremental cursor.
type timerWindow struct {
	minSlack uint64
	set      bool   // a read returned a timed row
	hwm      uint64 // highest TIMER_END returned
	from     uint64 // window start; never moves back
	late     uint64 // recent largest lateness (decays)
	maxLate  uint64 // largest lateness ever observed
}

func (t *timerWindow) window() window {
	if !t.set {
		return window{all: true}
	}
	return window{from: t.from}
}

// slack is how far below the high-water mark the next window starts.
func (t *timerWindow) slack() uint64 { return min(max(t.minSlack, 4*t.late), maxSlack) }

// observe takes one read's rows and the indices of the new ones: a new row
// that ended before the previous high-water mark was invisible to the
// previous read (else it would have been returned then), which measures
// how late rows become visible.
func (t *timerWindow) observe(keys []eventKey, fresh []int) {
	prev, hadPrev := t.hwm, t.set
	var late uint64
	for _, i := range fresh {
		te := keys[i].TimerEnd
		if te == 0 {
			continue
		}
		if hadPrev && after(prev, te) {
			late = max(late, prev-te)
		}
		if !t.set || after(te, t.hwm) {
			t.hwm, t.set = te, true
		}
	}
	t.late = max(late, t.late-t.late/16)
	t.maxLate = max(t.maxLate, late)
	if !t.set {
		return
	}
	if from := t.hwm - t.slack(); !hadPrev || after(from, t.from) {
		t.from = from
	}
}
