package watchtext

import (
	"strings"
	"testing"

	"github.com/gapscope/gapscope/internal/capture"
	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/txn"
	"github.com/gapscope/gapscope/internal/watch"
)

// The "watch itself" line says what the budget left joined in
// connections, not only as 1 in N (1 in 512 says little with 8).
func TestWriteOwnCost(t *testing.T) {
	var b strings.Builder
	writeOwnCost(&b, watch.OwnCost{CPUSeconds: 1.5, CPUs: 2, Share: 0.015, Budget: 0.01,
		Steps: []watch.SampleStep{{Sample: 8}, {Sample: 512}}, JoinedConns: ptr(1), AppConns: ptr(8)})
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

func TestDescribePath(t *testing.T) {
	got := describePath(capture.PathStats{Point: capture.PointClient, Conns: 2, RTTMinUS: 10_000, RTTMedianUS: 10_100,
		RTTMaxUS: 10_200, SpreadUS: 300}, collect.Clock{ErrorUS: 40, PathRTTUS: 10_150})
	for _, want := range []string{"capture point: the application's host", "round trip to the server 10.1ms", "2 connections",
		"clock calibration: ±40µs", "markers' connection round trip 10.15ms, corrected for: each way assumed half"} {
		if !strings.Contains(got, want) {
			t.Errorf("describePath lacks %q:\n%s", want, got)
		}
	}
	if got := describePath(capture.PathStats{}, collect.Clock{ErrorUS: 3, PathRTTUS: 60}); !strings.Contains(got, "unknown") || strings.Contains(got, "corrected") {
		t.Errorf("local: %s", got)
	}
}

func ptr(n int) *int { return &n }

// The transactions line says how long applications held their
// transactions open and names the one idle longest; nothing without any.
func TestWriteTxnSummary(t *testing.T) {
	var b strings.Builder
	writeTxnSummary(&b, txn.Summary{})
	if b.Len() != 0 {
		t.Errorf("no transactions, yet %q", b.String())
	}
	writeTxnSummary(&b, txn.Summary{Count: 3, Kept: 3, OpenUS: 1_500_000, InAppUS: 1_300_000, LockWaitUS: 1_200_000,
		LongestIdle: []event.Transaction{{Conn: "10.0.0.1:5001>10.0.0.9:3306", ConnID: 7, User: "app", MaxIdleUS: 1_300_000,
			OpenUS: 1_310_000, Statements: 3, EndKind: "commit", FirstSQL: "begin", LeadSQL: "update t set v = ? where id = ?"}}})
	for _, want := range []string{"transactions 3:", "idle in the application", "waited 1.2s for locks", "conn 7", "update t set v = ? where id = ?", "commit"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("%q lacks %q", b.String(), want)
		}
	}
}
