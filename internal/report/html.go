package report

import (
	"bufio"
	"cmp"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/sqltext"
)

// HTMLData is what the HTML report shows. Sections without data are left
// out. LoadStore fills it from a store (the overhead table excepted: the
// overhead package rebuilds that one).
type HTMLData struct {
	Title     string
	Generated time.Time
	Source    string // where the data came from, e.g. the store file
	Runs      []RunInfo
	// Probe holds canary rounds (gapscope probe), in time order.
	Probe []ProbePoint
	// Statements summarises watch data; nil when there is none.
	Statements *StatementSummary
	Findings   []event.Finding
	Overhead   []OverheadRow
	Plans      []PlanEntry
	// Transactions are the transactions a store kept (nil: none).
	Transactions *TxnReport
	// LockWaits are the digests whose statements waited for locks, most
	// lock wait first: from a store's per-minute totals, or from the
	// statements when none are given.
	LockWaits []LockWaitRow
	// Notes are said under the title: what the input lacked (a torn
	// events file's last line).
	Notes []string
}

// RunInfo is one gapscope run that wrote the data.
type RunInfo struct {
	ID             int64
	StartUS, EndUS int64 // EndUS 0: still running, or killed
	Command        string
	DSN            string // redacted
	Notes          string
}

// ProbePoint is one canary round beside the concurrency it ran under.
type ProbePoint struct {
	TimeUS                           int64
	Name                             string
	Calls, Errors                    int64
	MinUS, AvgUS, MedianUS, MaxUS    int64
	ThreadsConnected, ThreadsRunning int64
}

// OverheadRow is one instrumentation setting measured by gapscope overhead
// (the overhead case's table): throughput over rounds and the ratio to the
// baseline's with its confidence interval from paired rounds.
type OverheadRow struct {
	Config                     string
	Rounds, Pairs              int
	MedianTPS, MinTPS, MaxTPS  float64
	Ratio, RatioLow, RatioHigh float64 // TPS ratio to the baseline; Low-High: the interval
	AvgLatencyUS, P95LatencyUS float64
	// Verdict is VerdictBaseline, VerdictAbove, VerdictWithin or
	// VerdictUnknown.
	Verdict string
}

// Verdicts of OverheadRow (the words gapscope overhead prints).
const (
	VerdictBaseline = "baseline"
	VerdictAbove    = "yes"
	VerdictWithin   = "no"
	VerdictUnknown  = "noise too high to tell"
)

// PlanEntry is one plan caught for a digest.
type PlanEntry struct {
	TimeUS       int64
	ConnID       uint64
	Digest       string
	DigestText   string
	Source       string // SHOW EXPLAIN FOR, EXPLAIN FOR CONNECTION, EXPLAIN
	Plan         string
	ExecUS       int64
	RowsExamined int64
}

//go:embed templates/report.html.tmpl
var templateFS embed.FS

var reportTemplate = template.Must(template.New("report.html.tmpl").Funcs(template.FuncMap{
	"dur":   func(us int64) string { return fmtDurationUS(float64(us)) },
	"durf":  fmtDurationUS,
	"num":   fmtNum,
	"utc":   fmtTimeUS,
	"ratio": func(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) },
	"share": share,
	"clip":  sqltext.Clip,
	"txt":   txnText,
}).ParseFS(templateFS, "templates/report.html.tmpl"))

// WriteHTML writes d as one self-contained HTML document: inline CSS and
// SVG, no script, nothing fetched over the network.
func WriteHTML(w io.Writer, d *HTMLData) error {
	bw := bufio.NewWriter(w)
	if err := reportTemplate.Execute(bw, buildView(d)); err != nil {
		return fmt.Errorf("writing HTML report: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing HTML report: %w", err)
	}
	return nil
}

// htmlView is HTMLData prepared for the template: charts drawn, findings
// ordered, plans grouped.
type htmlView struct {
	*HTMLData
	ProbeCharts  []probeCharts
	Knee         *Knee
	Findings     []findingView
	Decomp       template.HTML
	DecompRows   []DigestRow
	DecompLocks  bool // some decomposed digest waited for locks: the table has a column for it
	LockRows     []LockWaitRow
	LockMinutes  bool // LockRows come from a store's per-minute totals: every statement counted
	StmtCount    int64
	JoinedCount  int64
	PoolQueue    template.HTML
	OverheadSVG  template.HTML
	PlanGroups   []planGroup
	GeneratedUTC string
}

type probeCharts struct {
	Name     string
	Rounds   int
	Timeline template.HTML
	Scatter  template.HTML
}

func buildView(d *HTMLData) *htmlView {
	v := &htmlView{HTMLData: d, Knee: KneeFrom(d.Findings)}
	if !d.Generated.IsZero() {
		v.GeneratedUTC = d.Generated.UTC().Format("2006-01-02 15:04:05 UTC")
	}
	for _, name := range probeNames(d.Probe) {
		pts := probeByName(d.Probe, name)
		v.ProbeCharts = append(v.ProbeCharts, probeCharts{Name: name, Rounds: len(pts),
			Timeline: probeTimelineSVG(pts, v.Knee), Scatter: probeScatterSVG(pts, v.Knee)})
	}
	v.Findings = findingViews(d.Findings)
	v.LockRows, v.LockMinutes = d.LockWaits, d.LockWaits != nil
	if v.LockRows == nil && d.Statements != nil {
		v.LockRows = lockWaitsOf(d.Statements)
	}
	if s := d.Statements; s != nil && s.Len() > 0 {
		v.StmtCount, v.JoinedCount = s.Len(), s.joined
		v.DecompRows = s.TopDecomposed(topDigests)
		v.DecompLocks = slices.ContainsFunc(v.DecompRows, func(r DigestRow) bool { return r.LockWaits > 0 })
		if len(v.DecompRows) > 0 {
			v.Decomp = decompositionSVG(v.DecompRows)
		}
		if series := s.PoolQueue(); len(series) > 0 {
			v.PoolQueue = poolQueueSVG(series)
		}
	}
	if len(d.Overhead) > 0 {
		v.OverheadSVG = overheadSVG(d.Overhead)
	}
	v.PlanGroups = groupPlans(d.Plans)
	return v
}

// topDigests is how many digests the decomposition chart shows.
const topDigests = 10

func fmtTimeUS(us int64) string {
	if us == 0 {
		return "—"
	}
	return time.UnixMicro(us).UTC().Format("2006-01-02 15:04:05")
}

// Knee is the concurrency knee a CONCURRENCY_KNEE finding reports: latency
// climbs once more than Threads statements run; the cap in force, when
// one matched, is CapVariable = CapThreads.
type Knee struct {
	Threads     float64
	CapThreads  float64
	CapVariable string
}

// KneeFrom returns the knee of the first CONCURRENCY_KNEE finding with a
// numeric knee_threads, or nil.
func KneeFrom(findings []event.Finding) *Knee {
	for _, f := range findings {
		if f.Code != "CONCURRENCY_KNEE" {
			continue
		}
		n, ok := evidenceNumber(f.Evidence["knee_threads"])
		if !ok {
			continue
		}
		k := &Knee{Threads: n}
		k.CapThreads, _ = evidenceNumber(f.Evidence["cap_threads"])
		k.CapVariable, _ = f.Evidence["cap_variable"].(string)
		return k
	}
	return nil
}

// evidenceNumber reads a number from evidence, which holds Go numbers when
// fresh from a rule and float64 when decoded from a store.
func evidenceNumber(v any) (float64, bool) {
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case float32:
		f = float64(x)
	case int:
		f = float64(x)
	case int64:
		f = float64(x)
	case int32:
		f = float64(x)
	case uint64:
		f = float64(x)
	case json.Number:
		var err error
		if f, err = x.Float64(); err != nil {
			return 0, false
		}
	case string:
		var err error
		if f, err = strconv.ParseFloat(x, 64); err != nil {
			return 0, false
		}
	default:
		return 0, false
	}
	return f, !math.IsNaN(f) && !math.IsInf(f, 0)
}

// probeNames lists the probe workloads in order of first appearance.
func probeNames(pts []ProbePoint) []string {
	var names []string
	for _, p := range pts {
		if !slices.Contains(names, p.Name) {
			names = append(names, p.Name)
		}
	}
	return names
}

func probeByName(pts []ProbePoint, name string) []ProbePoint {
	var out []ProbePoint
	for _, p := range pts {
		if p.Name == name {
			out = append(out, p)
		}
	}
	slices.SortStableFunc(out, func(a, b ProbePoint) int { return cmp.Compare(a.TimeUS, b.TimeUS) })
	return out
}

type findingView struct {
	event.Finding
	Evidence []evidenceRow
}

type evidenceRow struct {
	Key, Value string
	Block      bool // structured: shown as indented JSON
}

// findingViews orders findings most severe first (stable otherwise) and
// renders their evidence by sorted key.
func findingViews(fs []event.Finding) []findingView {
	sorted := slices.Clone(fs)
	slices.SortStableFunc(sorted, event.MoreSevere)
	out := make([]findingView, 0, len(sorted))
	for _, f := range sorted {
		fv := findingView{Finding: f}
		for _, k := range slices.Sorted(maps.Keys(f.Evidence)) {
			fv.Evidence = append(fv.Evidence, evidenceHTML(k, f.Evidence[k]))
		}
		out = append(out, fv)
	}
	return out
}

// maxEvidenceHTML bounds one structured evidence value in the page.
const maxEvidenceHTML = 20_000

func evidenceHTML(k string, v any) evidenceRow {
	switch v.(type) {
	case map[string]any, []any, []map[string]any:
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return evidenceRow{Key: k, Value: fmt.Sprint(v)}
		}
		return evidenceRow{Key: k, Value: sqltext.Clip(string(b), maxEvidenceHTML), Block: true}
	}
	return evidenceRow{Key: k, Value: evidenceValue(v)}
}

// planGroup is the plan history of one digest.
type planGroup struct {
	Digest, DigestText string
	Plans              []planView
	Omitted            int
	Signatures         int // distinct plan texts
}

type planView struct {
	PlanEntry
	Changed bool // differs from the previous plan of the digest
}

// maxPlansPerDigest bounds a digest's history in the page (the newest are
// kept).
const maxPlansPerDigest = 50

func groupPlans(plans []PlanEntry) []planGroup {
	var order []string
	by := map[string]*planGroup{}
	for _, p := range plans {
		key := p.Digest
		if key == "" {
			key = p.DigestText
		}
		g := by[key]
		if g == nil {
			g = &planGroup{Digest: p.Digest, DigestText: p.DigestText}
			by[key] = g
			order = append(order, key)
		}
		changed := len(g.Plans) > 0 && g.Plans[len(g.Plans)-1].Plan != p.Plan
		g.Plans = append(g.Plans, planView{PlanEntry: p, Changed: changed})
	}
	out := make([]planGroup, 0, len(order))
	for _, k := range order {
		g := by[k]
		seen := map[string]bool{}
		for _, p := range g.Plans {
			seen[p.Plan] = true
		}
		g.Signatures = len(seen)
		if n := len(g.Plans); n > maxPlansPerDigest {
			g.Omitted = n - maxPlansPerDigest
			g.Plans = g.Plans[n-maxPlansPerDigest:]
		}
		out = append(out, *g)
	}
	return out
}
