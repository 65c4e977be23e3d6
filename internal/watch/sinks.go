package watch

import (
	"time"

	"github.com/gapscope/gapscope/internal/event"
)

// Sink receives what watch sees while it runs, for exporters (Prometheus,
// OpenTelemetry), the live web view, the events file and the store.
// Statement runs on the output stage's goroutine, once per statement after
// the join, and should be quick: statements that find the stage's queue
// full reach no sink. s is the sink's during the call only: its memory
// goes to a later statement once every sink had it, so a sink keeps a copy
// of what it needs. Snapshot runs on watch's main loop every LiveEvery,
// and once more at the end with the run's final counts.
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
	// Unjoined counts unjoined statements by reason (UnjoinedReason's
	// names; event.UnjoinedReasons lists them).
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

// UnjoinedReason names why s stayed unjoined (ReasonNone for a joined
// statement), as watch decides it (decideReason) from what the capture and
// the join recorded on it: for a statement watch reported, the reason it
// carries.
func UnjoinedReason(s *event.Statement) event.Reason { return decideReason(s, nil) }

// decideReason is the one place a statement's reason is decided, once,
// when it reaches the tally: the capture and the join propose one (s.Why),
// and watch adds what they cannot know. A server statement keeps its
// server-only reason; a wire statement with no response had nothing to
// join, whatever the join gave up; a give-up of a statement whose row
// the join waited for (Reason.Waited) takes what lost knows of the row
// (the ring lost it, the join sample dropped it; lost may be nil); a
// statement with no reason says so. The reason's sentence is written
// from it where the statement is (event.Statement.AllNotes).
func decideReason(s *event.Statement, lost func(*event.Statement) event.Reason) event.Reason {
	switch {
	case s.Joined:
		return event.ReasonNone
	case s.Why.ServerOnly(), s.Why == event.ReplicaStream: // a stream's server row has no response either
		return s.Why
	case !s.HasResponse():
		return event.NoResponse
	case s.Why == event.ReasonNone:
		return event.NoReason
	case s.Why.Waited() && lost != nil:
		if r := lost(s); r != event.ReasonNone {
			return r
		}
	}
	return s.Why
}

// StatementFunc is a sink that wants statements only: f is called for
// every statement after the join, on the output stage's goroutine.
type StatementFunc func(*event.Statement)

func (f StatementFunc) Statement(s *event.Statement) { f(s) }
func (StatementFunc) Snapshot(*Snapshot)             {}

// sinkSnapshot builds the snapshot of now from the watch sink's state
// and the engine's counters.
func (e *engine) sinkSnapshot(findings []event.Finding) *Snapshot {
	k := e.tally
	k.mu.Lock()
	snap := &Snapshot{TimeUS: time.Now().UnixMicro(), Worst: append([]event.Statement(nil), k.worst...),
		Groups: k.groupList(), Conns: k.topConns(5), Findings: findings}
	snap.Health = Health{Statements: k.total, Joined: k.joined, Unjoined: k.cov.unjoinedByReason()}
	k.mu.Unlock()
	snap.Health.QueueDrops = e.wire.queueDrops.Load()
	e.side.serverM.Lock()
	snap.Flavor, snap.Version = e.side.flavor, e.side.version
	snap.Health.RingLost = e.side.server.RingLost
	e.side.serverM.Unlock()
	snap.Health.CPUSeconds = ProcessCPU().Seconds()
	snap.Health.Following = e.followingNote() // the join sample's, as the terminal shows
	return snap
}

// publishSnapshot refreshes the live findings and hands the sinks a
// snapshot; without sinks it does nothing.
func (e *engine) publishSnapshot() {
	if !takesSnapshots(e.opts.Sinks) {
		return
	}
	e.refreshLiveFindings()
	e.snapshotSinks(e.sinkSnapshot(e.liveFindings))
}

// takesSnapshots reports whether a sink does anything with snapshots. A
// StatementFunc (the events file and the store) ignores them, and building
// one is not free: every 5 s it copies the last 10,000 statements and runs
// the statement rules on them (refreshLiveFindings), a few percent of an
// otherwise idle-looking watch's CPU when no exporter or web view is on.
func takesSnapshots(sinks []Sink) bool {
	for _, k := range sinks {
		if _, ok := k.(StatementFunc); !ok {
			return true
		}
	}
	return false
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
	e.snapshotSinks(snap)
}

// snapshotSinks hands a snapshot to every sink, on the main loop.
func (e *engine) snapshotSinks(snap *Snapshot) {
	for _, k := range e.opts.Sinks {
		k.Snapshot(snap)
	}
}
