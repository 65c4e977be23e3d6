package main

import (
	"strings"
	"testing"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/report"
	"github.com/gapscope/gapscope/internal/watch"
)

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
		f := watchFlags{secrets: collect.NewSecrets(), dsn: "root@tcp(127.0.0.1:1)/", format: "text", iface: iface, sample: 1, ringMB: 32,
			capturePoint: "auto", poll: 1, minPoll: 1, maxWait: 1, noDefaults: true, storeSample: 1, eventsKeep: 1}
		_, err := f.options()
		if exitCode(err) != exitUsage || !strings.Contains(err.Error(), "lo") {
			t.Errorf("--iface %s: exit %d (%v), want %d naming the interfaces there are", iface, exitCode(err), err, exitUsage)
		}
	}
	f := watchFlags{secrets: collect.NewSecrets(), dsn: "root@tcp(127.0.0.1:1)/", format: "text", iface: "lo", sample: 1, ringMB: 32,
		capturePoint: "auto", poll: 1, minPoll: 1, maxWait: 1, noDefaults: true, storeSample: 1, eventsKeep: 1}
	if _, err := f.options(); err != nil {
		t.Errorf("--iface lo: %v", err)
	}
}
