package main

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/overhead"
	"github.com/gapscope/gapscope/internal/report"
	"github.com/gapscope/gapscope/internal/store"
)

func runReportCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd(collect.NewSecrets())
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"report"}, args...))
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// reportStart is the fixture's first probe round.
var reportStart = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC).UnixMicro()

// writeReportStore makes a realistic store through the store API: run 1 a
// probe ramp (1 to 64 running threads, latency flat up to 16 and
// exploding beyond, a CONCURRENCY_KNEE finding naming the cap), run 2 a
// watch (joined statements over two pool groups, group 0 queueing, a
// POOL_QUEUE finding) and a plan that flips.
func writeReportStore(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "gapscope.db")
	st, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	writeProbeRun(t, st)
	writeWatchRun(t, st)
	return path
}

func writeProbeRun(t *testing.T, st *store.Store) {
	ctx := context.Background()
	run, err := st.StartRun(ctx, "probe", "monitor:s3cret@tcp(db1:3306)/", reportStart)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		running := int64(1 + i*63/39)
		med := int64(900 + 37*(i%5))
		if running > 16 {
			med *= (running - 15) * 4
		}
		p := store.ProbeResult{RunID: run, TimeUS: reportStart + int64(i)*30e6, Name: "canary", Calls: 100,
			MinUS: med / 2, MedianUS: med, AvgUS: med * 3 / 2, MaxUS: med * 7, ThreadsConnected: running + 6, ThreadsRunning: running}
		if err := st.AddProbe(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	w := st.NewWriter(run, store.WriterOptions{})
	knee := event.Finding{Code: "CONCURRENCY_KNEE", Severity: event.SeverityCritical,
		Summary: "canary latency climbs above 16 running threads; the thread pool admits 16",
		Evidence: map[string]any{"knee_threads": 16, "cap_threads": 16, "cap_variable": "thread_pool_size*(thread_pool_oversubscribe+1)",
			"confidence": 0.97}, Fix: "Raise thread_pool_size, or cap the application's connection pool below 16."}
	if err := w.AddFinding(reportStart+20*60e6, &knee); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.EndRun(ctx, run, reportStart+20*60e6, ""); err != nil {
		t.Fatal(err)
	}
}

func writeWatchRun(t *testing.T, st *store.Store) {
	ctx := context.Background()
	start := reportStart + 30*60e6
	run, err := st.StartRun(ctx, "watch", "monitor@tcp(db1:3306)/", start)
	if err != nil {
		t.Fatal(err)
	}
	w := st.NewWriter(run, store.WriterOptions{})
	for i := range 900 {
		s := reportStatement(start, i)
		if err := w.Add(&s); err != nil {
			t.Fatal(err)
		}
	}
	f := event.Finding{Code: "POOL_QUEUE", Severity: event.SeverityWarning, Summary: "statements waited up to 1.9 s in group 0's queue",
		Evidence: map[string]any{"group": 0, "max_queue_us": 1_900_000, "examples": []any{map[string]any{"conn_id": 12, "queue_us": 1_900_000}}},
		Fix:      "SET GLOBAL thread_pool_stall_limit = 100"}
	if err := w.AddFinding(start+60e6, &f); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for i, p := range []store.Plan{
		{Source: "EXPLAIN", Plan: "1 SIMPLE u ref y rows=10\n1 SIMPLE t ref k rows=1", ExecUS: 7000, RowsExamined: 20},
		{Source: "SHOW EXPLAIN FOR", ConnID: 31, Plan: "1 SIMPLE t index k rows=200000\n1 SIMPLE u eq_ref PRIMARY rows=1", ExecUS: 104_000, RowsExamined: 200_000},
	} {
		p.RunID, p.TimeUS, p.Digest, p.DigestText = run, start+int64(i+1)*10e6, "9f2c", "SELECT * FROM t JOIN u ON t.k = u.x WHERE u.y = ?"
		if err := st.AddPlan(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.EndRun(ctx, run, start+5*60e6, ""); err != nil {
		t.Fatal(err)
	}
}

// reportStatement is the i-th watch statement: three digests, two pool
// groups, group 0 queueing in the middle minute, parts summing to client.
func reportStatement(start int64, i int) event.Statement {
	texts := []string{"SELECT c FROM sbtest1 WHERE id = ?", "SELECT * FROM big_table", "UPDATE sbtest1 SET k = k + ? WHERE id = ?"}
	g := i % 2
	s := event.Statement{Conn: fmt.Sprintf("10.0.0.2:%d>10.0.0.1:3306", 40000+i%8), ConnID: uint64(10 + i%8), Cmd: "COM_QUERY",
		Digest: fmt.Sprintf("d%d", i%3), DigestText: texts[i%3], TReqFirst: start + int64(i)*200_000, Joined: true, PoolGroup: &g,
		Parts: event.Parts{RequestUS: 30, ExecUS: int64(200 + (i*37)%800)}}
	if g == 0 && i > 300 && i < 600 {
		s.QueueUS = int64((i * 7919) % 1_900_000)
	}
	if i%3 == 1 {
		s.SendStallUS, s.DeliveryUS = int64((i*104729)%700_000), 4000
	}
	s.ClientUS = s.RequestUS + s.QueueUS + s.ExecUS + s.SendStallUS + s.DeliveryUS
	s.TReqLast, s.TRespFirst, s.TRespLast = s.TReqFirst+s.RequestUS, s.TReqFirst+s.ClientUS-s.DeliveryUS, s.TReqFirst+s.ClientUS
	return s
}

func TestReportFromStore(t *testing.T) {
	db := writeReportStore(t)
	out := filepath.Join(t.TempDir(), "r.html")
	if _, err := runReportCmd(t, "--store", db, "-o", out); err != nil {
		t.Fatal(err)
	}
	page := readFile(t, out)
	for _, want := range []string{
		`id="probe"`, `id="statements"`, `id="plans"`, "CONCURRENCY_KNEE", "POOL_QUEUE",
		"knee: 16 running = thread_pool_size*(thread_pool_oversubscribe+1)", "900 statements, 900 joined",
		"queue wait per thread-pool group over time", "the plan changed", "monitor:***@tcp(db1:3306)/",
		"&#34;queue_us&#34;: 1900000", // structured evidence decoded from the store
	} {
		if !strings.Contains(page, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(page, "s3cret") {
		t.Error("the report shows a password")
	}

	// --run selects one run's data.
	probeOnly, err := runReportCmd(t, "--store", db, "--run", "1", "-o", "-")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(probeOnly, `id="probe"`) || strings.Contains(probeOnly, `id="statements"`) || strings.Contains(probeOnly, "POOL_QUEUE") {
		t.Error("--run 1 should show the probe run only")
	}
	watchOnly, err := runReportCmd(t, "--store", db, "--run", "2", "-o", "-")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(watchOnly, `id="probe"`) || !strings.Contains(watchOnly, `id="statements"`) {
		t.Error("--run 2 should show the watch run only")
	}
}

func TestReportUsageAndFailures(t *testing.T) {
	for _, args := range [][]string{{}, {"--store", "x.db", "-o", ""}, {"--store", "x.db", "--run", "-1"}, {"extra", "--store", "x.db"}} {
		if _, err := runReportCmd(t, args...); exitCode(err) != exitUsage {
			t.Errorf("report %v: exit %d (%v), want %d", args, exitCode(err), err, exitUsage)
		}
	}
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope.db")
	_, err := runReportCmd(t, "--store", missing, "-o", filepath.Join(dir, "r.html"))
	if exitCode(err) != exitFailure || !strings.Contains(err.Error(), "nope.db") {
		t.Errorf("missing store: exit %d (%v)", exitCode(err), err)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Error("a missing store must not be created")
	}
	db := writeReportStore(t)
	if _, err := runReportCmd(t, "--store", db, "--run", "99", "-o", "-"); exitCode(err) != exitFailure || !strings.Contains(err.Error(), "run 99") {
		t.Errorf("unknown run: exit %d (%v)", exitCode(err), err)
	}
	if _, err := runReportCmd(t, "--store", db, "-o", filepath.Join(dir, "no", "such", "dir.html")); exitCode(err) != exitFailure {
		t.Errorf("unwritable output: exit %d (%v)", exitCode(err), err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// chromiumPath finds Debian's chromium (scripts/install-deps.sh installs it).
func chromiumPath() string {
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// TestReportRendersInChromium opens the report in headless Chromium: the
// screenshot must show the charts (the Threads_running bars' colour, many
// colours, not a blank page) and the DOM must hold non-empty SVG geometry
// and the axis labels. It needs chromium: a missing browser fails the test
// (make deps installs it); -short skips it.
func TestReportRendersInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("headless Chromium: not under -short")
	}
	chromium := chromiumPath()
	if chromium == "" {
		t.Fatal("chromium is not installed (make deps installs Debian's chromium); the HTML report cannot be checked")
	}
	dir := t.TempDir()
	html := filepath.Join(dir, "report.html")
	if _, err := runReportCmd(t, "--store", writeReportStore(t), "-o", html); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "shot.png")
	runChromium(t, chromium, dir, "--screenshot="+shot, "--window-size=1200,2000", "file://"+html)
	checkScreenshot(t, shot)
	dom := runChromium(t, chromium, dir, "--dump-dom", "file://"+html)
	checkDOM(t, dom)
}

func runChromium(t *testing.T, chromium, dir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	profile, err := os.MkdirTemp(dir, "profile")
	if err != nil {
		t.Fatal(err)
	}
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
		"--user-data-dir=" + profile}
	cmd := exec.CommandContext(ctx, chromium, append(base, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, tail(stderr.String(), 2000))
	}
	return stdout.String()
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// runningBar is Threads_running's bar colour (#2ca02c at 0.6 opacity) over
// the white page.
var runningBar = [3]int{128, 198, 128}

func checkScreenshot(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	b := img.Bounds()
	colours := map[uint32]bool{}
	nonWhite, bars, total := 0, 0, 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			r, g, bl = r>>8, g>>8, bl>>8
			total++
			colours[r<<16|g<<8|bl] = true
			if r < 245 || g < 245 || bl < 245 {
				nonWhite++
			}
			if near(int(r), runningBar[0]) && near(int(g), runningBar[1]) && near(int(bl), runningBar[2]) {
				bars++
			}
		}
	}
	t.Logf("screenshot %dx%d: %d colours, %.1f%% non-white, %d Threads_running bar pixels", b.Dx(), b.Dy(), len(colours),
		100*float64(nonWhite)/float64(total), bars)
	if b.Dx() != 1200 || b.Dy() != 2000 {
		t.Errorf("screenshot is %dx%d, want 1200x2000", b.Dx(), b.Dy())
	}
	if len(colours) < 100 || nonWhite < total/50 {
		t.Errorf("screenshot looks blank: %d colours, %d of %d pixels non-white", len(colours), nonWhite, total)
	}
	if bars < 2000 {
		t.Errorf("only %d pixels of the Threads_running bars: the canary chart did not render", bars)
	}
}

func near(a, b int) bool { return a-b <= 3 && b-a <= 3 }

var (
	polylineRE = regexp.MustCompile(`<polyline points="([^"]*)"`)
	pathRE     = regexp.MustCompile(`<path d="([^"]*)"`)
)

func checkDOM(t *testing.T, dom string) {
	t.Helper()
	if n := strings.Count(dom, "<svg"); n != 4 {
		t.Errorf("DOM has %d <svg> charts, want 4 (canary, scatter, decomposition, pool queue)", n)
	}
	lines := 0
	for _, m := range polylineRE.FindAllStringSubmatch(dom, -1) {
		if strings.Count(m[1], ",") >= 2 {
			lines++
		}
	}
	if lines < 5 { // max, avg, median; two pool groups
		t.Errorf("DOM has %d polylines with points, want at least 5", lines)
	}
	paths := 0
	for _, m := range pathRE.FindAllStringSubmatch(dom, -1) {
		if strings.HasPrefix(m[1], "M") && strings.Contains(m[1], "L") {
			paths++
		}
	}
	if paths < 40 {
		t.Errorf("DOM has %d non-empty paths (axes, ticks, grid), want at least 40", paths)
	}
	for _, label := range []string{"canary latency (log)", "threads", "time (UTC)", "Threads_running", "Threads_connected",
		"total client time of joined statements", "worst queue wait", "knee: 16 running", "1 ms", "100 ms"} {
		if !strings.Contains(dom, ">"+label) {
			t.Errorf("DOM lacks the label %q", label)
		}
	}
}

// TestReportOverheadFromStore: stored overhead rounds become the table and
// chart, with the verdicts gapscope overhead prints.
func TestReportOverheadFromStore(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "overhead.db")
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	run, err := st.StartRun(ctx, "overhead", "", reportStart)
	if err != nil {
		t.Fatal(err)
	}
	configs := []struct {
		name  string
		ratio float64
	}{{"ps-off", 1}, {"ps-all", 0.71}, {"optimizer-trace", 0.62}}
	for round := range 6 {
		drift := 1900 + 40*float64(round%3) // drift cancels out in the paired ratios
		for pos, c := range configs {
			tps := drift * c.ratio * (1 + 0.004*float64((round+pos)%3-1))
			r := store.OverheadRow{RunID: run, TimeUS: reportStart + int64(round*3+pos)*20e6, Config: c.name, Position: pos, Round: round,
				TPS: tps, QPS: tps * 18, LatAvgUS: int64(4e6 / tps * 1000), LatP95US: int64(9e6 / tps * 1000)}
			if err := st.AddOverhead(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	st.Close()
	page, err := runReportCmd(t, "--store", db, "-o", "-")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`id="overhead"`, "throughput ratio to the baseline per instrumentation setting",
		`<td><code>ps-off</code></td><td class="n">6</td>`, `<td>baseline</td>`, `<td class="above">yes</td>`} {
		if !strings.Contains(page, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if !regexp.MustCompile(`<code>ps-all</code></td><td class="n">6</td><td class="n">6</td><td class="n">1\d{3}</td>.*<td class="n">0\.71\d</td>`).MatchString(page) {
		t.Errorf("ps-all row wrong:\n%s", between(page, "<code>ps-all</code>", "</tr>"))
	}
}

// TestVerdictWordsAgree: the report colours bars by the words gapscope
// overhead writes.
func TestVerdictWordsAgree(t *testing.T) {
	if report.VerdictBaseline != overhead.VerdictBaseline || report.VerdictAbove != overhead.VerdictYes ||
		report.VerdictWithin != overhead.VerdictNo || report.VerdictUnknown != overhead.VerdictUnknown {
		t.Error("report.Verdict* and overhead.Verdict* differ")
	}
}

// TestReportFromEventFiles: watch/analyze --events files chart without a
// store; a malformed line names the file and line.
func TestReportFromEventFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.jsonl")
	fh, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	ew := report.NewEventWriter(fh)
	for i := range 300 {
		s := reportStatement(reportStart, i)
		if err := ew.Write(&s); err != nil {
			t.Fatal(err)
		}
	}
	if err := ew.Flush(); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	page, err := runReportCmd(t, "--events", path, "-o", "-")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"300 statements, 300 joined", "decomposition of client time per digest",
		"queue wait per thread-pool group over time", "gapscope report: events.jsonl"} {
		if !strings.Contains(page, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte("{\"conn\":\"c\",\"cmd\":\"COM_QUERY\",\"t_req_first\":1}\n\n{not json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = runReportCmd(t, "--events", bad, "-o", "-")
	if exitCode(err) != exitFailure || !strings.Contains(err.Error(), "bad.jsonl:3") {
		t.Errorf("malformed events: exit %d (%v)", exitCode(err), err)
	}
}

// An events file without one whole statement (empty, or a single line of
// something else with no newline, which reads as a torn tail) is the wrong
// input, not an empty report: exit 1, and no HTML written.
func TestReportEventsWithoutStatements(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{"empty.jsonl": "", "blank.jsonl": "\n\n", "oneline.txt": "not json at all"} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, name+".html")
		_, err := runReportCmd(t, "--events", path, "-o", out)
		if exitCode(err) != exitFailure || !strings.Contains(err.Error(), "no statement event") {
			t.Errorf("%s: exit %d (%v), want %d saying it holds no statement event", name, exitCode(err), err, exitFailure)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s: a report was written", name)
		}
	}
}
