package report

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
)

// redrawEvery limits how often the progress line is redrawn.
const redrawEvery = 100 * time.Millisecond

// Progress is a one-line progress bar (bytes done of total, rate, ETA) for a
// terminal. Unless w is a terminal it does nothing, so callers need not
// check. Set may be called often and from any goroutine: it redraws at
// most every 100 ms.
type Progress struct {
	mu      sync.Mutex
	w       io.Writer
	tty     bool // fixed at creation: read without the lock
	closed  bool
	width   int
	label   string
	total   int64
	done    int64
	start   time.Time
	drawn   time.Time
	now     func() time.Time
	visible bool
}

// NewProgress returns a progress line on w for total bytes (total <= 0: size
// unknown, no bar or ETA).
func NewProgress(w io.Writer, total int64, label string) *Progress {
	f, ok := w.(*os.File)
	tty := ok && term.IsTerminal(int(f.Fd()))
	width := 80
	if tty {
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 20 {
			width = cols
		}
	}
	return newProgress(w, total, label, tty, width, time.Now)
}

func newProgress(w io.Writer, total int64, label string, active bool, width int, now func() time.Time) *Progress {
	return &Progress{w: w, tty: active, width: width, label: label, total: total, start: now(), now: now}
}

// Set records that done bytes are processed and redraws if it is time.
func (p *Progress) Set(done int64) {
	if !p.tty {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.done = done
	if t := p.now(); t.Sub(p.drawn) >= redrawEvery {
		p.drawn = t
		p.draw(t)
	}
}

// Done clears the line, leaving the terminal as it was.
func (p *Progress) Done() {
	if !p.tty {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.visible {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.visible = false
	}
	p.closed = true
}

func (p *Progress) draw(t time.Time) {
	line := p.line(t.Sub(p.start))
	fmt.Fprint(p.w, "\r", line, "\x1b[K")
	p.visible = true
}

// line renders "label [=====>    ]  45% 12.3MB/27.4MB 45.6MB/s ETA 0:12",
// shortened to the terminal width.
func (p *Progress) line(elapsed time.Duration) string {
	rate := 0.0
	if elapsed > 0 {
		rate = float64(p.done) / elapsed.Seconds()
	}
	var stats string
	if p.total > 0 {
		frac := min(float64(p.done)/float64(p.total), 1)
		stats = fmt.Sprintf(" %3.0f%% %s/%s %s/s ETA %s", frac*100, bytesize(p.done), bytesize(p.total),
			bytesize(int64(rate)), eta(p.total-p.done, rate))
		barWidth := p.width - len(p.label) - runeLen(stats) - 4
		if barWidth >= 10 {
			return p.label + " " + bar(frac, barWidth) + stats
		}
		return p.label + stats
	}
	return p.label + fmt.Sprintf(" %s %s/s", bytesize(p.done), bytesize(int64(rate)))
}

func bar(frac float64, width int) string {
	full := int(frac * float64(width))
	b := strings.Repeat("=", full)
	if full < width {
		b += ">" + strings.Repeat(" ", width-full-1)
	}
	return "[" + b + "]"
}

func eta(left int64, rate float64) string {
	if rate <= 0 || left <= 0 {
		return "-:--"
	}
	s := int64(float64(left) / rate)
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}

func runeLen(s string) int { return len([]rune(s)) }
