package watch

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/report"
	"github.com/gapscope/gapscope/internal/txn"
)

// GroupSummary is the time of one thread-pool group's statements: the view
// that shows "slow connections are always slow" (the thread-pool case).
type GroupSummary struct {
	Group      int   `json:"group"`
	Statements int64 `json:"statements"`
	ClientUS   int64 `json:"client_us"`
	QueueUS    int64 `json:"queue_us"`
	MaxQueueUS int64 `json:"max_queue_us"`
}

// tally is where every finished statement arrives, joined or not, exactly
// once (add): the profile, the diagnosis window, the live view's tallies
// and the coverage, under its lock; then the output stage, which hands it
// to the run's sinks on its own goroutine. The joiner calls add from
// whichever goroutine fed it, with its own lock held: add does in-memory
// work only.
type tally struct {
	mu      sync.Mutex
	profile *report.Profile
	window  *stmtRing // the last windowSize statements
	groups  map[int]*GroupSummary
	worst   []event.Statement // slowest recent statements for the live view
	out     *outputQueue      // to the run's sinks; its own lock
	// unseen ranks, by the server's time, the statements whose client was
	// not on the captured wire (unix sockets...): beside the wire's
	// profile, never mixed into its client latencies. Made on first use.
	unseen *report.Profile
	total  int64
	joined int64
	conns  map[string]*ConnSummary
	cov    coverageTally
	// serverOnly: no wire, so the slowest statements are the server's
	// slowest (client time is unknown).
	serverOnly bool
	// ledger attributes lock waits and builds transactions (locks.go),
	// shared with the wire stage: its own lock.
	ledger *txn.Ledger
	// then is deliver as a value, made once (a method value made at each
	// call would allocate).
	then func(*event.Statement)
	// lost is what watch knows of a waited statement's missing row
	// (lostRows), for decideReason.
	lost        func(*event.Statement) event.Reason
	outlierMiss string
	// streams are the replicas' binlog streams seen (not statements), the
	// first maxStreamConns of them by connection.
	streams     int64
	streamConns []string
}

// maxStreamConns bounds the replicas' connections the tally names.
const maxStreamConns = 8

// ConnSummary is one connection's time, for the live view's per-connection
// block.
type ConnSummary struct {
	Conn       string
	ConnID     uint64
	Statements int64
	ClientUS   int64
	QueueUS    int64
	StallUS    int64
}

// maxConnSummaries bounds the per-connection tallies (10k connections fit).
const maxConnSummaries = 20_000

// tallyOptions shape the tally.
type tallyOptions struct {
	windowSize int  // the statements the diagnosis reads
	serverOnly bool // no wire: the profile ranks by the server's time
	// outlierMiss is the note of an outlier that stayed unjoined: why its
	// thread could not hold its row, given the consumers at the start.
	outlierMiss string
}

// newTally makes the tally: what it counts goes on to out, after ledger
// attributed its lock wait; lost is what watch knows of a waited
// statement's missing row (decideReason).
func newTally(o tallyOptions, out *outputQueue, ledger *txn.Ledger, lost func(*event.Statement) event.Reason) *tally {
	profile := report.NewProfile(report.ProfileOptions{Metric: report.ClientLatency})
	if o.serverOnly {
		profile = serverOnlyProfile()
	}
	k := &tally{
		profile:     profile,
		serverOnly:  o.serverOnly,
		outlierMiss: o.outlierMiss,
		window:      newStmtRing(o.windowSize),
		groups:      map[int]*GroupSummary{},
		conns:       map[string]*ConnSummary{},
		out:         out,
		ledger:      ledger,
		lost:        lost,
	}
	k.then = k.deliver
	return k
}

// fromJoin is the joiner's output, on whichever goroutine fed it. An
// outlier the join gave up without its row gets the note that says why
// watch's read of its thread did not find it; its reason is decided in
// add (lost knows what the joiner cannot).
func (k *tally) fromJoin(s *event.Statement) {
	if s.Outlier && s.Why.Kind() == event.KindUnjoined {
		s.Notes = append(s.Notes, k.outlierMiss)
	}
	k.add(s)
}

func (k *tally) add(s *event.Statement) {
	if !s.Joined {
		s.Why = decideReason(s, k.lost) // one reason, the same in the event, its notes and the counts
	}
	// Its lock wait before anything counts or writes it: a statement the
	// ledger holds for a release the wire has yet to show comes back
	// through deliver later.
	k.ledger.Finished(s, true, k.then)
}

// deliver counts s and hands it on.
func (k *tally) deliver(s *event.Statement) {
	k.account(s)
	k.out.put(s) // the statement's last owner: the output stage, or no one
}

// account adds s to watch's own tallies.
func (k *tally) account(s *event.Statement) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if s.Why == event.ReplicaStream {
		k.accountStream(s)
		return
	}
	if s.Why.ServerOnly() && !k.serverOnly {
		k.accountUnseen(s)
		return
	}
	k.total++
	k.cov.add(s)
	if s.Joined {
		k.joined++
	}
	k.profile.Add(s)
	k.window.add(s)
	k.addGroup(s)
	k.addConn(s)
	k.addWorst(s)
}

// accountUnseen counts a server statement the wire did not carry: in its
// own profile (by server time) and the coverage, and in the diagnosis
// window, whose server-side rules judge it too.
func (k *tally) accountUnseen(s *event.Statement) {
	if k.unseen == nil {
		k.unseen = report.NewProfile(report.ProfileOptions{Metric: report.ServerLatency,
			MetricLabel: NotOnWireMetric, Unknown: wireUnknown})
	}
	k.unseen.Add(s)
	k.cov.addUnseen(s)
	k.window.add(s)
}

// accountStream counts a replica's binlog stream: reported, and counted
// by its reason in the coverage (seen = joined + unjoined holds), but no
// statement: kept out of the profile, the slowest statements, the
// connections' and pool groups' times and the diagnosis window.
func (k *tally) accountStream(s *event.Statement) {
	k.total++
	k.cov.add(s)
	k.streams++
	if len(k.streamConns) < maxStreamConns {
		k.streamConns = append(k.streamConns, streamConn(s))
	}
}

// streamConn names a replica's connection: its address, or (server-only)
// its connection id.
func streamConn(s *event.Statement) string {
	if s.Conn != "" {
		return s.Conn
	}
	return fmt.Sprintf("connection %d", s.ConnID)
}

// streamsNote names the replicas' binlog streams seen ("" when none).
func (k *tally) streamsNote() string {
	if k.streams == 0 {
		return ""
	}
	n := report.StreamsNote(k.streams) + ": " + strings.Join(k.streamConns, ", ")
	if more := k.streams - int64(len(k.streamConns)); more > 0 {
		n += fmt.Sprintf(" and %d more", more)
	}
	return n
}

// NotOnWireMetric names the ranking of the statements the wire did not carry.
const NotOnWireMetric = "server time (performance_schema) of statements not on the captured wire"

func (k *tally) addGroup(s *event.Statement) {
	if s.PoolGroup == nil || !s.Joined {
		return
	}
	g := k.groups[*s.PoolGroup]
	if g == nil {
		g = &GroupSummary{Group: *s.PoolGroup}
		k.groups[*s.PoolGroup] = g
	}
	g.Statements++
	g.ClientUS += s.ClientUS
	g.QueueUS += s.QueueUS
	g.MaxQueueUS = max(g.MaxQueueUS, s.QueueUS)
}

func (k *tally) addConn(s *event.Statement) {
	c := k.conns[s.Conn]
	if c == nil {
		if len(k.conns) >= maxConnSummaries {
			return
		}
		c = &ConnSummary{Conn: s.Conn, ConnID: s.ConnID}
		k.conns[s.Conn] = c
	}
	c.Statements++
	c.ClientUS += s.ClientUS
	c.QueueUS += s.QueueUS
	c.StallUS += s.SendStallUS
}

// topConns returns the n connections that lost the most time to waiting
// (queue + stall), then to client time.
func (k *tally) topConns(n int) []ConnSummary {
	out := make([]ConnSummary, 0, len(k.conns))
	for _, c := range k.conns {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b ConnSummary) int {
		return cmp.Or(cmp.Compare(b.QueueUS+b.StallUS, a.QueueUS+a.StallUS), cmp.Compare(b.ClientUS, a.ClientUS))
	})
	return out[:min(n, len(out))]
}

// recent returns up to n of the latest statements.
func (k *tally) recent(n int) []event.Statement {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.window.last(n)
}

// worstKeep is how many slow statements the live view remembers.
const worstKeep = 10

// addWorst copies s only when it ranks among the slowest: most statements
// do not, and a copy of every one would cost more than the ranking.
func (k *tally) addWorst(s *event.Statement) {
	if len(k.worst) == worstKeep && k.slowness(s) <= k.slowness(&k.worst[len(k.worst)-1]) {
		return
	}
	k.worst = append(k.worst, *s)
	slices.SortFunc(k.worst, func(a, b event.Statement) int { return cmp.Compare(k.slowness(&b), k.slowness(&a)) })
	if len(k.worst) > worstKeep {
		k.worst = k.worst[:worstKeep]
	}
}

// slowness is what ranks the slowest statements: the client's time, or
// the server's without the wire.
func (k *tally) slowness(s *event.Statement) int64 {
	if k.serverOnly {
		return s.ServerUS
	}
	return s.ClientUS
}

// snapshot returns the window in arrival order and the group summaries.
func (k *tally) snapshot() ([]event.Statement, []GroupSummary) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.window.last(k.window.len()), k.groupList()
}

func (k *tally) groupList() []GroupSummary {
	out := make([]GroupSummary, 0, len(k.groups))
	for _, g := range k.groups {
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b GroupSummary) int { return cmp.Compare(a.Group, b.Group) })
	return out
}

// tallyView is what the live views show of the tally at one instant.
type tallyView struct {
	worst         []event.Statement
	groups        []GroupSummary
	conns         []ConnSummary // the top n (topConns)
	total, joined int64
	unjoined      map[string]int64
	serverOnly    bool
	streams       string
}

// view copies what the live views show, with the n connections that lost
// most time waiting.
func (k *tally) view(n int) tallyView {
	k.mu.Lock()
	defer k.mu.Unlock()
	return tallyView{worst: append([]event.Statement(nil), k.worst...), groups: k.groupList(), conns: k.topConns(n),
		total: k.total, joined: k.joined, unjoined: k.cov.unjoinedByReason(), serverOnly: k.serverOnly, streams: k.streamsNote()}
}

// finalProfile closes the run's profiles: the replicas' streams join
// notes, and every note the profile; what the wire did not carry is
// ranked apart (nil when it carried everything).
func (k *tally) finalProfile(notes *noteList) (profile, notOnWire *report.ProfileResult) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if n := k.streamsNote(); n != "" {
		notes.add("%s", n)
	}
	for _, n := range notes.all() {
		k.profile.AddNote(n)
	}
	if k.unseen != nil {
		notOnWire = k.unseen.Result()
	}
	return k.profile.Result(), notOnWire
}

// coverage is the run's Coverage as far as the tally counts it: what
// reached it, joined or not, and what the wire did not carry.
func (k *tally) coverage() Coverage {
	k.mu.Lock()
	defer k.mu.Unlock()
	t := &k.cov
	c := Coverage{Seen: t.seen, Joined: t.joined, JoinedBySource: maps.Clone(t.bySource), Unjoined: t.unjoinedByReason(),
		Outliers: t.outliers, OutliersJoined: t.outliersJoined, NotOnWireBy: t.unseen.Map(), NotOnWireUS: t.unseenUS}
	for _, n := range c.NotOnWireBy {
		c.NotOnWire += n
	}
	return c
}
