package watch

import (
	"maps"
	"strings"
	"time"

	"github.com/gapscope/gapscope/internal/event"
)

// Sink receives what watch sees while it runs, for exporters (Prometheus,
// OpenTelemetry) and the live web view. Statement runs on the joiner's
// goroutine, once per statement after the join, and must be quick: a
// slow sink holds the join. Snapshot runs on watch's main loop every
// LiveEvery, and once more at the end with the run's final counts.
type Sink interface {
	Statement(s *event.Statement)
	Snapshot(s *Snapshot)
}

// Snapshot is what the live views show at one instant.
type Snapshot struct {
	TimeUS int64 `json:"t"`
	// Flavor ("mariadb", "mysql", "percona") and Version are the server's.
	Flavor  string `json:"flavor"`
	Version string `json:"version"`
	// Worst are the slowest recent statements with their five parts.
	Worst []event.Statement `json:"worst"`
	// Groups is queue time per thread-pool group.
	Groups []GroupSummary `json:"pool_groups"`
	// Conns are the connections that lost most time waiting.
	Conns []ConnSummary `json:"conns"`
	// Findings are the statement rules' findings on the latest statements.
	Findings []event.Finding `json:"findings"`
	Health   Health          `json:"health"`
	// Final is set on the last snapshot of a run.
	Final bool `json:"final"`
}

// Health is watch's own coverage: how much of the traffic it saw and
// joined, and what it lost on the way.
type Health struct {
	Statements int64 `json:"statements"`
	Joined     int64 `json:"joined"`
	// Unjoined counts unjoined statements by reason (UnjoinedReason).
	Unjoined map[string]int64 `json:"unjoined"`
	// QueueDrops are wire statements dropped because the joiner's queue
	// was full; PacketsDropped are packets the capture lost (kernel ring
	// and tracker queue), known only at the end of a run.
	QueueDrops     int64   `json:"queue_drops"`
	PacketsDropped int64   `json:"packets_dropped"`
	RingLost       int64   `json:"ring_lost"`
	CPUSeconds     float64 `json:"cpu_seconds"`
	// Following says which share of the connections watch follows ("" for
	// all).
	Following string   `json:"following,omitempty"`
	Notes     []string `json:"notes,omitempty"`
}

// Unjoined reasons: why a statement has no server-side half.
const (
	UnjoinedNoResponse  = "no_response"   // COM_QUIT and the like: nothing to join
	UnjoinedTLS         = "tls"           // encrypted: no text to match
	UnjoinedNoText      = "no_text"       // prepared before the capture started
	UnjoinedIncomplete  = "incomplete"    // the connection ended mid-response
	UnjoinedMidStream   = "mid_stream"    // the capture started mid-connection
	UnjoinedNoServerRow = "no_server_row" // no performance_schema row matched in time
)

// UnjoinedReason names why s stayed unjoined, from what the capture noted
// on it; "" for a joined statement.
func UnjoinedReason(s *event.Statement) string {
	if s.Joined {
		return ""
	}
	if !s.HasResponse() {
		return UnjoinedNoResponse
	}
	for _, n := range s.Notes {
		switch {
		case strings.HasPrefix(n, "tls"):
			return UnjoinedTLS
		case strings.HasPrefix(n, "statement text unknown"):
			return UnjoinedNoText
		case strings.HasPrefix(n, "incomplete"):
			return UnjoinedIncomplete
		case strings.HasPrefix(n, "capture started mid-connection"):
			return UnjoinedMidStream
		}
	}
	return UnjoinedNoServerRow
}

// fanout hands statements and snapshots to the run's sinks and keeps the
// unjoined tally the snapshots carry. statement runs under the watch
// sink's lock; unjoined is read under it too.
type fanout struct {
	sinks    []Sink
	unjoined map[string]int64
}

func newFanout(sinks []Sink) *fanout {
	return &fanout{sinks: sinks, unjoined: map[string]int64{}}
}

func (f *fanout) statement(s *event.Statement) {
	if f == nil || len(f.sinks) == 0 {
		return // the tally is only ever read for the sinks' snapshots
	}
	if r := UnjoinedReason(s); r != "" {
		f.unjoined[r]++
	}
	for _, k := range f.sinks {
		k.Statement(s)
	}
}

func (f *fanout) snapshot(s *Snapshot) {
	for _, k := range f.sinks {
		k.Snapshot(s)
	}
}

// sinkSnapshot builds the snapshot of now from the watch sink's state
// and the engine's counters.
func (e *engine) sinkSnapshot(findings []event.Finding) *Snapshot {
	k := e.sink
	k.mu.Lock()
	snap := &Snapshot{TimeUS: time.Now().UnixMicro(), Worst: append([]event.Statement(nil), k.worst...),
		Groups: k.groupList(), Conns: k.topConns(5), Findings: findings}
	snap.Health = Health{Statements: k.total, Joined: k.joined, Unjoined: maps.Clone(k.out.unjoined)}
	k.mu.Unlock()
	snap.Health.QueueDrops = e.wire.queueDrops.Load()
	e.side.serverM.Lock()
	snap.Flavor, snap.Version = e.side.flavor, e.side.version
	snap.Health.RingLost = e.side.server.RingLost
	e.side.serverM.Unlock()
	snap.Health.CPUSeconds = ownCPU().Seconds()
	if e.live != nil {
		snap.Health.Following = followingNoteOf(e.live.Sample())
	}
	return snap
}

// publishSnapshot refreshes the live findings and hands the sinks a
// snapshot; without sinks it does nothing.
func (e *engine) publishSnapshot() {
	if len(e.opts.Sinks) == 0 {
		return
	}
	e.refreshLiveFindings()
	e.sink.out.snapshot(e.sinkSnapshot(e.liveFindings))
}

// publishFinal hands the sinks the run's last snapshot, with its final
// findings and the capture's losses.
func (e *engine) publishFinal(res *Result) {
	if len(e.opts.Sinks) == 0 {
		return
	}
	snap := e.sinkSnapshot(res.Findings)
	snap.Final = true
	snap.Health.PacketsDropped = res.Capture.KernelDrops
	snap.Health.Notes = res.Notes
	e.sink.out.snapshot(snap)
}
