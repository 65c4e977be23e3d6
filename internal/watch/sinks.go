package watch

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gapscope/gapscope/internal/capture"
	"github.com/gapscope/gapscope/internal/diagnose"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/join"
)

// Sink receives what watch sees while it runs: the events file and the
// store, the exporters (Prometheus, OpenTelemetry), the web view, the
// terminal view. Its calls are made one at a time, on the output stage's
// goroutine, so a sink needs no lock of its own for what only these calls
// touch.
//
// Takes says which of Statement, Transaction and Snapshot the sink wants;
// watch reads it when the run starts, and never makes the others
// (a sink still has them, doing nothing). Snapshots are built only when a
// sink takes them. Statement runs once per statement after the join and
// should be quick: statements that find the stage's queue full reach no
// sink. s is the sink's during the call only: its memory goes to a later
// statement once every sink had it, so a sink keeps a copy of what it
// needs. Transaction runs once per finished transaction. Snapshot runs
// when the stage starts (before the first statement), then every
// LiveEvery.
//
// Close is the last call, exactly once, after every statement and
// transaction reached the sink: final is the run's last snapshot (Final
// set: the run's findings and notes, the capture's losses), given to
// every sink whether it takes snapshots or not. What Close returns is in
// Result.CloseErrors (in Run's error when the run could not start: then
// Close is the only call, with a final snapshot that has nothing).
//
// Adding a sink is one file with a type that has these methods, and one
// line where cmd/gapscope appends it to Options.Sinks.
type Sink interface {
	Takes() Takes
	Statement(s *event.Statement)
	Transaction(t *event.Transaction)
	Snapshot(s *Snapshot)
	Close(final *Snapshot) error
}

// Takes is the set of calls a sink wants, besides Close (Sink).
type Takes uint8

const (
	TakesStatements Takes = 1 << iota
	TakesTransactions
	TakesSnapshots
)

// takesOf is what some of sinks take.
func takesOf(sinks []Sink) Takes {
	var t Takes
	for _, k := range sinks {
		t |= k.Takes()
	}
	return t
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
	// Pending are the wire statements the joiner holds, waiting for their
	// server row.
	Pending int `json:"pending"`
	// ServerOnly: no wire this run, so Worst are the server's slowest
	// statements (their client time unknown).
	ServerOnly bool `json:"server_only"`
	// Streams names the replicas' binlog streams seen ("" when none).
	Streams string `json:"replica_streams,omitempty"`
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

// StatementFunc is a sink that takes statements only: f is called for
// every statement after the join, on the output stage's goroutine.
type StatementFunc func(*event.Statement)

func (StatementFunc) Takes() Takes                   { return TakesStatements }
func (f StatementFunc) Statement(s *event.Statement) { f(s) }
func (StatementFunc) Transaction(*event.Transaction) {}
func (StatementFunc) Snapshot(*Snapshot)             {}
func (StatementFunc) Close(*Snapshot) error          { return nil }

// snapshotSource builds the sinks' snapshots from the tally and the other
// stages' counters, on the output stage's goroutine (which alone touches
// its findings). Every part it reads carries its own lock or is atomic.
type snapshotSource struct {
	tally      *tally
	txns       *txnTally
	side       *serverSide
	sample     *joinSample
	joiner     *join.Joiner
	queueDrops *atomic.Int64
	vars       map[string]string // the settings the statement rules name
	// findings are the statement rules' on the latest statements, run
	// again once liveFindingsEvery passed.
	findings   []event.Finding
	findingsAt time.Time
}

// snapshots is the run's snapshot source.
func (e *engine) snapshots() *snapshotSource {
	return &snapshotSource{tally: e.tally, txns: e.txns, side: e.side, sample: e.sample, joiner: e.joiner,
		queueDrops: &e.wire.queueDrops, vars: e.poolVars}
}

// live is the snapshot of now, with the statement rules' findings on the
// latest statements.
func (src *snapshotSource) live() *Snapshot {
	src.refreshFindings()
	return src.build(src.findings)
}

// final is the run's last snapshot, with its findings and notes and the
// capture's losses.
func (src *snapshotSource) final(res *Result) *Snapshot {
	snap := src.build(res.Findings)
	snap.Final = true
	snap.Health.PacketsDropped = res.Capture.KernelDrops
	snap.Health.Notes = res.Notes
	return snap
}

// build is the snapshot of now, with findings.
func (src *snapshotSource) build(findings []event.Finding) *Snapshot {
	v := src.tally.view(maxConnsShown)
	snap := &Snapshot{TimeUS: time.Now().UnixMicro(), Worst: v.worst, Groups: v.groups, Conns: v.conns, Findings: findings,
		Pending: src.joiner.Pending(), ServerOnly: v.serverOnly, Streams: v.streams}
	snap.Health = Health{Statements: v.total, Joined: v.joined, Unjoined: v.unjoined, QueueDrops: src.queueDrops.Load()}
	src.side.serverM.Lock()
	snap.Flavor, snap.Version = src.side.flavor, src.side.version
	snap.Health.RingLost = src.side.server.RingLost
	src.side.serverM.Unlock()
	snap.Health.CPUSeconds = ProcessCPU().Seconds()
	snap.Health.Following = followingNote(src.sample.get()) // the join sample's, as the terminal shows
	return snap
}

// maxConnsShown is how many connections a snapshot lists.
const maxConnsShown = 5

// liveFindingsEvery is how often the snapshots' findings are the
// statement rules' again, on the latest liveFindingsWindow statements:
// copying them and running the rules is most of what a snapshot costs.
const (
	liveFindingsEvery  = 5 * time.Second
	liveFindingsWindow = 10_000
)

func (src *snapshotSource) refreshFindings() {
	if time.Since(src.findingsAt) < liveFindingsEvery {
		return
	}
	src.findingsAt = time.Now()
	w := &diagnose.Window{Statements: src.tally.recent(liveFindingsWindow), Vars: src.vars}
	w.Transactions, w.TxnSeen = src.txns.recent()
	src.findings = diagnose.Run(w, diagnose.StatementRules()...)
}

// followingNote tells the live views that only a sample of the
// connections is joined.
func followingNote(s capture.Sample) string {
	if s.On() {
		return "  joining " + describeSample(s) + " (every statement counted)"
	}
	return ""
}

// describeSample names the connections a join sample holds.
func describeSample(s capture.Sample) string {
	if s.N <= 1 {
		return "every connection"
	}
	return "1 in " + strconv.Itoa(int(s.N)) + " connections"
}
