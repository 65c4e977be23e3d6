package main

import (
	"strings"
	"testing"

	"github.com/gapscope/gapscope/internal/watch"
)

// The "watch itself" line says what the budget left followed in
// connections, not only as 1 in N (1 in 512 says little with 8).
func TestWriteOwnCost(t *testing.T) {
	var b strings.Builder
	writeOwnCost(&b, watch.OwnCost{CPUSeconds: 1.5, CPUs: 2, Share: 0.015, Budget: 0.01,
		Steps: []watch.SampleStep{{Sample: 8}, {Sample: 512}}, FollowedConns: 1, AppConns: 8})
	want := "watch itself: 1.5 s CPU, 1.50% of 2 CPUs (budget 1%; following 1 in 512 connections at the end: 1 of 8)"
	if !strings.HasPrefix(b.String(), want) {
		t.Fatalf("got %q, want %q", b.String(), want)
	}
	b.Reset()
	writeOwnCost(&b, watch.OwnCost{CPUSeconds: 0.4, CPUs: 2, Share: 0.009, Budget: 0.01,
		Steps: []watch.SampleStep{{Sample: 8, Cycle: 4}}, FollowedConns: 1, AppConns: 8})
	if want := "(budget 1%; following 1 in 8 connections at the end: 1 of 8, 1 s in every 4 s)"; !strings.Contains(b.String(), want) {
		t.Fatalf("duty cycle: got %q, want %q", b.String(), want)
	}
	b.Reset()
	writeOwnCost(&b, watch.OwnCost{CPUSeconds: 0.2, CPUs: 2, Share: 0.001})
	if got := b.String(); strings.Contains(got, "budget") || !strings.HasPrefix(got, "watch itself: 0.2 s CPU, 0.10% of 2 CPUs") {
		t.Fatalf("without a budget: %q", got)
	}
}
