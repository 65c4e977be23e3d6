// Package web serves watch's live view to a browser: the page at / (from
// the binary: no CDN, no network) and the latest snapshot as JSON at
// /api/snapshot, which the page long-polls, so it updates as soon as watch
// publishes a new snapshot. It is a watch Sink.
package web

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"html/template"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/watch"
)

//go:embed assets/index.html
var assets embed.FS

var page = template.Must(template.ParseFS(assets, "assets/index.html"))

// View keeps the latest snapshot for the page.
type View struct {
	mu      sync.Mutex
	seq     int64
	body    []byte        // the latest snapshot's JSON, with its seq
	changed chan struct{} // closed and replaced at each new snapshot
}

// New returns an empty view.
func New() *View {
	v := &View{changed: make(chan struct{})}
	v.body, _ = json.Marshal(message{Seq: 0})
	return v
}

// message is what /api/snapshot returns.
type message struct {
	Seq      int64           `json:"seq"`
	Snapshot *watch.Snapshot `json:"snapshot"`
}

// Statement is part of watch.Sink: the view shows snapshots only.
func (v *View) Statement(*event.Statement) {}

// Snapshot publishes s to the page.
func (v *View) Snapshot(s *watch.Snapshot) {
	v.mu.Lock()
	defer v.mu.Unlock()
	body, err := json.Marshal(message{Seq: v.seq + 1, Snapshot: s})
	if err != nil {
		return // a snapshot is plain data: cannot happen
	}
	v.seq++
	v.body = body
	close(v.changed)
	v.changed = make(chan struct{})
}

// latest returns the current snapshot's JSON, its seq and the channel
// closed when the next one comes.
func (v *View) latest() ([]byte, int64, <-chan struct{}) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.body, v.seq, v.changed
}

// longPoll bounds how long /api/snapshot?after=N waits for a newer
// snapshot before answering with the current one.
const longPoll = 15 * time.Second

// Handler serves the page and the snapshots.
func (v *View) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", v.servePage)
	mux.HandleFunc("GET /api/snapshot", v.serveSnapshot)
	return mux
}

func (v *View) servePage(w http.ResponseWriter, r *http.Request) {
	body, _, _ := v.latest()
	var b bytes.Buffer
	if err := page.Execute(&b, template.JS(body)); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	securityHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(b.Bytes())
}

// serveSnapshot answers at once, or with ?after=N once a snapshot newer
// than N exists (or longPoll passed).
func (v *View) serveSnapshot(w http.ResponseWriter, r *http.Request) {
	body, seq, changed := v.latest()
	if after, err := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64); err == nil && after >= seq {
		ctx, cancel := context.WithTimeout(r.Context(), longPoll)
		defer cancel()
		select {
		case <-changed:
			body, _, _ = v.latest()
		case <-ctx.Done():
		}
	}
	securityHeaders(w)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(body)
}

// securityHeaders keep the page to its own origin: it loads nothing from
// elsewhere, and says so to the browser.
func securityHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline' 'self'; style-src 'unsafe-inline'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
}
