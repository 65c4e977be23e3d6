package watch

import (
	"strings"
	"testing"

	"github.com/gapscope/gapscope/internal/capture"
)

func TestPathNoteOnlyOffTheServerHost(t *testing.T) {
	if n := pathNote(capture.PathStats{Point: capture.PointServer}, 10); n != "" {
		t.Errorf("server host: %q", n)
	}
	n := pathNote(capture.PathStats{Point: capture.PointClient, RTTMedianUS: 10_100, Conns: 3}, 40)
	for _, want := range []string{"capture point client", "10100 us over 3 connections", "±40 us"} {
		if !strings.Contains(n, want) {
			t.Errorf("note %q lacks %q", n, want)
		}
	}
}

func TestPathWatchSummary(t *testing.T) {
	var none hostSockets = noSockets{}
	if none.poll() != nil || none.path() != nil || none.limited() != nil {
		t.Error("no host sockets read something")
	}
	w := newPathWatch(nil, nil)
	w.socks["a"] = capture.SocketStat{MinRTTUS: 10_100, RTTUS: 12_000, RTTVarUS: 900}
	w.socks["b"] = capture.SocketStat{MinRTTUS: 10_200, RTTUS: 11_000, RTTVarUS: 700}
	w.socks["c"] = capture.SocketStat{} // not measured yet
	k := w.path()
	if k == nil || k.Sockets != 2 || k.MinRTTUS != 10_200 || k.RTTUS != 12_000 || k.RTTVarUS != 900 {
		t.Errorf("summary %+v", k)
	}
}
