package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/store"
)

func TestByteSizeFlag(t *testing.T) {
	for in, want := range map[string]int64{"20MB": 20e6, "1GiB": 1 << 30, "10 MiB": 10 << 20, "512": 512, "1.5KB": 1500, "0": 0} {
		var b byteSize
		if err := b.Set(in); err != nil || int64(b) != want {
			t.Errorf("%q: %d (%v), want %d", in, b, err, want)
		}
	}
	for _, bad := range []string{"", "MB", "-1MB", "ten"} {
		var b byteSize
		if err := b.Set(bad); err == nil {
			t.Errorf("%q accepted as %d bytes", bad, b)
		}
	}
	b := byteSize(1 << 30)
	if b.String() != "1GiB" {
		t.Errorf("1 GiB prints as %q", b.String())
	}
}

func TestRetentionFlag(t *testing.T) {
	for in, want := range map[string]time.Duration{"7d": 7 * 24 * time.Hour, "36h": 36 * time.Hour, "0": 0, "1.5d": 36 * time.Hour} {
		var r retention
		if err := r.Set(in); err != nil || time.Duration(r) != want {
			t.Errorf("%q: %v (%v), want %v", in, time.Duration(r), err, want)
		}
	}
	for _, bad := range []string{"", "d", "-1d", "week"} {
		var r retention
		if err := r.Set(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestReportSaysWhatATrimmedStoreHolds: a store trimmed by age and
// sampled reads, and the report says from when it holds what.
func TestReportSaysWhatATrimmedStoreHolds(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "w.db")
	st, err := store.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	run, _ := st.StartRun(ctx, "watch", "", now.Add(-3*time.Hour).UnixMicro())
	w := st.NewWriter(run, store.WriterOptions{SampleEvery: 4, Limits: store.Limits{Retain: time.Hour},
		Now: func() time.Time { return now }})
	for i := range 400 {
		s := event.Statement{Conn: "c", Cmd: "COM_QUERY", Digest: "d", DigestText: "select ?", Parts: event.Parts{ClientUS: 100}, Joined: true,
			TReqFirst: now.Add(-3*time.Hour + time.Duration(i)*30*time.Second).UnixMicro()}
		w.Add(&s)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st.EndRun(ctx, run, now.UnixMicro(), "")
	st.Close()
	html, err := runReportCmd(t, "--store", db, "-o", "-")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"the store kept a row for", "trimmed to its limits", "--store-retain", "statement rows from"} {
		if !strings.Contains(html, want) {
			t.Errorf("the report of a trimmed store lacks %q", want)
		}
	}
}
