package web

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/diagnose"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/watch"
)

// A synthetic quarter hour a DBA would open the page for: a thread pool of
// four groups; point selects that are fast; stock updates that queue for
// the pool between minutes 5 and 9; a report whose client reads slowly
// (send stalls); a few statements left unjoined. The findings are the
// real statement rules' on the last minute, so the page shows evidence
// of the shape watch gives it. Between minutes 10 and 13 one stock update
// in four waits 1.5 ms of its exec for a row lock, and at minute 8 one
// waited 1.4 s behind an ALTER that itself waited for a transaction its
// application left idle (a lock chain): the worst statement now. Six
// transactions ended in the window, one held idle for 12 s.
const (
	lockedSQL  = "UPDATE stock SET qty = qty - ? WHERE sku = 'locked'"
	idleTxnSQL = "UPDATE stock SET qty = qty - 1 WHERE sku = 'held open'"
)
const (
	fxOrders = "fp-orders"
	fxStock  = "fp-stock"
	fxReport = "fp-report"
)

func fixture(t *testing.T, v *View, now time.Time) {
	t.Helper()
	rng := rand.New(rand.NewPCG(30, 1))
	end := now.UnixMicro()
	start := end - windowUS + stepUS
	var recent []event.Statement
	conn := func(i int) string { return fmt.Sprintf("10.0.0.%d:%d>10.0.0.1:3306", 10+i%4, 40000+i) }
	for at := start; at < end; at += 200_000 { // five statements a second
		minute := (at - start) / 60_000_000
		var s event.Statement
		g := int(rng.IntN(4))
		switch r := rng.IntN(10); {
		case r < 6:
			exec := int64(300 + rng.IntN(900))
			s = event.Statement{User: "app", DB: "shop", Fingerprint: fxOrders, Digest: "d1", DigestText: "SELECT * FROM `orders` WHERE `id` = ?",
				SQL: "SELECT * FROM orders WHERE id = ?", Parts: event.Parts{RequestUS: 40, QueueUS: int64(20 + rng.IntN(60)), ExecUS: exec, DeliveryUS: 60}, Rows: 1, RespBytes: 310}
		case r < 9:
			queue := int64(100 + rng.IntN(300))
			if minute >= 5 && minute < 9 {
				queue = int64(40_000 + rng.IntN(160_000))
			}
			s = event.Statement{User: "app", DB: "shop", Fingerprint: fxStock, Digest: "d2", DigestText: "UPDATE `stock` SET `qty` = `qty` - ? WHERE `sku` = ?",
				SQL: "UPDATE stock SET qty = qty - ? WHERE sku = ?", Parts: event.Parts{RequestUS: 50, QueueUS: queue, ExecUS: int64(2_000 + rng.IntN(4_000)), DeliveryUS: 40}, Rows: 1, RespBytes: 52}
		default:
			stall := int64(200_000 + rng.IntN(600_000))
			s = event.Statement{User: "reporting", DB: "analytics", Fingerprint: fxReport, Digest: "d3", DigestText: "SELECT * FROM `sales` WHERE `day` >= ?",
				SQL: "SELECT * FROM sales WHERE day >= ? /* route='/daily' */", Parts: event.Parts{RequestUS: 60, QueueUS: 150, ExecUS: int64(80_000 + rng.IntN(40_000)), SendStallUS: stall, DeliveryUS: 9_000},
				Rows: 250_000, RespBytes: 48 << 20, ZeroWindowUS: stall * 9 / 10}
		}
		i := rng.IntN(40)
		s.Conn, s.ConnID, s.Cmd, s.PoolGroup, s.Joined = conn(i), uint64(100+i), "COM_QUERY", &g, true
		s.ClientUS = s.RequestUS + s.QueueUS + s.ExecUS + s.SendStallUS + s.DeliveryUS
		s.ServerUS = s.ExecUS + s.SendStallUS
		s.TReqFirst = at
		s.TReqLast = at + s.RequestUS
		s.TRespFirst = at + s.ClientUS - s.DeliveryUS
		s.TRespLast = at + s.ClientUS
		if rng.IntN(25) == 0 { // unjoined: its parts unknown
			s.Joined, s.Digest, s.Why = false, "", event.Expired
			s.RequestUS, s.QueueUS, s.ExecUS, s.SendStallUS, s.DeliveryUS, s.ServerUS = 0, 0, 0, 0, 0, 0
		}
		if s.Joined && s.Fingerprint == fxStock && minute >= 10 && minute < 13 && at/200_000%4 == 0 {
			s.LockWait = &event.LockWait{LockWaitUS: min(1_500, s.ExecUS), BlockedBy: &event.Blocker{ConnID: 77, Kind: event.LockRow,
				State: event.BlockerRunning, Source: event.LockSourceWire, Confidence: event.ConfidenceHigh}}
		}
		v.Statement(&s)
		if minute >= 7 && minute <= 8 || end-at < 60_000_000 && s.Fingerprint == fxReport {
			recent = append(recent, s)
		}
	}
	g := 2
	locked := event.Statement{Conn: conn(41), ConnID: 141, Cmd: "COM_QUERY", User: "app", DB: "shop", Fingerprint: fxStock, Digest: "d2",
		DigestText: "UPDATE `stock` SET `qty` = `qty` - ? WHERE `sku` = ?", SQL: lockedSQL, PoolGroup: &g, Joined: true, Rows: 1, RespBytes: 52,
		Parts: event.Parts{RequestUS: 50, QueueUS: 90, ExecUS: 1_450_000, DeliveryUS: 40}, TxnInfo: event.TxnInfo{TxnSeq: 2, TxnStartUS: start + 510_000_000},
		LockWait: &event.LockWait{LockWaitUS: 1_400_000, BlockedBy: &event.Blocker{Conn: conn(42), ConnID: 142, User: "deploy", Kind: event.LockMetadata,
			State: event.BlockerRunning, Digest: "alter1", SQL: "ALTER TABLE stock ADD COLUMN note TEXT", HeldUS: 1_600_000,
			Source: "performance_schema.metadata_locks", Confidence: event.ConfidenceCertain, Evidence: "read from the server's lock tables while it waited",
			Root: &event.Blocker{Conn: conn(43), ConnID: 143, User: "app", Kind: event.LockMetadata, State: event.BlockerIdleInTxn,
				Digest: "sel9", SQL: "SELECT * FROM stock WHERE sku = ?", HeldUS: 12_000_000, IdleUS: 11_900_000,
				Source: "performance_schema.metadata_locks", Confidence: event.ConfidenceCertain}}}}
	locked.ClientUS = locked.RequestUS + locked.QueueUS + locked.ExecUS + locked.DeliveryUS
	locked.ServerUS = locked.ExecUS
	locked.TReqFirst = start + 8*60_000_000 + 30_000_000
	locked.TReqLast = locked.TReqFirst + locked.RequestUS
	locked.TRespFirst = locked.TReqFirst + locked.ClientUS - locked.DeliveryUS
	locked.TRespLast = locked.TReqFirst + locked.ClientUS
	v.Statement(&locked)
	recent = append(recent, locked)
	for i := range 6 {
		tx := event.Transaction{Conn: conn(50 + i), ConnID: uint64(150 + i), User: "app", DB: "shop", Seq: 1, Start: end - 120_000_000 + int64(i)*10_000_000,
			EndKind: "commit", Statements: 3, Joined: 3, ServerUS: 4_000, FirstSQL: "BEGIN", LeadSQL: fmt.Sprintf("UPDATE stock SET qty = qty - 1 WHERE sku = %d", i),
			MaxIdleUS: int64(20_000 * (i + 1)), Tags: map[string]string{"route": "/checkout"}}
		if i == 3 {
			tx.MaxIdleUS, tx.LeadSQL, tx.Blocked, tx.EndKind = 12_000_000, idleTxnSQL, 2, "rollback"
		}
		tx.InAppUS = tx.MaxIdleUS + 1_000
		tx.OpenUS = tx.InAppUS + tx.ServerUS
		tx.End = tx.Start + tx.OpenUS
		v.Transaction(&tx)
	}
	w := &diagnose.Window{Statements: recent, Flavor: "mariadb", Version: "10.11.6",
		Vars: map[string]string{"thread_handling": "pool-of-threads", "thread_pool_size": "4", "thread_pool_max_threads": "64", "net_write_timeout": "60"}}
	findings := diagnose.Run(w, diagnose.StatementRules()...)
	if len(findings) < 2 {
		t.Fatalf("the fixture gives %d findings, want the pool's queue and the slow client's: %v", len(findings), findings)
	}
	worst := append([]event.Statement(nil), recent...)
	for i := 1; i < len(worst); i++ { // the slowest five, by insertion
		for j := i; j > 0 && worst[j].ClientUS > worst[j-1].ClientUS; j-- {
			worst[j], worst[j-1] = worst[j-1], worst[j]
		}
	}
	worst = worst[:5]
	v.Snapshot(&watch.Snapshot{TimeUS: end, Flavor: "mariadb", Version: "10.11.6-MariaDB", Worst: worst, Findings: findings,
		Groups: []watch.GroupSummary{{Group: 0, Statements: 1200, QueueUS: 41_000_000, MaxQueueUS: 198_000}, {Group: 1, Statements: 1180, QueueUS: 39_500_000, MaxQueueUS: 190_000}},
		Health: watch.Health{Statements: int64(windowUS / 200_000), Joined: int64(windowUS/200_000) * 24 / 25,
			Unjoined: map[string]int64{"expired": 160, "tls": 12, "no_response": 8, "unexplained_delivery": 3}, CPUSeconds: 14.2}})
}

// chromium finds Debian's chromium (scripts/install-deps.sh installs it);
// a missing browser fails the test, except under -short.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if testing.Short() {
		t.Skip("chromium is not installed (make deps installs it): the page is not checked under -short")
	}
	t.Fatal("chromium is not installed (make deps installs Debian's chromium); the live page cannot be checked")
	return ""
}

func runChromium(t *testing.T, bin string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := []string{"--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--hide-scrollbars", "--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, bin, append(base, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return stdout.String()
}

// section returns the DOM inside the element with the given id, up to the
// next section.
func section(dom, id string) string {
	i := strings.Index(dom, `id="`+id+`"`)
	if i < 0 {
		return ""
	}
	rest := dom[i:]
	if j := strings.Index(rest, "</section>"); j >= 0 {
		return rest[:j]
	}
	return rest
}

var tags = regexp.MustCompile(`<[^>]*>`)

// TestPageInChromium opens the live page in headless Chromium against a
// server fed the synthetic quarter hour: the DOM must show the findings'
// evidence as rows and tables (never JSON), the digest table's rows, the
// charts' series, the header's reasons; filters in the address must
// narrow the table; at 375 px the page must not scroll sideways; and the
// screenshots at both widths must show the page's colours.
func TestPageInChromium(t *testing.T) {
	bin := chromium(t)
	v := New()
	fixture(t, v, time.Now())
	srv := httptest.NewServer(v.Handler())
	defer srv.Close()

	dom := runChromium(t, bin, "--window-size=1280,900", "--dump-dom", srv.URL+"/")
	findings := section(dom, "findings")
	text := tags.ReplaceAllString(findings, " ")
	for _, bad := range []string{`{"`, `":`, `[{`, `"conn"`, "queue_us"} {
		if strings.Contains(text, bad) {
			t.Errorf("findings show JSON (%s): %.400s", bad, text)
		}
	}
	for _, want := range []string{`class="finding"`, `data-code="POOL_QUEUE"`, `data-code="CLIENT_BACKPRESSURE"`, `<dl class="kv">`,
		`<table class="examples">`, `class="fix"`, "Fix: ", "max queue", " ms<", "send stall"} {
		if !strings.Contains(findings, want) {
			t.Errorf("findings lack %q", want)
		}
	}
	digests := section(dom, "digests")
	rows := regexp.MustCompile(`<tr class="[^"]*" data-digest="([^"]+)"`).FindAllStringSubmatch(digests, -1)
	var order []string
	for _, r := range rows {
		order = append(order, r[1])
	}
	// by total time: the stalled report, the queued update, the point select
	if fmt.Sprint(order) != fmt.Sprint([]string{fxReport, fxStock, fxOrders}) {
		t.Errorf("digest rows %v, want the three digests by total time", order)
	}
	for _, want := range []string{">p95<", ">p99<", ">queue<", ">send stall<", `aria-sort="descending"`, "SELECT * FROM `orders`"} {
		if !strings.Contains(digests, want) {
			t.Errorf("digest table lacks %q", want)
		}
	}
	for _, id := range []string{"p99", "p50", "request", "queue", "exec", "send_stall", "delivery"} {
		m := regexp.MustCompile(`<path class="series series-` + id + `[^"]*" data-series="` + id + `" d="([^"]*)"`).FindStringSubmatch(dom)
		if m == nil {
			t.Errorf("no %s series in the charts", id)
			continue
		}
		// every step of the window has statements, so each series has many segments
		if n := strings.Count(m[1], "M"); n < 60 && id != "p50" && id != "p99" || len(m[1]) < 200 {
			t.Errorf("%s series too short (%d moves): %.200s", id, n, m[1])
		}
	}
	// The header's reasons in the words of event's table, served with the
	// page: unexplained_delivery too, never as a bare code.
	header := section(dom, "coverage-line")
	for _, want := range []string{`data-reason="expired"`, "server row not read within --max-wait", "encrypted (TLS)", `id="joined"`, "(96%)",
		`data-reason="unexplained_delivery"`, "3 " + event.UnexplainedDelivery.Label(), "160 " + event.Expired.Label(), "12 " + event.TLS.Label(), "8 " + event.NoResponse.Label()} {
		if !strings.Contains(header, want) {
			t.Errorf("header lacks %q: %.600s", want, tags.ReplaceAllString(header, ""))
		}
	}
	if strings.Contains(header, "unexplained delivery") {
		t.Errorf("the header shows unexplained_delivery as a bare code: %.600s", tags.ReplaceAllString(header, ""))
	}
	if cov := section(dom, "coverage"); !strings.Contains(cov, event.UnexplainedDelivery.Kind().Lead()+event.UnexplainedDelivery.Label()) {
		t.Errorf("the coverage table lacks %q: %.600s", event.UnexplainedDelivery.Kind().Lead()+event.UnexplainedDelivery.Label(), tags.ReplaceAllString(cov, " "))
	}
	checkLocks(t, dom)
	if t.Failed() {
		t.Logf("DOM: %.6000s", dom)
	}

	// A filtered, sorted link: the update's digest alone; user filter keeps two.
	filtered := runChromium(t, bin, "--window-size=1280,900", "--dump-dom", srv.URL+"/?user=app&sort=p99_us&dir=asc")
	rows = regexp.MustCompile(`data-digest="([^"]+)"`).FindAllStringSubmatch(section(filtered, "digests"), -1)
	order = order[:0]
	for _, r := range rows {
		order = append(order, r[1])
	}
	if fmt.Sprint(order) != fmt.Sprint([]string{fxOrders, fxStock}) {
		t.Errorf("user=app by p99 ascending: rows %v, want orders then stock", order)
	}
	if !strings.Contains(filtered, `<option value="app" selected`) && !regexp.MustCompile(`<select id="f-user"[^>]*>.*?<option value="app"`).MatchString(filtered) {
		t.Errorf("user filter not offered")
	}
	if strings.Contains(section(filtered, "worst"), "reporting") {
		t.Errorf("the worst statements ignore the user filter")
	}

	phone := runChromium(t, bin, "--window-size=375,800", "--dump-dom", srv.URL+"/")
	if !strings.Contains(phone, `data-overflow="false"`) {
		m := regexp.MustCompile(`<body[^>]*>`).FindString(phone)
		t.Errorf("at 375 px the page scrolls sideways: %s", m)
	}

	dir := t.TempDir()
	if keep := os.Getenv("GAPSCOPE_KEEP_SCREENSHOTS"); keep != "" {
		dir = keep
	}
	for _, size := range []struct {
		name string
		w, h int
	}{{"desktop", 1280, 2400}, {"phone", 375, 3200}} {
		shot := filepath.Join(dir, "page-"+size.name+".png")
		runChromium(t, bin, fmt.Sprintf("--window-size=%d,%d", size.w, size.h), "--screenshot="+shot, srv.URL+"/")
		checkShot(t, shot, size.w)
	}
}

// checkLocks: the lock wait is drawn inside exec, hatched, with its own
// legend entry, wherever exec is drawn (the statement's bar, the digest
// table's bars, the parts chart), and only where there is one; the
// statement's blocker and its chain's root are told; the transactions line
// and the longest idle are listed.
func checkLocks(t *testing.T, dom string) {
	t.Helper()
	worst := section(dom, "worst")
	stmts := strings.Split(worst, `<div class="stmt"`)[1:]
	if len(stmts) < 2 {
		t.Fatalf("%d worst statements drawn, want several", len(stmts))
	}
	withLock := 0
	for _, st := range stmts {
		if !strings.Contains(st, lockedSQL) {
			if strings.Contains(st, "part-lock") || strings.Contains(st, "k-lock") || strings.Contains(st, `class="blocker`) {
				t.Errorf("a statement without a lock wait draws one: %.600s", tags.ReplaceAllString(st, " "))
			}
			continue
		}
		withLock++
		lock := regexp.MustCompile(`<div class="part part-exec"[^>]*><div class="part-lock" data-us="1400000"[^>]*style="width: ([0-9.]+)%`).FindStringSubmatch(st)
		if lock == nil || lock[1] != "96.55" {
			t.Errorf("the locked statement's exec lacks its lock wait segment (1.4 s of 1.45 s, 96.55%%): %v\n%.1500s", lock, st)
		}
		for _, want := range []string{`data-lock-wait="1400000"`, `<span class="k-lock">lock wait 1.40 s (of exec)</span>`, `class="blocker"`,
			"ALTER TABLE stock ADD COLUMN note TEXT", "id 142", "running a statement", "metadata lock", "certain, from performance_schema.metadata_locks",
			`class="blocker root"`, "root of the chain", "id 143", "idle in transaction: its application held the lock and sent nothing", "idle 11.90 s",
			"transaction 2"} {
			if !strings.Contains(st, want) {
				t.Errorf("the locked statement lacks %q: %.2500s", want, st)
			}
		}
	}
	if withLock != 1 {
		t.Errorf("%d worst statements are the locked one, want 1", withLock)
	}
	for _, m := range regexp.MustCompile(`(?s)<tr class="[^"]*" data-digest="([^"]+)">(.*?)</tr>`).FindAllStringSubmatch(section(dom, "digests"), -1) {
		has := strings.Contains(m[2], `class="part-lock"`)
		if has != (m[1] == fxStock) {
			t.Errorf("digest %s: lock wait segment drawn %v, want %v", m[1], has, m[1] == fxStock)
		}
	}
	if !strings.Contains(section(dom, "digests"), ">lock wait<") {
		t.Error("the digest table has no lock wait column")
	}
	m := regexp.MustCompile(`<path class="series series-lock f-lock" data-series="lock" d="([^"]*)"`).FindStringSubmatch(dom)
	if m == nil || strings.Count(m[1], "M") < 10 {
		t.Errorf("the parts chart draws no lock wait over minutes 10-13: %v", m)
	}
	if !strings.Contains(dom, `<pattern id="lock-hatch"`) || !strings.Contains(dom, `<span class="k-lock">lock wait (part of exec)</span>`) {
		t.Error("the parts chart lacks the lock wait's hatch or its legend entry")
	}
	txns := section(dom, "txns")
	for _, want := range []string{`id="txn-line"`, "<b>6</b> transactions", "held up 2 statements of other connections", idleTxnSQL,
		"12.00 s", "rolled back", "route /checkout"} {
		if !strings.Contains(txns, want) {
			t.Errorf("the transactions section lacks %q: %.2000s", want, txns)
		}
	}
	if i, j := strings.Index(txns, idleTxnSQL), strings.Index(txns, "sku = 5"); i < 0 || j < 0 || i > j {
		t.Errorf("the longest idle transaction is not listed first: %.2000s", txns)
	}
}

// checkShot decodes a screenshot: it must be the window's width, hold
// many colours, a fair share of non-background pixels, and the queue's
// colour (the charts and bars drew).
func checkShot(t *testing.T, path string, width int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s is not a PNG: %v", path, err)
	}
	b := img.Bounds()
	colours := map[uint32]bool{}
	ink, queue, total := 0, 0, 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			r, g, bl = r>>8, g>>8, bl>>8
			total++
			colours[r<<16|g<<8|bl] = true
			if !(r >= 0xf0 && g >= 0xf0 && bl >= 0xf0) { // not white or the page's grey
				ink++
			}
			if near(r, 0xe6) && near(g, 0x55) && near(bl, 0x0d) {
				queue++
			}
		}
	}
	t.Logf("%s: %dx%d, %d colours, %.1f%% ink, %d queue-coloured pixels", filepath.Base(path), b.Dx(), b.Dy(), len(colours), 100*float64(ink)/float64(total), queue)
	if b.Dx() != width || len(colours) < 200 || float64(ink) < 0.04*float64(total) || queue < 200 {
		t.Errorf("%s looks blank or broken: %dx%d, %d colours, %d of %d pixels inked, %d queue-coloured", path, b.Dx(), b.Dy(), len(colours), ink, total, queue)
	}
}

func near(a, b uint32) bool { return a+6 >= b && b+6 >= a }
