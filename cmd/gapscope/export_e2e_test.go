package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"image/png"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/sandbox"
	"golang.org/x/net/websocket"
)

// The exporters' end-to-end test: one sandbox under load, one watch run
// with --http and --otlp-endpoint, and the real engines reading what it
// exports: Debian's prometheus scraping /metrics, Jaeger (built from
// tools/jaeger) receiving the traces, headless Chromium loading the page.

const (
	appTraceID = "5bd66ef5095369c7b0d1f8f4bd33716a"
	appSpanID  = "c532cb4098ac3dd2"
)

func TestExportersEndToEnd(t *testing.T) {
	inst := sandbox.ForTest(t, sandbox.Options{ServerArgs: []string{"--performance-schema=ON",
		"--performance-schema-consumer-events-statements-current=ON",
		"--performance-schema-consumer-events-statements-history-long=ON",
		"--performance-schema-events-statements-history-long-size=100000"}})
	for _, tool := range []string{"prometheus", "chromium"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (make deps installs it)", tool)
		}
	}
	dir := t.TempDir()
	httpPort := freePort(t)
	prom := startPrometheus(t, dir, fmt.Sprintf("127.0.0.1:%d", httpPort))
	jaeger := startJaeger(t, dir)
	db := loadSchema(t, inst)

	// Jaeger takes traces only: OpenTelemetry's standard switch turns the
	// OTLP metrics off (export's unit tests read them from the SDK).
	t.Setenv("OTEL_METRICS_EXPORTER", "none")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	events, txns := filepath.Join(dir, "events.jsonl"), filepath.Join(dir, "txns.jsonl")
	page := fmt.Sprintf("http://127.0.0.1:%d/", httpPort)
	b := openBrowser(t, dir) // Chromium starts while watch does
	var out string
	var werr error
	var ended time.Time
	done := make(chan struct{})
	go func() {
		defer close(done)
		out, werr = runCmd(t, "watch", "--dsn", inst.DSN(""), "--duration", "10s", "--no-live", "--cpu-budget", "0",
			"--http", fmt.Sprint(httpPort), "--http-linger", "3s", "--otlp-endpoint", jaeger.otlp,
			"--trace-ratio", "0.05", "--trace-slow", "100ms", "--events", events, "--txns", txns, "--format", "json")
		ended = time.Now()
	}()
	waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/metrics", httpPort))
	loadDone := runLoad(ctx, db, 8*time.Second)
	time.Sleep(time.Second)
	t.Run("web page", func(t *testing.T) { checkPage(t, b, dir, page) })

	<-loadDone
	<-done
	if werr != nil {
		t.Fatalf("watch: %v\n%s", werr, out)
	}
	stmts := readEvents(t, events)
	t.Logf("watch reported %d statements, %d joined", len(stmts), countJoined(stmts))
	if countJoined(stmts) < 100 {
		t.Fatalf("too few joined statements to check the exporters: %d of %d", countJoined(stmts), len(stmts))
	}
	// The last scrapes were during --http-linger, after the final
	// snapshot: query Prometheus at a moment inside that window.
	at := ended.Add(-1500 * time.Millisecond)
	time.Sleep(time.Second)
	t.Run("prometheus", func(t *testing.T) { checkPrometheus(t, prom, at, stmts) })
	t.Run("dashboard queries", func(t *testing.T) { checkDashboard(t, prom, at) })
	t.Run("jaeger", func(t *testing.T) { checkJaeger(t, jaeger.query) })
	t.Run("transactions", func(t *testing.T) { checkTxns(t, txns) })
}

// checkTxns: the --txns file holds the load's transactions, the lock
// pairs' blockers among them, idle in their application about 300 ms and
// named as the blocker of the other connection's update.
func checkTxns(t *testing.T, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blockers := 0
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var x event.Transaction
		if err := json.Unmarshal([]byte(line), &x); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if x.Blocked > 0 && x.MaxIdleUS >= 250_000 && x.EndKind == "commit" {
			blockers++
		}
	}
	if blockers == 0 {
		t.Errorf("no transaction idle ~300 ms that blocked another connection in %s:\n%s", path, tailString(string(b), 2000))
	}
}

func loadSchema(t *testing.T, inst *sandbox.Instance) *sql.DB {
	t.Helper()
	db, err := inst.Open("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(8)
	for _, q := range []string{"CREATE DATABASE fx", "CREATE TABLE fx.t (id INT PRIMARY KEY, v INT)",
		"INSERT INTO fx.t SELECT seq, seq FROM fx.seq_1_to_1001"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return db
}

// runLoad runs three connections of short statements carrying sqlcommenter
// tags and, once a second, a slow one carrying the application's W3C
// traceparent; it stops after d.
func runLoad(ctx context.Context, db *sql.DB, d time.Duration) <-chan struct{} {
	done := make(chan struct{})
	ctx, cancel := context.WithTimeout(ctx, d)
	var wg sync.WaitGroup
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				q := fmt.Sprintf("SELECT v FROM fx.t WHERE id = %d /*route='%%2Fitems',worker='%d'*/", i%1000+1, w)
				if i%5 == 0 {
					q = fmt.Sprintf("UPDATE fx.t SET v = v + 1 WHERE id = %d", i%1000+1)
				}
				_, _ = db.ExecContext(ctx, q)
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			_, _ = db.ExecContext(ctx, "SELECT SLEEP(0.15) /*traceparent='00-"+appTraceID+"-"+appSpanID+"-01'*/")
			time.Sleep(time.Second)
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			lockPair(ctx, db)
			time.Sleep(1500 * time.Millisecond)
		}
	}()
	go func() { wg.Wait(); cancel(); close(done) }()
	return done
}

// lockPair makes a row-lock wait: a transaction updates row 1001 (no
// worker's) and its application idles 300 ms before COMMIT, while another
// connection's update of the row waits for it.
func lockPair(ctx context.Context, db *sql.DB) {
	a, err := db.Conn(ctx)
	if err != nil {
		return
	}
	defer a.Close()
	b, err := db.Conn(ctx)
	if err != nil {
		return
	}
	defer b.Close()
	const q = "UPDATE fx.t SET v = v + 1 WHERE id = 1001"
	if _, err := a.ExecContext(ctx, "BEGIN"); err != nil {
		return
	}
	if _, err := a.ExecContext(ctx, q); err != nil {
		return
	}
	waited := make(chan struct{})
	go func() { _, _ = b.ExecContext(ctx, q); close(waited) }()
	time.Sleep(300 * time.Millisecond)
	_, _ = a.ExecContext(context.Background(), "COMMIT")
	<-waited
}

func readEvents(t *testing.T, path string) []event.Statement {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []event.Statement
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var s event.Statement
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatalf("event %q: %v", sc.Text(), err)
		}
		out = append(out, s)
	}
	return out
}

func countJoined(stmts []event.Statement) int {
	n := 0
	for _, s := range stmts {
		if s.Joined {
			n++
		}
	}
	return n
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func waitHTTP(t *testing.T, u string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if r, err := http.Get(u); err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s did not answer within 60 s", u)
}

// startProcess runs a program until the test ends, its output in a file
// shown when the test fails.
func startProcess(t *testing.T, dir, name string, args ...string) {
	t.Helper()
	logPath := filepath.Join(dir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("%s log (tail):\n%s", name, tailString(string(b), 3000))
		}
	})
}

func tailString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

// startPrometheus runs Debian's prometheus scraping target every second
// and returns its base URL.
func startPrometheus(t *testing.T, dir, target string) string {
	t.Helper()
	port := freePort(t)
	cfg := filepath.Join(dir, "prometheus.yml")
	conf := fmt.Sprintf("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: gapscope\n    scrape_interval: 1s\n    scrape_timeout: 900ms\n    static_configs:\n      - targets: ['%s']\n", target)
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	startProcess(t, dir, "prometheus", "prometheus", "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address=127.0.0.1:"+fmt.Sprint(port))
	waitHTTP(t, base+"/-/ready")
	return base
}

type jaegerAddrs struct{ otlp, query string }

// startJaeger runs Jaeger all-in-one (memory storage) with an OTLP/HTTP
// receiver and its query API on free loopback ports.
func startJaeger(t *testing.T, dir string) jaegerAddrs {
	t.Helper()
	bin := jaegerBinary(t)
	otlp, query, grpc := freePort(t), freePort(t), freePort(t)
	conf := fmt.Sprintf(`service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_query:
    storage:
      traces: mem
    http:
      endpoint: 127.0.0.1:%d
    grpc:
      endpoint: 127.0.0.1:%d
  jaeger_storage:
    backends:
      mem:
        memory:
          max_traces: 100000
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:%d
processors:
  batch:
    timeout: 200ms
exporters:
  jaeger_storage_exporter:
    trace_storage: mem
`, query, grpc, otlp)
	cfg := filepath.Join(dir, "jaeger.yaml")
	if err := os.WriteFile(cfg, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	startProcess(t, dir, "jaeger", bin, "--config", cfg)
	a := jaegerAddrs{otlp: fmt.Sprintf("http://127.0.0.1:%d", otlp), query: fmt.Sprintf("http://127.0.0.1:%d", query)}
	waitHTTP(t, a.query+"/api/services")
	return a
}

// jaegerBinary returns the Jaeger all-in-one program: $GAPSCOPE_JAEGER, or
// the one cached under the user's cache directory, built from tools/jaeger
// when missing (minutes, once per machine).
func jaegerBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("GAPSCOPE_JAEGER"); p != "" {
		return p
	}
	cache, err := os.UserCacheDir()
	if err != nil { // no HOME: the build still happens once per boot
		cache = os.TempDir()
	}
	bin := filepath.Join(cache, "gapscope", "jaeger-v1.76.0")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	t.Logf("building Jaeger into %s (once per machine)", bin)
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-o", bin+".tmp", "github.com/jaegertracing/jaeger/cmd/jaeger")
	cmd.Dir = filepath.Join("..", "..", "tools", "jaeger")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building Jaeger: %v\n%s", err, out)
	}
	if err := os.Rename(bin+".tmp", bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// promQuery evaluates q at instant at through Prometheus's HTTP API.
func promQuery(t *testing.T, base, q string, at time.Time) ([]promSample, error) {
	t.Helper()
	v := url.Values{"query": {q}, "time": {fmt.Sprintf("%.3f", float64(at.UnixMilli())/1000)}}
	r, err := http.Get(base + "/api/v1/query?" + v.Encode())
	if err != nil {
		return nil, err
	}
	defer r.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string       `json:"resultType"`
			Result     []promSample `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		return nil, err
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("%s: %s", q, body.Error)
	}
	return body.Data.Result, nil
}

type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

func (s promSample) float(t *testing.T) float64 {
	var f float64
	if str, ok := s.Value[1].(string); !ok || func() error { _, err := fmt.Sscan(str, &f); return err }() != nil {
		t.Fatalf("sample value %v", s.Value)
	}
	return f
}

func promScalar(t *testing.T, base, q string, at time.Time) float64 {
	t.Helper()
	res, err := promQuery(t, base, q, at)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 {
		t.Fatalf("%s: %d series, want 1: %+v", q, len(res), res)
	}
	return res[0].float(t)
}

func checkPrometheus(t *testing.T, base string, at time.Time, stmts []event.Statement) {
	// The lock waits the events name, by kind, are the counter's.
	var rowWait float64
	for i := range stmts {
		if s := &stmts[i]; s.LockWait != nil && s.BlockedBy != nil && s.BlockedBy.Kind == event.LockRow {
			rowWait += float64(s.LockWaitUS) / 1e6
		}
	}
	if rowWait < 0.2 {
		t.Errorf("the events name %.3f s of row-lock wait; the load made ~0.3 s waits", rowWait)
	}
	if got := promScalar(t, base, `sum(gapscope_lock_wait_seconds_total{kind="row"})`, at); math.Abs(got-rowWait) > 1e-6+1e-9*rowWait {
		t.Errorf("row lock wait: Prometheus %.6f s, events %.6f s", got, rowWait)
	}
	// The duration histogram and the per-digest counts take statements with
	// a response only (a COM_QUIT has no client time: docs/export.md).
	var answered []event.Statement
	for _, s := range stmts {
		if s.HasResponse() {
			answered = append(answered, s)
		}
	}
	if got := promScalar(t, base, "sum(gapscope_statement_duration_seconds_count)", at); got != float64(len(answered)) {
		t.Errorf("histogram count %v, watch reported %d statements with a response", got, len(answered))
	}
	if got := promScalar(t, base, "sum(gapscope_statements_seen_total)", at); got != float64(len(stmts)) {
		t.Errorf("statements seen %v, watch reported %d", got, len(stmts))
	}
	joined := countJoined(answered)
	if got := promScalar(t, base, "sum(gapscope_statements_joined_total)", at); got != float64(joined) {
		t.Errorf("joined %v, events %d", got, joined)
	}
	var want [5]float64
	var clientSum float64
	for _, s := range answered {
		clientSum += float64(s.ClientUS) / 1e6
		if !s.Joined {
			continue
		}
		for i, us := range [5]int64{s.RequestUS, s.QueueUS, s.ExecUS, s.SendStallUS, s.DeliveryUS} {
			want[i] += float64(us) / 1e6
		}
	}
	for i, ph := range []string{"request", "queue", "exec", "send_stall", "delivery"} {
		got := promScalar(t, base, fmt.Sprintf(`sum(gapscope_statement_phase_seconds_total{phase=%q})`, ph), at)
		if math.Abs(got-want[i]) > 1e-6+1e-9*want[i] {
			t.Errorf("phase %s: Prometheus %.6f s, joined events %.6f s", ph, got, want[i])
		}
	}
	if got := promScalar(t, base, "sum(gapscope_statement_duration_seconds_sum)", at); math.Abs(got-clientSum) > 1e-6+1e-9*clientSum {
		t.Errorf("histogram sum %.6f s, events' client time %.6f s", got, clientSum)
	}
	info, err := promQuery(t, base, `gapscope_digest_info{digest_text=~"(?i)select .?v.? from .?fx.? ?[.] ?.?t.? where.*"}`, at)
	if err != nil || len(info) != 1 || info[0].Metric["server_digest"] == "" {
		t.Errorf("digest info of the SELECT: %+v (%v), want one series with the server's digest", info, err)
	}
}

// dashboardQueries returns every PromQL expression of the Grafana
// dashboard, Grafana's variables replaced by what Grafana would send.
func dashboardQueries(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "dashboards", "grafana.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	vars := strings.NewReplacer("$digest", ".*", "$__rate_interval", "1m", "$__interval", "15s", "$__range", "1h")
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, vars.Replace(tg.Expr))
		}
	}
	labelValues := regexp.MustCompile(`^label_values\((.*), *\w+\)$`)
	for _, v := range d.Templating.List {
		if m := labelValues.FindStringSubmatch(v.Definition); m != nil {
			out = append(out, m[1])
		}
	}
	if len(out) < 10 {
		t.Fatalf("the dashboard holds %d queries", len(out))
	}
	return out
}

func checkDashboard(t *testing.T, base string, at time.Time) {
	empty := 0
	for _, q := range dashboardQueries(t) {
		res, err := promQuery(t, base, q, at)
		if err != nil {
			t.Errorf("dashboard query fails: %v", err)
			continue
		}
		if len(res) == 0 {
			empty++
			t.Logf("no data (yet) for %s", q)
		}
	}
	if empty > 2 {
		t.Errorf("%d dashboard queries return no data after a loaded run", empty)
	}
}

type jaegerSpan struct {
	TraceID       string `json:"traceID"`
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		TraceID string `json:"traceID"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	Tags []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
}

func (s jaegerSpan) tag(k string) any {
	for _, tg := range s.Tags {
		if tg.Key == k {
			return tg.Value
		}
	}
	return nil
}

func (s jaegerSpan) parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

func jaegerTraces(t *testing.T, u string) [][]jaegerSpan {
	t.Helper()
	r, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var body struct {
		Data []struct {
			Spans []jaegerSpan `json:"spans"`
		} `json:"data"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	var out [][]jaegerSpan
	for _, d := range body.Data {
		out = append(out, d.Spans)
	}
	return out
}

func checkJaeger(t *testing.T, base string) {
	traces := jaegerTraces(t, base+"/api/traces?service=gapscope&limit=1000&lookback=1h")
	if len(traces) == 0 {
		t.Fatal("Jaeger holds no gapscope trace")
	}
	withParts := 0
	for _, spans := range traces {
		withParts += statementsWithParts(spans)
	}
	if withParts == 0 {
		t.Errorf("no statement span with its part children in %d traces", len(traces))
	}
	// A statement that waited for a row lock has a lock_wait span naming
	// its blocker.
	lockSpans := 0
	for _, spans := range traces {
		for _, s := range spans {
			if s.OperationName == "lock_wait" && s.tag("gapscope.lock.kind") == "row" && s.tag("gapscope.lock.blocker.state") == "idle_in_transaction" {
				lockSpans++
			}
		}
	}
	if lockSpans == 0 {
		t.Errorf("no lock_wait span of an idle blocker's row lock in %d traces", len(traces))
	}
	// The application's trace: the traceparent in the statement's
	// comment makes gapscope's span a child of the application's span.
	app := jaegerTraces(t, base+"/api/traces/"+appTraceID)
	found := false
	for _, spans := range app {
		for _, s := range spans {
			if s.TraceID == appTraceID && s.parent() == appSpanID && s.tag("span.kind") == "client" &&
				s.tag("db.system.name") == "mariadb" && s.tag("db.operation.name") == "SELECT" {
				found = true
				if parts := statementsWithParts(spans); parts == 0 {
					t.Errorf("the application's statement span has no part children: %+v", spans)
				}
			}
		}
	}
	if !found {
		t.Errorf("no span in the application's trace %s under its span %s: %+v", appTraceID, appSpanID, app)
	}
}

// statementsWithParts counts client spans with part children whose names
// are parts and whose gapscope.<part>_us tags the statement span carries.
func statementsWithParts(spans []jaegerSpan) int {
	children := map[string][]jaegerSpan{}
	for _, s := range spans {
		children[s.parent()] = append(children[s.parent()], s)
	}
	n := 0
	for _, s := range spans {
		if s.tag("span.kind") != "client" || s.tag("gapscope.digest") == nil {
			continue
		}
		ok := len(children[s.SpanID]) > 0
		for _, c := range children[s.SpanID] {
			if s.tag("gapscope."+c.OperationName+"_us") == nil {
				ok = false
			}
		}
		if ok {
			n++
		}
	}
	return n
}

// browser is headless Chromium driven over the DevTools protocol, so the
// test watches the page in real time (the page long-polls watch).
type browser struct {
	ws *websocket.Conn
	id int
}

// openBrowser starts headless Chromium with a fresh profile at a phone's
// window size on a blank tab, and connects to the tab's DevTools endpoint.
func openBrowser(t *testing.T, dir string) *browser {
	t.Helper()
	profile, err := os.MkdirTemp(dir, "chromium-profile")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--no-first-run", "--user-data-dir="+profile,
		"--window-size=412,915", "--hide-scrollbars", "--remote-debugging-port=0", "--remote-allow-origins=*", "about:blank")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	devtools := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if _, u, ok := strings.Cut(sc.Text(), "DevTools listening on "); ok {
				devtools <- u
			}
		}
	}()
	var browserURL string
	select {
	case browserURL = <-devtools:
	case <-time.After(60 * time.Second):
		t.Fatal("chromium did not open its DevTools endpoint within 60 s")
	}
	u, err := url.Parse(browserURL)
	if err != nil {
		t.Fatal(err)
	}
	wsURL := pageTarget(t, "http://"+u.Host+"/json/list", "about:blank")
	ws, err := websocket.Dial(wsURL, "", "http://127.0.0.1/")
	if err != nil {
		t.Fatalf("DevTools: %v", err)
	}
	t.Cleanup(func() { ws.Close() })
	return &browser{ws: ws}
}

// pageTarget returns the DevTools WebSocket of the tab showing page.
func pageTarget(t *testing.T, list, page string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var targets []struct {
			Type, URL            string
			WebSocketDebuggerURL string `json:"webSocketDebuggerUrl"`
		}
		if r, err := http.Get(list); err == nil {
			_ = json.NewDecoder(r.Body).Decode(&targets)
			r.Body.Close()
		}
		for _, tg := range targets {
			if tg.Type == "page" && strings.HasPrefix(tg.URL, page) {
				return tg.WebSocketDebuggerURL
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("no tab shows %s", page)
	return ""
}

// call sends one DevTools command and returns its result.
func (b *browser) call(t *testing.T, method string, params any) json.RawMessage {
	t.Helper()
	b.id++
	if err := websocket.JSON.Send(b.ws, map[string]any{"id": b.id, "method": method, "params": params}); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	_ = b.ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		var msg struct {
			ID     int                       `json:"id"`
			Result json.RawMessage           `json:"result"`
			Error  *struct{ Message string } `json:"error"`
		}
		if err := websocket.JSON.Receive(b.ws, &msg); err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		if msg.ID != b.id {
			continue // an event
		}
		if msg.Error != nil {
			t.Fatalf("%s: %s", method, msg.Error.Message)
		}
		return msg.Result
	}
}

// eval evaluates a JavaScript expression in the page.
func (b *browser) eval(t *testing.T, expr string) any {
	t.Helper()
	var r struct {
		Result struct {
			Value any `json:"value"`
		} `json:"result"`
	}
	if err := json.Unmarshal(b.call(t, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true}), &r); err != nil {
		t.Fatal(err)
	}
	return r.Result.Value
}

// checkPage loads the live view in headless Chromium: the page updating
// itself from watch's later snapshots, the five parts drawn as bars, and a
// screenshot at a phone's size that is not blank.
func checkPage(t *testing.T, b *browser, dir, page string) {
	b.call(t, "Page.navigate", map[string]any{"url": page})
	deadline := time.Now().Add(20 * time.Second)
	var updates float64
	for time.Now().Before(deadline) {
		// Statements reach the view after their join: wait for parts.
		u, _ := b.eval(t, "Number(document.body.dataset.updates)").(float64)
		updates = u
		// The slowest statements carry the application's comment.
		ready := "document.querySelector('.part-exec') !== null && document.getElementById('worst').textContent.includes(\"traceparent='00-\")"
		if parts, _ := b.eval(t, ready).(bool); parts && u >= 2 {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	first, _ := b.eval(t, "Number(document.body.dataset.firstSeq)").(float64)
	seq, _ := b.eval(t, "Number(document.getElementById('seq').textContent)").(float64)
	if updates < 2 || seq <= first {
		t.Errorf("no live update seen: %v updates, first snapshot %v, last %v", updates, first, seq)
	}
	dom, _ := b.eval(t, "document.documentElement.outerHTML").(string)
	for _, want := range []string{`class="part part-exec"`, `class="bar"`, "send stall", "traceparent='00-", "Worst statements now"} {
		if !strings.Contains(dom, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("DOM:\n%s", tailString(dom, 4000))
	}
	var shot struct{ Data []byte }
	if err := json.Unmarshal(b.call(t, "Page.captureScreenshot", map[string]any{"format": "png"}), &shot); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "page.png")
	if err := os.WriteFile(path, shot.Data, 0o644); err != nil {
		t.Fatal(err)
	}
	checkNotBlank(t, path)
}

// checkNotBlank fails unless the PNG has many distinct colours.
func checkNotBlank(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	colours := map[[4]uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 3 {
		for x := b.Min.X; x < b.Max.X; x += 3 {
			r, g, bl, a := img.At(x, y).RGBA()
			colours[[4]uint32{r, g, bl, a}] = true
		}
	}
	if b.Dx() < 300 || len(colours) < 8 {
		t.Errorf("screenshot %dx%d with %d colours: blank", b.Dx(), b.Dy(), len(colours))
	}
	if dst := os.Getenv("GAPSCOPE_KEEP_SCREENSHOT"); dst != "" {
		if b, err := os.ReadFile(path); err == nil {
			_ = os.WriteFile(dst, b, 0o644)
		}
	}
}
