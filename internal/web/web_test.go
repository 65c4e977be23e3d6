package web

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/watch"
)

func get(t *testing.T, url string) string {
	t.Helper()
	r, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	if r.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s", url, r.Status)
	}
	return string(b)
}

// The page embeds the latest snapshot as a JSON data block, escaped: a
// statement's text can never close it. It runs no inline script or
// style, and its CSP says so.
func TestPageEmbedsSnapshot(t *testing.T) {
	v := New()
	srv := httptest.NewServer(v.Handler())
	defer srv.Close()
	v.Snapshot(&watch.Snapshot{Worst: []event.Statement{{SQL: "select '</script><b>x'", Parts: event.Parts{ClientUS: 5}}}})
	page := get(t, srv.URL+"/")
	if strings.Contains(page, "</script><b>") || !strings.Contains(page, `\u003c/script\u003e`) {
		t.Errorf("statement text not escaped in the page")
	}
	if strings.Contains(page, "http://") || strings.Contains(page, "https://") {
		t.Errorf("the page refers to another origin")
	}
	if r, _ := http.Get(srv.URL + "/nope"); r.StatusCode != http.StatusNotFound {
		t.Errorf("/nope: %s", r.Status)
	}
	// Every script is either a file of the page's own or a JSON data block.
	for _, m := range regexp.MustCompile(`<script([^>]*)>`).FindAllStringSubmatch(page, -1) {
		if !strings.Contains(m[1], `src="assets/app.js"`) && !strings.Contains(m[1], `type="application/json"`) {
			t.Errorf("inline script %s", m[0])
		}
	}
	if strings.Contains(page, "<style") || strings.Contains(page, " style=") {
		t.Errorf("inline style in the page")
	}
	r, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if c := r.Header.Get("Content-Security-Policy"); strings.Contains(c, "unsafe") || !strings.Contains(c, "script-src 'self'") || !strings.Contains(c, "default-src 'none'") {
		t.Errorf("CSP %q", c)
	}
	for path, typ := range map[string]string{"/assets/app.js": "text/javascript", "/assets/app.css": "text/css"} {
		r, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), typ) || len(b) < 1000 {
			t.Errorf("%s: %s, %s, %d bytes", path, r.Status, r.Header.Get("Content-Type"), len(b))
		}
	}
}

// /api/snapshot?after=N answers when a newer snapshot comes.
func TestLongPoll(t *testing.T) {
	v := New()
	srv := httptest.NewServer(v.Handler())
	defer srv.Close()
	v.Snapshot(&watch.Snapshot{Health: watch.Health{Statements: 1}})
	got := make(chan string, 1)
	go func() { got <- get(t, srv.URL+"/api/snapshot?after=1") }()
	select {
	case b := <-got:
		t.Fatalf("answered before a new snapshot: %s", b)
	case <-time.After(200 * time.Millisecond):
	}
	v.Snapshot(&watch.Snapshot{Health: watch.Health{Statements: 2}})
	var msg struct {
		Seq      int64
		Snapshot watch.Snapshot
		Live     Live
	}
	if err := json.Unmarshal([]byte(<-got), &msg); err != nil {
		t.Fatal(err)
	}
	if msg.Seq != 2 || msg.Snapshot.Health.Statements != 2 || msg.Live.StepUS != stepUS {
		t.Errorf("long poll returned seq %d with %d statements, step %d; want seq 2 with 2, step %d",
			msg.Seq, msg.Snapshot.Health.Statements, msg.Live.StepUS, stepUS)
	}
	if b := get(t, srv.URL+"/api/snapshot"); !strings.Contains(b, `"seq":2`) {
		t.Errorf("plain read: %s", b)
	}
	if err := v.Close(&watch.Snapshot{Final: true}); err != nil {
		t.Fatal(err)
	}
	if b := get(t, srv.URL+"/api/snapshot"); !strings.Contains(b, `"seq":3`) || !strings.Contains(b, `"final":true`) {
		t.Errorf("after Close the page should show the final snapshot: %s", b)
	}
}

// The history's quantiles stay within a bucket's width of the truth, per
// step and per digest, and its series covers the window step by step.
func TestHistoryQuantiles(t *testing.T) {
	h := newHistory()
	now := int64(1_800_000_000_000_000)
	end := now - now%stepUS - stepUS // one complete step
	for i := int64(1); i <= 1000; i++ {
		h.add(&event.Statement{Cmd: "COM_QUERY", DigestText: "SELECT ?", TReqFirst: end - i*1000, TRespLast: end + 1 + i, Parts: event.Parts{ClientUS: i * 100, ExecUS: i * 100}, Joined: true})
	}
	l := h.live(Filter{}, now)
	if len(l.Series) != nSteps {
		t.Fatalf("%d points, want %d", len(l.Series), nSteps)
	}
	var p Point
	for _, q := range l.Series {
		if q.Calls > 0 {
			p = q
		}
	}
	near := func(name string, got, want int64) {
		t.Helper()
		if float64(got) < 0.88*float64(want) || float64(got) > 1.12*float64(want) {
			t.Errorf("%s = %d, want %d ± 12%%", name, got, want)
		}
	}
	if p.Calls != 1000 || p.Joined != 1000 || p.MaxUS != 100_000 {
		t.Fatalf("point %+v", p)
	}
	near("p50", p.P50US, 50_000)
	near("p99", p.P99US, 99_000)
	near("mean exec", p.Parts[2], 50_050)
	if len(l.Digests) != 1 {
		t.Fatalf("digests %+v", l.Digests)
	}
	d := l.Digests[0]
	near("digest p95", d.P95US, 95_000)
	if d.TotalUS != 50_050_000 || d.Parts[2] != d.TotalUS || d.Text != "SELECT ?" {
		t.Errorf("digest %+v", d)
	}
	for _, us := range []int64{0, 1, 3, 4, 7, 8, 100, 12345, 1 << 40} {
		if m := bucketMid(bucketOf(us)); float64(m) < 0.875*float64(us) || float64(m) > 1.125*float64(us)+1 {
			t.Errorf("bucket of %d reads %d", us, m)
		}
	}
}

// Filters select cells; statements older than the window are not
// counted; a flood of distinct digests is bounded.
func TestHistoryFiltersAndBounds(t *testing.T) {
	h := newHistory()
	now := int64(1_800_000_000_000_000)
	g1 := 1
	add := func(digest, user, db string, group *int, at int64) {
		h.add(&event.Statement{Cmd: "COM_QUERY", Fingerprint: digest, DigestText: digest, User: user, DB: db, PoolGroup: group,
			TReqFirst: at - 500, TRespLast: at, Parts: event.Parts{ClientUS: 500}})
	}
	add("a", "app", "shop", &g1, now-1_000_000)
	add("b", "app", "shop", nil, now-2_000_000)
	add("c", "report", "dw", nil, now-60_000_000)
	add("old", "app", "shop", nil, now-windowUS-stepUS)      // before the window
	h.add(&event.Statement{Cmd: "COM_QUIT", TReqFirst: now}) // no response
	calls := func(f Filter) (n int64, digests []string) {
		l := h.live(f, now)
		for _, p := range l.Series {
			n += p.Calls
		}
		for _, d := range l.Digests {
			digests = append(digests, d.Digest)
		}
		return n, digests
	}
	for _, c := range []struct {
		f    Filter
		want string
	}{
		{Filter{}, "3 [a b c]"},
		{Filter{User: "app"}, "2 [a b]"},
		{Filter{DB: "dw"}, "1 [c]"},
		{Filter{Group: "1"}, "1 [a]"},
		{Filter{Group: "none"}, "2 [b c]"},
		{Filter{Digest: "b", User: "app"}, "1 [b]"},
		{Filter{Digest: "b", User: "report"}, "0 []"},
	} {
		n, d := calls(c.f)
		if got := fmt.Sprint(n, " ", d); got != c.want {
			t.Errorf("%+v: %s, want %s", c.f, got, c.want)
		}
	}
	o := h.live(Filter{User: "report"}, now).Options
	if fmt.Sprint(o.Users, o.DBs, o.Groups, o.NoGroup, len(o.Digests)) != "[app report] [dw shop] [1] true 3" {
		t.Errorf("options %+v: the filters offer every value of the window, whatever is selected", o)
	}
	// 5000 distinct digests in one step: the cells stay bounded, the calls all counted.
	b := newHistory()
	for i := range 5000 {
		b.add(&event.Statement{Cmd: "COM_QUERY", Fingerprint: fmt.Sprint("d", i), User: fmt.Sprint("u", i%3), TReqFirst: now - 10, TRespLast: now, Parts: event.Parts{ClientUS: 10}})
	}
	cells, _ := b.ring.step(now / stepUS)
	if len(cells) > 2*maxKeys+1 {
		t.Errorf("%d cells in a step, bound %d", len(cells), 2*maxKeys+1)
	}
	l := b.live(Filter{}, now)
	var n int64
	for _, p := range l.Series {
		n += p.Calls
	}
	if n != 5000 || len(l.Digests) != maxListed || !strings.Contains(fmt.Sprint(l.Digests), otherDigest) {
		t.Errorf("%d calls in %d digest rows, want 5000 in %d, one of them %s", n, len(l.Digests), maxListed, otherDigest)
	}
}

// The page's reasons are event's table, served with it: every reason the
// table has, with its words, and none it lacks (the page once kept a copy
// that listed no_server_row, which does not exist, and lacked
// unexplained_delivery, shown as a bare code); the script keeps no words
// of its own for a reason.
func TestPageReasonsFromTable(t *testing.T) {
	srv := httptest.NewServer(New().Handler())
	defer srv.Close()
	m := regexp.MustCompile(`<script id="reasons" type="application/json">([^<]*)</script>`).FindStringSubmatch(get(t, srv.URL+"/"))
	if m == nil {
		t.Fatal("the page has no reasons block")
	}
	var got map[string]reasonWords
	if err := json.Unmarshal([]byte(m[1]), &got); err != nil {
		t.Fatalf("reasons block %q: %v", m[1], err)
	}
	want := map[string]reasonWords{}
	for _, r := range event.Reasons() {
		want[r.String()] = reasonWords{Kind: r.Kind().String(), Lead: r.Kind().Lead(), Label: r.Label(), Text: r.Text()}
	}
	for name, w := range want {
		if g, ok := got[name]; !ok || g != w || g.Label == "" {
			t.Errorf("the page's reason %q is %+v, want %+v", name, g, w)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("the page lists a reason %q the table does not have", name)
		}
	}
	if _, ok := got["unexplained_delivery"]; !ok {
		t.Error("the page lacks unexplained_delivery")
	}
	if _, ok := got["no_server_row"]; ok {
		t.Error("the page lists no_server_row")
	}
	js := get(t, srv.URL+"/assets/app.js")
	for _, name := range append(slices.Collect(maps.Keys(want)), "no_server_row") {
		// a key of an object literal, or a quoted name
		if regexp.MustCompile(`(^|[^\w."'])` + name + `\s*:|["'` + "`" + `]` + name + `["'` + "`" + `]`).MatchString(js) {
			t.Errorf("app.js names the reason %q itself: its words must come from the served table", name)
		}
	}
}

// Lock waits are counted inside exec, per step (mean over the joined
// statements) and per digest (sum and count); an unjoined statement's
// lock wait is not (its exec is unknown).
func TestHistoryLockWaits(t *testing.T) {
	h := newHistory()
	now := int64(1_800_000_000_000_000)
	end := now - now%stepUS - stepUS
	for i := range 4 {
		s := event.Statement{Cmd: "COM_QUERY", Fingerprint: "u", DigestText: "UPDATE t SET a = ?", TReqFirst: end, TRespLast: end + 1 + int64(i),
			Parts: event.Parts{ClientUS: 1000, ExecUS: 800, DeliveryUS: 200}, Joined: true}
		if i < 2 {
			s.LockWait = &event.LockWait{LockWaitUS: 600}
		}
		h.add(&s)
	}
	h.add(&event.Statement{Cmd: "COM_QUERY", Fingerprint: "u", TReqFirst: end, TRespLast: end + 9, Parts: event.Parts{ClientUS: 1000},
		LockWait: &event.LockWait{LockWaitUS: 900}}) // unjoined
	l := h.live(Filter{}, now)
	var p Point
	for _, q := range l.Series {
		if q.Calls > 0 {
			p = q
		}
	}
	if p.Joined != 4 || p.Parts[2] != 800 || p.LockWaitUS != 300 {
		t.Errorf("point %+v: want a mean lock wait of 300 µs inside a mean exec of 800", p)
	}
	if len(l.Digests) != 1 || l.Digests[0].LockWaitUS != 1200 || l.Digests[0].LockWaits != 2 {
		t.Errorf("digests %+v: want 1200 µs of lock wait over 2 statements", l.Digests)
	}
	b, _ := json.Marshal(l)
	if !strings.Contains(string(b), `"lock_wait_us":1200,"lock_waits":2`) {
		t.Errorf("the page's JSON lacks the digest's lock waits: %s", b)
	}
}

// The view takes transactions (watch.TakesTransactions): counted by the step they
// ended in, filtered by user and db, the longest idle listed longest
// first and bounded; none in the window is no transactions object.
func TestViewTransactions(t *testing.T) {
	v := New()
	now := int64(1_800_000_000_000_000)
	v.Snapshot(&watch.Snapshot{TimeUS: now})
	if v.Takes()&watch.TakesTransactions == 0 {
		t.Fatal("the view does not take transactions")
	}
	add := func(user string, endUS, idle int64, sql string) {
		v.Transaction(&event.Transaction{Conn: "c", User: user, DB: "shop", Seq: 1, Start: endUS - idle - 100, End: endUS, EndKind: "commit",
			Statements: 2, OpenUS: idle + 100, InAppUS: idle, MaxIdleUS: idle, LockWaitUS: 10, LeadSQL: sql + strings.Repeat("x", 1000)})
	}
	for i := range 12 {
		add("app", now-int64(i)*7_000_000, int64(1000*(i+1)), fmt.Sprint("q", i))
	}
	add("batch", now-60_000_000, 50_000_000, "long")
	add("app", now-windowUS-stepUS, 90_000_000, "old") // ended before the window
	add("app", now-windowUS-2*stepUS, 0, "older")      // older than the ring: ignored
	live := func(f Filter) *TxnLive {
		var m message
		b, err := v.body(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		return m.Live.Transactions
	}
	all := live(Filter{})
	if all == nil || all.Count != 13 || all.MaxIdleUS != 50_000_000 || all.LockWaitUS != 130 || len(all.LongestIdle) != idleShown {
		t.Fatalf("all: %+v", all)
	}
	var order []string
	for _, x := range all.LongestIdle {
		order = append(order, strings.TrimRight(x.LeadSQL, "x…"))
		if n := len([]rune(x.LeadSQL)); n > txnTextRunes {
			t.Errorf("a kept transaction holds %d runes of text, bound %d", n, txnTextRunes)
		}
	}
	if fmt.Sprint(order) != "[long q11 q10 q9 q8]" {
		t.Errorf("longest idle %v, want long then q11 down", order)
	}
	app := live(Filter{User: "app", Digest: "whatever", Group: "1"})
	if app == nil || app.Count != 12 || app.LongestIdle[0].MaxIdleUS != 12_000 {
		t.Errorf("user app (digest and group do not apply): %+v", app)
	}
	if none := live(Filter{DB: "dw"}); none != nil {
		t.Errorf("db dw: %+v, want none", none)
	}
	// A flood of (user, db) pairs in one step stays bounded.
	for i := range 500 {
		v.Transaction(&event.Transaction{Conn: "c", User: fmt.Sprint("u", i), DB: "d", End: now, MaxIdleUS: int64(i)})
	}
	cells, _ := v.txns.ring.step(now / stepUS)
	if len(cells) > maxTxnKeys+1 || live(Filter{}).Count != 513 {
		t.Errorf("%d cells in a step (bound %d), %d transactions", len(cells), maxTxnKeys+1, live(Filter{}).Count)
	}
}
