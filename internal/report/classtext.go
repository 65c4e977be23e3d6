package report

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// ClassTextOptions shape the class report.
type ClassTextOptions struct {
	// Width is the line width; the profile table's item column and the
	// histogram's bars fit it (DefaultWidth if <= 0). Statement texts in
	// the detail sections are printed whole.
	Width int
	// Details is how many classes get a detail section (all if < 0).
	Details int
	// Heading names the grouping ("digest", "fingerprint") and the ranking
	// in the profile table's title.
	Heading string
}

// WriteClassReport writes the report a pt-query-digest user reads: the
// header, a profile table (rank, ID, response time and share, calls, time
// per call, variance-to-mean, item) over r.Digests in their order, then a
// detail section per class with its attribute table, its databases, users
// and hosts, its query-time histogram and its slowest statement.
func WriteClassReport(w io.Writer, r *ProfileResult, opts ClassTextOptions) error {
	if opts.Width <= 0 {
		opts.Width = DefaultWidth
	}
	bw := bufio.NewWriter(w)
	writeHeader(bw, r)
	writeProfileTable(bw, r, opts)
	writePartsTable(bw, r.Digests, opts.Width)
	for i, d := range r.Digests {
		if opts.Details >= 0 && i >= opts.Details {
			break
		}
		writeClassDetail(bw, r, i, d, opts.Width)
	}
	writeNotes(bw, r.Notes)
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing report: %w", err)
	}
	return nil
}

var profileColumns = []column{
	{"rank", 4}, {"query ID", 18}, {"response", 8}, {"%", 6}, {"calls", 7}, {"R/call", 7}, {"V/M", 6},
}

func writeProfileTable(w *bufio.Writer, r *ProfileResult, opts ClassTextOptions) {
	width := opts.Width
	if opts.Heading != "" {
		fmt.Fprintf(w, "# profile, classes by %s\n", opts.Heading)
	} else {
		w.WriteString("# profile\n")
	}
	writeRow(w, profileColumns, columnTitles(profileColumns), "item", width)
	for i, d := range r.Digests {
		cells := []string{
			fmt.Sprint(i + 1), shortID(d.Digest), duration(d.TotalUS), percent(d.TotalUS, r.TotalUS),
			count(d.Calls), duration(d.AvgUS), varianceToMean(d),
		}
		writeRow(w, profileColumns, cells, d.DigestText, width)
	}
}

func columnTitles(cols []column) []string {
	t := make([]string, len(cols))
	for i, c := range cols {
		t[i] = c.title
	}
	return t
}

// shortID is a class ID as the profile shows it: 0x and the last 16 hex
// digits (pt-query-digest 2.x's Query ID; 3.x prints all 32, in the JSON
// and the detail sections here).
func shortID(id string) string {
	if id == "" {
		return "-"
	}
	if len(id) > 16 {
		id = id[len(id)-16:]
	}
	return "0x" + strings.ToUpper(id)
}

// varianceToMean is pt-query-digest's V/M: stddev² / mean, in seconds, a
// measure of how dispersed the class's times are.
func varianceToMean(d DigestRow) string {
	if d.AvgUS <= 0 {
		return "0.00"
	}
	sd := float64(d.StddevUS) / 1e6
	return fmt.Sprintf("%.2f", sd*sd/(float64(d.AvgUS)/1e6))
}

// attrLine is one row of a class's attribute table.
type attrLine struct {
	name                     string
	pct                      string
	total, min, max, avg     string
	p95, stddev, median, p99 string
}

func writeClassDetail(w *bufio.Writer, r *ProfileResult, rank int, d DigestRow, width int) {
	calls := "calls"
	if d.Calls == 1 {
		calls = "call"
	}
	fmt.Fprintf(w, "\n# class %d: ID 0x%s, %s %s, %s of total time\n", rank+1, strings.ToUpper(d.Digest),
		count(d.Calls), calls, percent(d.TotalUS, r.TotalUS))
	if d.FirstSeenUS > 0 {
		fmt.Fprintf(w, "# first seen %s, last seen %s\n", timestamp(d.FirstSeenUS), timestamp(d.LastSeenUS))
	}
	writeAttrTable(w, attrLines(r, d))
	writeCounts(w, "databases", d.Databases)
	writeCounts(w, "users", d.Users)
	writeCounts(w, "hosts", d.Hosts)
	writeErrorCodes(w, d.ErrorsByCode)
	writeLockWaits(w, d)
	writePlan(w, d)
	writeHistogram(w, d, width)
	w.WriteString(d.DigestText)
	w.WriteString("\n")
	if d.Sample != nil && d.Sample.SQL != "" && d.Sample.SQL != d.DigestText { // commands without text have no sample to show
		fmt.Fprintf(w, "# slowest call (%s", duration(d.Sample.Latency))
		if d.Sample.DB != "" {
			fmt.Fprintf(w, ", db %s", d.Sample.DB)
		}
		w.WriteString("):\n")
		w.WriteString(d.Sample.SQL)
		w.WriteString("\n")
	}
}

func attrLines(r *ProfileResult, d DigestRow) []attrLine {
	tot := resultTotals(r)
	a := d.Attributes
	lines := []attrLine{
		{name: "count", pct: pct0(d.Calls, r.Statements), total: count(d.Calls)},
		{name: r.Metric + " time", pct: pct0(d.TotalUS, r.TotalUS), total: duration(d.TotalUS),
			min: duration(d.MinUS), max: duration(d.MaxUS), avg: duration(d.AvgUS),
			p95: duration(d.P95US), stddev: duration(d.StddevUS), median: duration(d.P50US), p99: duration(d.P99US)},
	}
	server := r.Metric == ServerLatency.String()
	if server {
		lines = append(lines, timeAttr("lock time", a.LockUS, tot.LockUS))
	}
	lines = append(lines, countAttr("rows sent", a.RowsSent, tot.RowsSent))
	if server { // only the server knows them
		lines = append(lines, countAttr("rows examined", a.RowsExamined, tot.RowsExamined),
			countAttr("rows affected", a.RowsAffected, tot.RowsAffected))
	}
	lines = append(lines, bytesAttr("bytes sent", a.BytesSent, tot.BytesSent))
	if !server {
		lines = append(lines, attrLine{name: "zero window", pct: pct0(d.ZeroWindowUS, tot.ZeroWindowUS), total: duration(d.ZeroWindowUS)})
	}
	lines = append(lines, attrLine{name: "errors", pct: pct0(d.Errors, tot.Errors), total: count(d.Errors)})
	return lines
}

// totals are the profile's sums of the attributes, for each class's share.
type totals struct {
	LockUS, RowsSent, RowsExamined, RowsAffected, BytesSent, ZeroWindowUS, Errors int64
}

func resultTotals(r *ProfileResult) totals {
	var t totals
	for _, d := range r.Digests {
		t.LockUS += d.Attributes.LockUS.Sum
		t.RowsSent += d.Attributes.RowsSent.Sum
		t.RowsExamined += d.Attributes.RowsExamined.Sum
		t.RowsAffected += d.Attributes.RowsAffected.Sum
		t.BytesSent += d.Attributes.BytesSent.Sum
		t.ZeroWindowUS += d.ZeroWindowUS
		t.Errors += d.Errors
	}
	return t
}

func pct0(part, whole int64) string {
	if whole <= 0 {
		return "0"
	}
	return fmt.Sprintf("%.0f", 100*float64(part)/float64(whole))
}

func timeAttr(name string, a Attr, total int64) attrLine {
	return attrLine{name: name, pct: pct0(a.Sum, total), total: duration(a.Sum), min: duration(a.Min), max: duration(a.Max), avg: duration(a.Avg)}
}

func countAttr(name string, a Attr, total int64) attrLine {
	return attrLine{name: name, pct: pct0(a.Sum, total), total: count(a.Sum), min: count(a.Min), max: count(a.Max), avg: count(a.Avg)}
}

func bytesAttr(name string, a Attr, total int64) attrLine {
	return attrLine{name: name, pct: pct0(a.Sum, total), total: bytesize(a.Sum), min: bytesize(a.Min), max: bytesize(a.Max), avg: bytesize(a.Avg)}
}

var attrColumns = []column{
	{"attribute", 14}, {"pct", 3}, {"total", 7}, {"min", 7}, {"max", 7}, {"avg", 7},
	{"95%", 7}, {"99%", 7}, {"stddev", 7}, {"median", 7},
}

func writeAttrTable(w *bufio.Writer, lines []attrLine) {
	writeCells(w, columnTitles(attrColumns))
	for _, l := range lines {
		writeCells(w, []string{l.name, l.pct, l.total, l.min, l.max, l.avg, l.p95, l.p99, l.stddev, l.median})
	}
}

// writeCells writes "# " and the attribute table's cells: the first
// left-aligned, the others right-aligned.
func writeCells(w *bufio.Writer, cells []string) {
	var b strings.Builder
	b.WriteString("# ")
	for i, c := range attrColumns {
		if i == 0 {
			fmt.Fprintf(&b, "%-*s", c.width, cells[i])
			continue
		}
		fmt.Fprintf(&b, " %*s", c.width, cells[i])
	}
	w.WriteString(strings.TrimRight(b.String(), " "))
	w.WriteString("\n")
}

func writeCounts(w *bufio.Writer, name string, counts []Count) {
	if len(counts) == 0 {
		return
	}
	fmt.Fprintf(w, "# %-14s", name)
	for i, c := range counts {
		if i > 0 {
			w.WriteString(",")
		}
		fmt.Fprintf(w, " %s (%s)", c.Value, count(c.Count))
	}
	w.WriteString("\n")
}

func writeErrorCodes(w *bufio.Writer, codes []ErrorCount) {
	if len(codes) == 0 {
		return
	}
	fmt.Fprintf(w, "# %-14s", "error codes")
	for i, c := range codes {
		if i > 0 {
			w.WriteString(",")
		}
		if c.Code == 0 {
			fmt.Fprintf(w, " %s (%s)", otherText, count(c.Count))
			continue
		}
		fmt.Fprintf(w, " %d (%s)", c.Code, count(c.Count))
	}
	w.WriteString("\n")
}

// writeLockWaits shows how many of the class's calls waited for a lock and
// how long in all, when some did: "2 of 3 calls waited 358ms in all
// (100.0% of the class's time)".
func writeLockWaits(w *bufio.Writer, d DigestRow) {
	if d.LockWaits == 0 {
		return
	}
	calls := "calls"
	if d.Calls == 1 {
		calls = "call"
	}
	fmt.Fprintf(w, "# %-14s %s of %s %s waited %s in all (%s of the class's time)\n", "lock waits",
		count(d.LockWaits), count(d.Calls), calls, duration(d.LockWaitUS), percent(d.LockWaitUS, d.TotalUS))
}

// writePlan shows the slow log's query-plan fields: each yes/no as the
// share of the class's calls that had it, the others as sums.
func writePlan(w *bufio.Writer, d DigestRow) {
	p := d.Plan
	if p == nil || p.Statements == 0 {
		return
	}
	share := func(n int64) string { return fmt.Sprintf("%.0f%%", 100*float64(n)/float64(p.Statements)) }
	fmt.Fprintf(w, "# %-14s full scan %s, full join %s, tmp table %s (on disk %s), filesort %s (on disk %s), query cache hit %s\n",
		"plan", share(p.FullScan), share(p.FullJoin), share(p.TmpTable), share(p.TmpTableOnDisk),
		share(p.Filesort), share(p.FilesortOnDisk), share(p.QCHit))
	fmt.Fprintf(w, "# %-14s tmp tables %s (on disk %s), merge passes %s\n", "", count(p.TmpTables), count(p.TmpDiskTables), count(p.MergePasses))
	if p.InnoDBIOReadOps+p.InnoDBIOReadWaitUS+p.InnoDBRecLockWaitUS+p.InnoDBQueueWaitUS+p.InnoDBPagesDistinct > 0 {
		fmt.Fprintf(w, "# %-14s IO reads %s (%s) waiting %s, row lock waits %s, queue waits %s, distinct pages %s\n", "innodb",
			count(p.InnoDBIOReadOps), bytesize(p.InnoDBIOReadBytes), duration(p.InnoDBIOReadWaitUS), duration(p.InnoDBRecLockWaitUS),
			duration(p.InnoDBQueueWaitUS), count(p.InnoDBPagesDistinct))
	}
	if p.PagesAccessed+p.PagesRead+p.PagesUpdated+p.OldRowsRead+p.EngineTimeUS > 0 {
		fmt.Fprintf(w, "# %-14s pages accessed %s, read %s (%s, prefetched %s), updated %s, old rows read %s, engine time %s\n", "engine",
			count(p.PagesAccessed), count(p.PagesRead), duration(p.PagesReadTimeUS), count(p.PagesPrefetched), count(p.PagesUpdated),
			count(p.OldRowsRead), duration(p.EngineTimeUS))
	}
}

// writeHistogram draws the query-time distribution as pt-query-digest does:
// one line per power of ten, bars scaled to the largest bucket and to the
// line width.
func writeHistogram(w *bufio.Writer, d DigestRow, width int) {
	fmt.Fprintf(w, "# %s time distribution\n", "query")
	var most int64
	for _, n := range d.Histogram {
		most = max(most, n)
	}
	bar := max(min(width-20, 64), 10)
	for i, n := range d.Histogram {
		fmt.Fprintf(w, "# %5s", HistogramLabels[i])
		if n > 0 && most > 0 {
			k := max(int(float64(bar)*float64(n)/float64(most)+0.5), 1)
			w.WriteString("  ")
			w.WriteString(strings.Repeat("#", k))
			fmt.Fprintf(w, " %s", count(n))
		}
		w.WriteString("\n")
	}
}
