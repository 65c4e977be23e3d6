package export

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/signal"
	"regexp"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/sandbox"
	"github.com/gapscope/gapscope/internal/watch"
)

// TestDistinctDigestsLive sends 150,000 statements of as many distinct
// digests (an alias per statement, as an ORM naming aliases per call does)
// through a live watch at its defaults with the Prometheus exporter, from
// connections of 500 statements each, with a planted slow digest (SELECT
// SLEEP) every 1,000 statements. watch runs in a process of its own (this
// test binary, re-run as the child below) so that its RSS is its own. The
// planted digest must rank first in the final profile and on /metrics,
// and watch's peak RSS stay under 150 MB (the test logs it; what holds it
// is in docs/performance.md), while per-digest state without a budget
// (~3 KB a digest: 450 MB here) fails it.
func TestDistinctDigestsLive(t *testing.T) {
	if dsn := os.Getenv(digestsChildDSN); dsn != "" {
		digestsChild(t, dsn)
		return
	}
	if testing.Short() {
		t.Skip("sandbox test: skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("live capture needs root")
	}
	inst := sandbox.ForTest(t, sandbox.Options{ServerArgs: []string{"--performance-schema=ON",
		"--performance-schema-consumer-events-statements-current=ON",
		"--performance-schema-consumer-events-statements-history=ON",
		"--performance-schema-consumer-events-statements-history-long=ON", "--max-connections=200"}})
	child := sandbox.StartChild(t, "TestDistinctDigestsLive", []string{digestsChildDSN + "=" + inst.DSN("")}, digestsReady)
	const statements, perConn, workers = 150_000, 500, 4
	var peakKB int64
	stop := sampleRSS(child.Cmd.Process.Pid, &peakKB)
	loadDistinct(t, inst, statements, perConn, workers)
	time.Sleep(2 * time.Second) // the last rows are read
	if os.Getenv("GAPSCOPE_DIGESTS_HEAP") != "" {
		_ = child.Cmd.Process.Signal(syscall.SIGUSR1)
		time.Sleep(time.Second)
	}
	stop()
	if err := child.Cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	var got digestsResult
	for l := range child.Lines {
		if s, ok := strings.CutPrefix(l, digestsDone); ok {
			if err := json.Unmarshal([]byte(s), &got); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := child.Cmd.Wait(); err != nil {
		t.Fatalf("the watch child failed: %v", err)
	}
	peakKB = max(peakKB, got.HWMKB)
	t.Logf("%d distinct digests through a live watch: peak RSS %d kB (VmHWM %d kB), %.1f s of CPU; %d statements, %d digest rows, top %q; /metrics top %q of %d series; %d joined, unjoined %v; %d reached no sink",
		statements, peakKB, got.HWMKB, got.CPUSeconds, got.Statements, got.Rows, got.Top, got.MetricsTop, got.Series, got.Joined, got.Unjoined, got.OutputDropped)
	if got.Statements < statements {
		t.Errorf("watch counted %d statements, %d sent", got.Statements, statements)
	}
	if !strings.Contains(strings.ToLower(got.Top), "planted_slow") {
		t.Errorf("the planted slow digest does not rank first in the profile: %q", got.Top)
	}
	if !strings.Contains(strings.ToLower(got.MetricsTop), "planted_slow") {
		t.Errorf("the planted slow digest does not rank first on /metrics: %q", got.MetricsTop)
	}
	if peakKB > 150_000 {
		t.Errorf("watch's peak RSS %d kB (bound 150 MB)", peakKB)
	}
}

// The child's environment variable (the server's DSN) and the lines it
// prints: once watch runs, and its result at the end.
const (
	digestsChildDSN = "GAPSCOPE_DIGESTS_CHILD_DSN"
	digestsReady    = "gapscope-digests-child-ready"
	digestsDone     = "gapscope-digests-child-result "
)

// digestsResult is what the child saw.
type digestsResult struct {
	Statements int64  `json:"statements"`
	Rows       int    `json:"rows"`
	Top        string `json:"top"`
	MetricsTop string `json:"metrics_top"`
	Series     int    `json:"series"`
	HWMKB      int64  `json:"hwm_kb"`
	// Joined and Unjoined (by reason) are watch's coverage.
	Joined     int64            `json:"joined"`
	Unjoined   map[string]int64 `json:"unjoined"`
	CPUSeconds float64          `json:"cpu_s"`
	// OutputDropped: statements that reached no sink (the exporter's
	// queue was full).
	OutputDropped int64 `json:"output_dropped"`
}

// digestsChild runs watch as `gapscope watch --http` does (its GC
// settings, the Prometheus exporter) until SIGINT, then prints what it
// ranked first.
func digestsChild(t *testing.T, dsn string) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(watch.GCPercent)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	if f := os.Getenv("GAPSCOPE_DIGESTS_HEAP"); f != "" { // a heap profile at the end of the load
		defer writeHeap(f)()
	}
	prom := NewPrometheus(0)
	opts := watch.DefaultOptions()
	opts.DSN, opts.Iface, opts.Sinks = dsn, "lo", []watch.Sink{prom}
	opts.Duration = 10 * time.Minute
	opts.Ready = func(s watch.Started) {
		if os.Getenv("GOMEMLIMIT") == "" { // as the command does
			debug.SetMemoryLimit(watch.MemoryLimitFor(s))
		}
		fmt.Println(digestsReady)
	}
	res, err := watch.Run(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.CloseErrors) > 0 {
		t.Fatalf("closing the exporter: %v", res.CloseErrors)
	}
	out := digestsResult{Statements: res.Profile.Statements, Rows: len(res.Profile.Digests)}
	if len(res.Profile.Digests) > 0 {
		out.Top = res.Profile.Digests[0].DigestText
	}
	out.MetricsTop, out.Series = metricsTop(prom)
	out.HWMKB = sandbox.StatusKB(os.Getpid(), "VmHWM:")
	out.CPUSeconds = res.Own.CPUSeconds
	out.Joined, out.Unjoined = res.Coverage.Joined, res.Coverage.Unjoined
	out.OutputDropped = res.Coverage.OutputDropped
	b, _ := json.Marshal(out)
	fmt.Println(digestsDone + string(b))
}

// metricsTop scrapes /metrics and returns the digest text of the series
// with the most client time (the digests without their own series, in
// "other", left out) and how many digest series there were.
func metricsTop(p *Prometheus) (string, int) {
	rec := httptest.NewRecorder()
	p.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	sums, texts := map[string]float64{}, map[string]string{}
	sum := regexp.MustCompile(`^gapscope_statement_duration_seconds_sum\{.*digest="([^"]*)".*\} (\S+)$`)
	info := regexp.MustCompile(`^gapscope_digest_info\{.*digest="([^"]*)".*digest_text="([^"]*)".*\}`)
	for _, l := range strings.Split(rec.Body.String(), "\n") {
		if m := sum.FindStringSubmatch(l); m != nil && m[1] != OtherDigest {
			v, _ := strconv.ParseFloat(m[2], 64)
			sums[m[1]] += v
		}
		if m := info.FindStringSubmatch(l); m != nil {
			texts[m[1]] = m[2]
		}
	}
	best := ""
	for d, v := range sums {
		if best == "" || v > sums[best] {
			best = d
		}
	}
	return texts[best], len(sums)
}

// loadDistinct sends n statements of distinct digests from workers
// goroutines, each on connections of perConn statements, and one planted
// slow statement every 1,000.
func loadDistinct(t *testing.T, inst *sandbox.Instance, n, perConn, workers int) {
	db, err := inst.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxIdleConns(0) // a connection ends when its batch does
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for from := w * perConn; from < n; from += workers * perConn {
				if err := distinctBatch(db, from, min(from+perConn, n)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// distinctBatch runs statements from..to on one connection of its own.
func distinctBatch(db *sql.DB, from, to int) error {
	ctx := context.Background()
	c, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	for i := from; i < to; i++ {
		if i%1000 == 0 {
			if _, err := c.ExecContext(ctx, "SELECT SLEEP(0.05) AS planted_slow"); err != nil {
				return err
			}
		}
		if _, err := c.ExecContext(ctx, fmt.Sprintf("SELECT %d AS a%d", i%7, i)); err != nil {
			return err
		}
	}
	return nil
}

// sampleRSS records pid's largest VmRSS, read every 500 ms, until stop.
func sampleRSS(pid int, peakKB *int64) (stop func()) {
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if kb := sandbox.StatusKB(pid, "VmRSS:"); kb > *peakKB {
					*peakKB = kb
				}
			}
		}
	}()
	return func() { close(done); <-ended }
}

// writeHeap writes a heap profile to f on SIGUSR1 (a debugging aid: set
// GAPSCOPE_DIGESTS_HEAP=F).
func writeHeap(f string) (stop func()) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	go func() {
		for range sig {
			if out, err := os.Create(f); err == nil {
				_ = pprof.WriteHeapProfile(out)
				out.Close()
			}
		}
	}()
	return func() { signal.Stop(sig) }
}
