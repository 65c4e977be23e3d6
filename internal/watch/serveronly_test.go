package watch

import (
	"bytes"
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/report"
	"github.com/gapscope/gapscope/internal/sandbox"
)

// TestServerOnlyProfile: without the wire (--no-capture, or a capture that
// cannot open, which falls back to it), the profile ranks by the server's
// time from performance_schema, counts every row read, and names what the
// wire would have added as unknown rather than zero.
func TestServerOnlyProfile(t *testing.T) {
	inst := sandbox.ForTest(t, sandbox.Options{ServerArgs: serverArgs})
	for _, tc := range []struct {
		name string
		opts Options
		note string
	}{
		{"no-capture", Options{NoCapture: true}, "no capture (--no-capture)"},
		{"capture-fails", Options{Iface: "gapscope-none0"}, "no capture on gapscope-none0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			opts := tc.opts
			opts.DSN, opts.PollInterval = inst.DSN(""), 200*time.Millisecond
			var live bytes.Buffer
			opts.Sinks, opts.LiveEvery = append(opts.Sinks, NewTerminalView(&live)), 100*time.Millisecond
			const sleeps = 12
			res := runDuring(t, ctx, opts, func() error {
				for range sleeps {
					if err := queryOnce(ctx, inst, "SELECT SLEEP(0.005)"); err != nil {
						return err
					}
				}
				return nil
			})
			checkServerOnly(t, res.Profile, res, sleeps)
			view := live.String() // every frame: the last may precede the last poll
			if !strings.Contains(view, "no wire: client time unknown") || !regexp.MustCompile(`\n\d+(\.\d+)?ms +\? .*select sleep\(\?\)`).MatchString(view) {
				t.Errorf("the live view should list the server's slowest, client time unknown:\n%s", view)
			}
			if !anyContains(res.Notes, tc.note) || !anyContains(res.Notes, "is unknown") {
				t.Errorf("notes do not say why and what is unknown: %v", res.Notes)
			}
		})
	}
}

func checkServerOnly(t *testing.T, p *report.ProfileResult, res *Result, sleeps int64) {
	t.Helper()
	if !res.ServerOnly || p.Metric != "server" || p.MetricLabel != ServerOnlyMetric {
		t.Errorf("server only %v, metric %q label %q", res.ServerOnly, p.Metric, p.MetricLabel)
	}
	if !slices.Contains(p.Unknown, "client time") || !slices.Contains(p.Unknown, "queue") || !slices.Contains(p.Unknown, "delivery") {
		t.Errorf("unknown parts %v", p.Unknown)
	}
	if p.Statements != res.ServerSide.Rows || p.Statements < sleeps {
		t.Errorf("profile counts %d statements, the server rows read %d (at least %d sleeps)", p.Statements, res.ServerSide.Rows, sleeps)
	}
	i := slices.IndexFunc(p.Digests, func(d report.DigestRow) bool { return strings.Contains(d.DigestText, "SLEEP") })
	if i < 0 {
		t.Fatalf("no SLEEP digest: %+v", p.Digests)
	}
	d := p.Digests[i]
	if d.Calls != sleeps || d.P50US < 5000 || d.TotalUS < sleeps*5000 || d.MaxUS < d.P50US {
		t.Errorf("SLEEP(0.005) by the server's time: calls %d p50 %dµs total %dµs max %dµs", d.Calls, d.P50US, d.TotalUS, d.MaxUS)
	}
	if i != 0 {
		t.Errorf("SLEEP should rank first by server time, ranks %d: %+v", i+1, p.Digests)
	}
}
