package main

import (
	"strings"
	"testing"

	"github.com/gapscope/gapscope/internal/report"
	"github.com/gapscope/gapscope/internal/watch"
)

// The "watch itself" line says what the budget left joined in
// connections, not only as 1 in N (1 in 512 says little with 8).
func TestWriteOwnCost(t *testing.T) {
	var b strings.Builder
	writeOwnCost(&b, watch.OwnCost{CPUSeconds: 1.5, CPUs: 2, Share: 0.015, Budget: 0.01,
		Steps: []watch.SampleStep{{Sample: 8}, {Sample: 512}}, JoinedConns: 1, AppConns: 8})
	want := "watch itself: 1.5 s CPU, 1.50% of 2 CPUs (budget 1%; joining the fast statements of 1 in 512 connections at the end: 1 of 8)"
	if !strings.HasPrefix(b.String(), want) {
		t.Fatalf("got %q, want %q", b.String(), want)
	}
	b.Reset()
	writeOwnCost(&b, watch.OwnCost{CPUSeconds: 0.2, CPUs: 2, Share: 0.001})
	if got := b.String(); strings.Contains(got, "budget") || !strings.HasPrefix(got, "watch itself: 0.2 s CPU, 0.10% of 2 CPUs") {
		t.Fatalf("without a budget: %q", got)
	}
}

// The watch table's digest text follows the terminal's width (COLUMNS here)
// as analyze's and digest's do, instead of a fixed 120 columns that leaves
// it about 28 characters.
func TestWatchTextFollowsWidth(t *testing.T) {
	text := "select c from sbtest1 where id = ? and k between ? and ? order by pad"
	res := &watch.Result{Profile: &report.ProfileResult{Metric: "server", Statements: 1, Classes: 1,
		Digests: []report.DigestRow{{Digest: "ab", DigestText: text, Calls: 1, TotalUS: 10}}}}
	t.Setenv("COLUMNS", "220")
	var b strings.Builder
	if err := writeWatchResult(&b, res, watchFlags{format: "text"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), text) {
		t.Errorf("digest text cut at COLUMNS=220:\n%s", b.String())
	}
}

// An interface that does not exist (or "any", which a live capture cannot
// use) is a typo to report at once with the interfaces there are, not a run
// that falls back to server-only and blames capture rights.
func TestWatchUnknownIface(t *testing.T) {
	for _, iface := range []string{"nosuchif0", "any"} {
		f := watchFlags{dsn: "root@tcp(127.0.0.1:1)/", format: "text", iface: iface, sample: 1, ringMB: 32,
			capturePoint: "auto", poll: 1, minPoll: 1, maxWait: 1, noDefaults: true, storeSample: 1, eventsKeep: 1}
		_, err := f.options()
		if exitCode(err) != exitUsage || !strings.Contains(err.Error(), "lo") {
			t.Errorf("--iface %s: exit %d (%v), want %d naming the interfaces there are", iface, exitCode(err), err, exitUsage)
		}
	}
	f := watchFlags{dsn: "root@tcp(127.0.0.1:1)/", format: "text", iface: "lo", sample: 1, ringMB: 32,
		capturePoint: "auto", poll: 1, minPoll: 1, maxWait: 1, noDefaults: true, storeSample: 1, eventsKeep: 1}
	if _, err := f.options(); err != nil {
		t.Errorf("--iface lo: %v", err)
	}
}
