// Package web serves watch's live view to a browser: the page at / (from
// the binary: no CDN, no network, no inline script or style) and its data
// as JSON at /api/snapshot: watch's latest snapshot beside the view's own
// history of the last 15 minutes (charts, per-digest table, filter
// choices), filtered by the query's digest, user, db and group. The page
// long-polls it, so it updates as soon as watch publishes a new snapshot.
// The reasons' words come with the page, from event's table of reasons.
// It is a watch Sink: of statements and transactions for its history, of
// snapshots for the page.
package web

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/watch"
)

//go:embed assets/index.html assets/app.js assets/app.css
var assets embed.FS

var page = template.Must(template.ParseFS(assets, "assets/index.html"))

// View keeps the latest snapshot and the history for the page.
type View struct {
	hist *history
	txns *txnHistory

	mu      sync.Mutex
	seq     int64
	snap    json.RawMessage // the latest snapshot's JSON
	nowUS   int64           // the latest snapshot's time: the window's end
	changed chan struct{}   // closed and replaced at each new snapshot
}

// New returns an empty view.
func New() *View {
	return &View{hist: newHistory(), txns: &txnHistory{}, snap: json.RawMessage("null"), changed: make(chan struct{})}
}

// message is what /api/snapshot returns.
type message struct {
	Seq      int64           `json:"seq"`
	Snapshot json.RawMessage `json:"snapshot"`
	Live     *Live           `json:"live"`
}

var _ watch.Sink = (*View)(nil)

// Takes is part of watch.Sink: the view takes everything.
func (v *View) Takes() watch.Takes {
	return watch.TakesStatements | watch.TakesTransactions | watch.TakesSnapshots
}

// Statement is part of watch.Sink: it counts s in the view's history. It
// runs on watch's output stage goroutine: a lock, a map lookup, a few
// additions.
func (v *View) Statement(s *event.Statement) { v.hist.add(s) }

// Close is part of watch.Sink: the page keeps showing the run's final
// snapshot for as long as the server serves it.
func (v *View) Close(final *watch.Snapshot) error {
	v.Snapshot(final)
	return nil
}

// Snapshot publishes s to the page.
func (v *View) Snapshot(s *watch.Snapshot) {
	body, err := json.Marshal(s)
	if err != nil {
		return // a snapshot is plain data: cannot happen
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.seq++
	v.snap = body
	v.nowUS = s.TimeUS
	close(v.changed)
	v.changed = make(chan struct{})
}

// latest returns the current snapshot's JSON, its seq, the window's end
// and the channel closed when the next one comes.
func (v *View) latest() (json.RawMessage, int64, int64, <-chan struct{}) {
	v.mu.Lock()
	defer v.mu.Unlock()
	now := v.nowUS
	if now == 0 {
		now = time.Now().UnixMicro()
	}
	return v.snap, v.seq, now, v.changed
}

// body is the JSON of the current message for filter f.
func (v *View) body(f Filter) ([]byte, error) {
	snap, seq, now, _ := v.latest()
	live := v.hist.live(f, now)
	live.Transactions = v.txns.live(f, now)
	return json.Marshal(message{Seq: seq, Snapshot: snap, Live: live})
}

// filterOf reads the page's filter from a query string.
func filterOf(q url.Values) Filter {
	return Filter{Digest: q.Get("digest"), User: q.Get("user"), DB: q.Get("db"), Group: q.Get("group")}
}

// longPoll bounds how long /api/snapshot?after=N waits for a newer
// snapshot before answering with the current one.
const longPoll = 15 * time.Second

// Handler serves the page, its script and style, and its data.
func (v *View) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", v.servePage)
	mux.HandleFunc("GET /api/snapshot", v.serveSnapshot)
	mux.HandleFunc("GET /assets/app.js", serveAsset("assets/app.js", "text/javascript; charset=utf-8"))
	mux.HandleFunc("GET /assets/app.css", serveAsset("assets/app.css", "text/css; charset=utf-8"))
	return mux
}

// pageData is what the page is rendered with: JSON data blocks.
type pageData struct {
	// Initial is the message for the page's filter (message).
	Initial template.JS
	// Reasons are the reasons' words (reasonsJSON).
	Reasons template.JS
}

// reasonWords is what the page says of a reason: its kind, the lead of a
// line of that kind ("not joined: "), a few words for a crowded line and
// its sentence, all from event's one table of reasons.
type reasonWords struct {
	Kind  string `json:"kind"`
	Lead  string `json:"lead"`
	Label string `json:"label"`
	Text  string `json:"text"`
}

// reasonsJSON is every reason's words by name, served with the page: the
// page keeps no copy of the table to drift from it.
var reasonsJSON = func() []byte {
	m := map[string]reasonWords{}
	for _, r := range event.Reasons() {
		m[r.String()] = reasonWords{Kind: r.Kind().String(), Lead: r.Kind().Lead(), Label: r.Label(), Text: r.Text()}
	}
	b, err := json.Marshal(m) // escapes <, > and &, as the page's blocks need
	if err != nil {
		panic(err) // strings only: cannot happen
	}
	return b
}()

// servePage serves the page with the data of its query's filter in a
// JSON data block (not a script: the CSP allows none inline), so the page
// draws at once and a filtered link shows the filtered page, and the
// reasons' words in another.
func (v *View) servePage(w http.ResponseWriter, r *http.Request) {
	body, err := v.body(filterOf(r.URL.Query()))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	var b bytes.Buffer
	// json.Marshal escapes <, > and &: a statement's text cannot close the block.
	if err := page.Execute(&b, pageData{Initial: template.JS(body), Reasons: template.JS(reasonsJSON)}); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	securityHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b.Bytes())
}

// serveSnapshot answers at once, or with ?after=N once a snapshot newer
// than N exists (or longPoll passed).
func (v *View) serveSnapshot(w http.ResponseWriter, r *http.Request) {
	_, seq, _, changed := v.latest()
	if after, err := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64); err == nil && after >= seq {
		ctx, cancel := context.WithTimeout(r.Context(), longPoll)
		defer cancel()
		select {
		case <-changed:
		case <-ctx.Done():
		}
	}
	body, err := v.body(filterOf(r.URL.Query()))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	securityHeaders(w)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(body)
}

// serveAsset serves an embedded file. The binary carries it, so a new
// binary may change it: the browser revalidates.
func serveAsset(name, contentType string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, err := assets.ReadFile(name)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		securityHeaders(w)
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write(b)
	}
}

// csp keeps the page to its own origin and its own files: no inline
// script or style (the page sets styles through the DOM only), nothing
// loaded from elsewhere, no framing, no form posting.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func securityHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Security-Policy", csp)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
}
