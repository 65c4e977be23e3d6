package report

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// DefaultWidth is the line width tables are fitted to when none is known.
const DefaultWidth = 120

// WriteProfileText writes r as a table for a terminal of width
// columns: the top digests by total time (all when top <= 0), then, when
// some statements were joined with the server, where their client time
// went. Digest texts are cut to fit the width.
func WriteProfileText(w io.Writer, r *ProfileResult, top, width int) error {
	bw := bufio.NewWriter(w)
	rows := r.Digests
	if top > 0 && len(rows) > top {
		rows = rows[:top]
	}
	writeHeader(bw, r)
	writeLatencyTable(bw, r, rows, width)
	writePartsTable(bw, rows, width)
	writeNotes(bw, r.Notes)
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing profile: %w", err)
	}
	return nil
}

func writeHeader(w *bufio.Writer, r *ProfileResult) {
	ranking := r.Metric + " latency"
	if r.MetricLabel != "" {
		ranking = r.MetricLabel
	}
	fmt.Fprintf(w, "# %s statements, %s connections, %s digests, ranked by total %s\n",
		count(r.Statements), count(r.Connections), count(max(r.Classes, int64(len(r.Digests)))), ranking)
	if len(r.Unknown) > 0 {
		fmt.Fprintf(w, "# unknown (not measured, not zero): %s\n", strings.Join(r.Unknown, ", "))
	}
	if r.FirstUS > 0 {
		fmt.Fprintf(w, "# %s .. %s (%s), total %s\n", timestamp(r.FirstUS), timestamp(r.LastUS),
			duration(r.LastUS-r.FirstUS), duration(r.TotalUS))
	}
	if len(r.ByCommand) > 0 {
		w.WriteString("# by command:")
		for i, c := range commandsByCount(r.ByCommand) {
			if i > 0 {
				w.WriteByte(',')
			}
			fmt.Fprintf(w, " %s %s", c, count(r.ByCommand[c]))
		}
		w.WriteByte('\n')
	}
	w.WriteByte('\n')
}

func commandsByCount(m map[string]int64) []string {
	cmds := make([]string, 0, len(m))
	for c := range m {
		cmds = append(cmds, c)
	}
	slices.SortFunc(cmds, func(a, b string) int {
		if m[a] != m[b] {
			return cmpDesc(m[a], m[b])
		}
		return strings.Compare(a, b)
	})
	return cmds
}

// column is a right-aligned cell of a fixed width.
type column struct {
	title string
	width int
}

var latencyColumns = []column{
	{"rank", 4}, {"total", 6}, {"%", 6}, {"calls", 7}, {"p50", 6}, {"p95", 6}, {"p99", 6},
	{"max", 6}, {"rows", 7}, {"bytes", 6}, {"errs", 5}, {"zwin", 6},
}

// serverColumns replace the wire-only zero-window column with the slow
// log's rows examined and lock time when ranking by server latency.
var serverColumns = append(slices.Clone(latencyColumns[:len(latencyColumns)-1]), column{"exam", 7}, column{"lock", 6})

var partsColumns = []column{
	{"rank", 4}, {"joined", 9}, {"request", 8}, {"queue", 8}, {"exec", 8}, {"stall", 8}, {"delivery", 8},
}

func writeLatencyTable(w *bufio.Writer, r *ProfileResult, rows []DigestRow, width int) {
	server := r.Metric == ServerLatency.String()
	cols := latencyColumns
	if server {
		cols = serverColumns
	}
	writeTitles(w, cols, width)
	for i, d := range rows {
		cells := []string{
			fmt.Sprint(i + 1), duration(d.TotalUS), percent(d.TotalUS, r.TotalUS), count(d.Calls),
			duration(d.P50US), duration(d.P95US), duration(d.P99US), duration(d.MaxUS),
			rowsCell(d), respBytes(r, d), count(d.Errors),
		}
		if server {
			lock, examined := d.Known()
			cells = append(cells, count(examined), dashIfZero(lock))
		} else {
			cells = append(cells, dashIfZero(d.ZeroWindowUS))
		}
		writeRow(w, cols, cells, d.DigestText, width)
	}
}

// rowsCell is a digest's rows: "?" when no call's rows are known (the
// header-only capture cut every answer and no server row gave the
// count), the known calls' sum and "+" (at least) when some are unknown.
func rowsCell(d DigestRow) string {
	switch {
	case d.RowsUnknown == 0:
		return count(d.Rows)
	case d.RowsUnknown >= d.Calls:
		return "?"
	}
	return count(d.Rows) + "+"
}

// respBytes is a digest's response bytes, "?" when the input cannot show
// them (the server's side only): unknown, not zero.
func respBytes(r *ProfileResult, d DigestRow) string {
	if slices.Contains(r.Unknown, UnknownRespBytes) {
		return "?"
	}
	return bytesize(d.RespBytes)
}

// writePartsTable shows, per digest with joined calls, each part's share of
// those calls' client time (docs/events.md: the parts sum to client_us).
func writePartsTable(w *bufio.Writer, rows []DigestRow, width int) {
	if !slices.ContainsFunc(rows, func(d DigestRow) bool { return d.Parts != nil }) {
		return
	}
	w.WriteString("\n# where the client's time went, joined calls only (% of their client time)\n\n")
	writeTitles(w, partsColumns, width)
	for i, d := range rows {
		if d.Parts == nil {
			continue
		}
		p := d.Parts
		cells := []string{
			fmt.Sprint(i + 1), count(d.Joined), percent(p.RequestUS, p.ClientUS), percent(p.QueueUS, p.ClientUS),
			percent(p.ExecUS, p.ClientUS), percent(p.SendStallUS, p.ClientUS), percent(p.DeliveryUS, p.ClientUS),
		}
		writeRow(w, partsColumns, cells, d.DigestText, width)
	}
}

func writeTitles(w *bufio.Writer, cols []column, width int) {
	titles := make([]string, len(cols))
	for i, c := range cols {
		titles[i] = c.title
	}
	writeRow(w, cols, titles, "digest text", width)
}

// writeRow writes right-aligned cells, then text cut to the rest of width.
func writeRow(w *bufio.Writer, cols []column, cells []string, text string, width int) {
	used := 0
	for i, c := range cols {
		if i > 0 {
			w.WriteByte(' ')
			used++
		}
		cell := cells[i]
		n := utf8.RuneCountInString(cell)
		for range c.width - n {
			w.WriteByte(' ')
		}
		w.WriteString(cell)
		used += max(c.width, n)
	}
	w.WriteString("  ")
	w.WriteString(fit(text, max(width-used-2, 20)))
	w.WriteByte('\n')
}

// fit makes text printable on one line and at most n runes long.
func fit(text string, n int) string {
	var b strings.Builder
	runes, cut := 0, utf8.RuneCountInString(text) > n
	for _, r := range text {
		if cut && runes == n-1 {
			b.WriteRune('…')
			break
		}
		if r < ' ' || r == 0x7f {
			r = ' '
		}
		b.WriteRune(r)
		runes++
	}
	return b.String()
}

func writeNotes(w *bufio.Writer, notes []string) {
	if len(notes) == 0 {
		return
	}
	w.WriteString("\nnotes:\n")
	for _, n := range notes {
		fmt.Fprintf(w, "  - %s\n", n)
	}
}

// Duration renders microseconds with three significant digits, as the
// reports and watch's live view write times: 850µs, 12.3ms, 1.23s, 2m03s,
// 1h02m.
func Duration(us int64) string { return duration(us) }

func duration(us int64) string {
	switch {
	case us < 1000:
		return fmt.Sprintf("%dµs", us)
	case us < 999_500: // would round to 1000ms
		return sig3(float64(us)/1e3, "ms")
	case us < 59_950_000: // would round to 60.0s
		return sig3(float64(us)/1e6, "s")
	case us < 60_000_000:
		return "1m00s"
	case us < 3_600_000_000:
		s := us / 1_000_000
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	}
	m := us / 60_000_000
	return fmt.Sprintf("%dh%02dm", m/60, m%60)
}

// sig3 prints v (1 <= v < 1000) with three significant digits.
func sig3(v float64, unit string) string {
	switch {
	case v < 9.995:
		return fmt.Sprintf("%.2f%s", v, unit)
	case v < 99.95:
		return fmt.Sprintf("%.1f%s", v, unit)
	}
	return fmt.Sprintf("%.0f%s", v, unit)
}

func dashIfZero(us int64) string {
	if us == 0 {
		return "-"
	}
	return duration(us)
}

func percent(part, whole int64) string {
	if whole <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(part)/float64(whole))
}

// count renders n exactly with thousands separators below a million, and
// with three significant digits above.
func count(n int64) string {
	switch {
	case n < 0:
		return "-" + count(-n)
	case n >= 999_500_000:
		return sig3(float64(n)/1e9, "G")
	case n >= 1e6:
		return sig3(float64(n)/1e6, "M")
	case n >= 1000:
		return fmt.Sprintf("%d,%03d", n/1000, n%1000)
	}
	return fmt.Sprint(n)
}

func bytesize(n int64) string {
	switch {
	case n >= 999_500_000:
		return sig3(float64(n)/1e9, "GB")
	case n >= 999_500:
		return sig3(float64(n)/1e6, "MB")
	case n >= 1e3:
		return sig3(float64(n)/1e3, "kB")
	}
	return fmt.Sprintf("%dB", n)
}

func timestamp(us int64) string {
	return time.UnixMicro(us).UTC().Format("2006-01-02T15:04:05.000Z")
}

// WriteJSON writes v as indented JSON. Struct fields keep their declared
// order and map keys are sorted, so output is stable; HTML characters stay
// as they are (SQL has many '<').
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("writing JSON: %w", err)
	}
	return nil
}

// Micros renders microseconds as a duration rounded to 10 µs (10.1ms,
// 1.5s), as the commands' text output writes latencies.
func Micros(us int64) string {
	return (time.Duration(us) * time.Microsecond).Round(10 * time.Microsecond).String()
}
