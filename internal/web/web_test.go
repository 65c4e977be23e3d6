package web

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
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

// The page embeds the latest snapshot, escaped: a statement's text can
// never close the script.
func TestPageEmbedsSnapshot(t *testing.T) {
	v := New()
	srv := httptest.NewServer(v.Handler())
	defer srv.Close()
	v.Snapshot(&watch.Snapshot{Worst: []event.Statement{{SQL: "select '</script><b>x'", ClientUS: 5}}})
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
	var msg message
	if err := json.Unmarshal([]byte(<-got), &msg); err != nil {
		t.Fatal(err)
	}
	if msg.Seq != 2 || msg.Snapshot.Health.Statements != 2 {
		t.Errorf("long poll returned seq %d with %d statements, want seq 2 with 2", msg.Seq, msg.Snapshot.Health.Statements)
	}
	if b := get(t, srv.URL+"/api/snapshot"); !strings.Contains(b, `"seq":2`) {
		t.Errorf("plain read: %s", b)
	}
}
