// Package report turns statement events and findings into what people and
// programs read: a per-digest profile (text and JSON), JSON-lines event
// files, a terminal progress line, and findings as text.
package report

import (
	"container/heap"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/DataDog/sketches-go/ddsketch"
	"github.com/DataDog/sketches-go/ddsketch/mapping"
	"github.com/DataDog/sketches-go/ddsketch/store"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/sqltext"
)

// Metric selects the duration a profile ranks statements by.
type Metric int

const (
	// ClientLatency is the wire time, first request byte to last response
	// byte (Statement.ClientUS).
	ClientLatency Metric = iota
	// ServerLatency is the server's own time (Statement.ServerUS), as in a
	// slow log.
	ServerLatency
)

func (m Metric) String() string {
	if m == ServerLatency {
		return "server"
	}
	return "client"
}

// Bounds of a profile's memory (see budget.go): a kept digest row, its
// exact latencies up to exactValues and, past them, its sketch (at most
// sketchBins bins a store); a few MB for connection and folded-digest
// hashes, whatever the number of distinct digests or connections seen.
const (
	DefaultMaxDigests = 10_000
	maxNotes          = 50
	// maxConnections bounds the connection hashes kept to count distinct
	// connections (16 bytes each); beyond it the count is a lower bound.
	maxConnections = 1 << 17
	maxFolded      = 100_000 // distinct digest hashes counted in "(other)"
	// maxTextAliases bounds the digest texts indexed per row (texts that
	// normalise to one digest); further ones are found by digesting.
	maxTextAliases = 4
	// sketchAccuracy is DDSketch's relative accuracy: every quantile is
	// within 1% of the true value at its rank.
	sketchAccuracy = 0.01
	// sketchBins bounds a sketch; with 1% accuracy 2048 bins span 1 µs to
	// beyond 10^17 µs, so nothing real collapses.
	sketchBins = 2048
	otherText  = "(other)"
)

// ProfileOptions configures a Profile.
type ProfileOptions struct {
	Metric Metric
	// MaxDigests bounds the digests with a row of their own
	// (DefaultMaxDigests if 0); statements of further digests are folded
	// into one "(other)" row, and a digest whose time beyond the budget
	// surely exceeds the smallest row's is promoted in its place
	// (budget.go).
	MaxDigests int
	// MetricLabel, when set, names the ranking in the heading instead of
	// "<metric> latency": where the times come from, when that matters
	// (the server's own timer, without the wire).
	MetricLabel string
	// Unknown names the parts of a statement's time the input cannot
	// show (without the wire: queue, delivery, the client's time), so
	// that they read as unknown, not as zero.
	Unknown []string
}

// Profile aggregates statements per digest with mergeable quantile sketches.
// It is not safe for concurrent use.
type Profile struct {
	opts    ProfileOptions
	digests map[string]*agg
	// byText and byCmd find the row of statements without a digest
	// (without text) without building its key: Add allocates nothing for
	// a known digest.
	byText    map[string]*agg
	byCmd     map[string]*agg
	other     *agg
	folded    map[uint64]struct{} // hashes of digests folded into other, up to a bound
	kept      keptHeap            // the rows, to find the smallest
	cand      *spaceSaving        // digests beyond the budget, by weight
	promoted  int64               // digests given a row after some of their statements went to other
	stmts     int64
	byCommand commandCounts
	conns     map[uint64]struct{}
	connsFull bool
	firstUS   int64
	lastUS    int64
	notes     noteSet
	// streams counts replicas' binlog streams: not statements, kept out
	// of every figure, said in a note.
	streams int64
}

// NewProfile returns an empty profile.
func NewProfile(opts ProfileOptions) *Profile {
	if opts.MaxDigests <= 0 {
		opts.MaxDigests = DefaultMaxDigests
	}
	return &Profile{
		opts:    opts,
		digests: map[string]*agg{},
		byText:  map[string]*agg{},
		byCmd:   map[string]*agg{},
		folded:  map[uint64]struct{}{},
		cand:    newSpaceSaving(opts.MaxDigests),
		conns:   map[uint64]struct{}{},
	}
}

// Add counts one statement. The profile keeps nothing of s but shared
// strings (its user, database and, for the slowest of its class, its text).
func (p *Profile) Add(s *event.Statement) { p.AddExtra(s, nil) }

// AddExtra is Add with what the source knows beyond the statement (x may be
// nil); x.ClassID, when set, is the statement's class instead of its digest.
func (p *Profile) AddExtra(s *event.Statement, x *Extra) {
	if s.Why == event.ReplicaStream {
		p.streams++
		return
	}
	p.stmts++
	p.byCommand.add(s.Cmd, 1)
	p.addConn(s)
	p.addSpan(s)
	for n := range s.AllNotes() { // the reason's and the rows' sentences too, as written
		p.notes.count(n)
	}
	a := p.classFor(s, x)
	a.add(s, p.latency(s))
	a.classStats.add(s, x, p.latency(s), a.calls)
}

// classFor is the statement's row: its digest's, or x's class.
func (p *Profile) classFor(s *event.Statement, x *Extra) *agg {
	if x == nil || x.ClassID == "" {
		return p.aggFor(s)
	}
	if a := p.digests[x.ClassID]; a != nil {
		return a
	}
	if a := p.rowFor(x.ClassID, x.ClassText, p.latency(s)+1); a != nil {
		return a
	}
	return p.otherRow()
}

// otherRow is the "(other)" row, created on first use.
func (p *Profile) otherRow() *agg {
	if p.other == nil {
		p.other = newAgg("", otherText)
	}
	return p.other
}

// rowFor returns a new row for digest, which has none: while the budget
// allows, or when the weight counted for it beyond the budget (w more
// now) surely exceeds the smallest row's, which it then replaces. nil:
// the statement goes to "(other)".
func (p *Profile) rowFor(digest, text string, w int64) *agg {
	if len(p.digests) < p.opts.MaxDigests {
		return p.newRow(digest, text)
	}
	h := maphash.String(digestSeed, digest)
	sure := p.cand.add(h, w)
	least, leastW := p.kept.min()
	if least == nil || sure <= leastW {
		p.fold(h)
		return nil
	}
	p.cand.remove(h)
	p.evict(least)
	p.promoted++
	a := p.newRow(digest, text)
	// As in space-saving, the row keeps the weight it earned in "(other)"
	// for the budget (not for the report): otherwise every promoted row
	// would be the smallest and the next newcomer would replace it.
	a.credit = sure - w
	return a
}

func (p *Profile) newRow(digest, text string) *agg {
	a := newAgg(digest, text)
	p.digests[digest] = a
	heap.Push(&p.kept, keptEntry{a: a, w: a.weight()})
	return a
}

// evict folds row a into "(other)" and makes it a candidate again, with
// the weight it had.
func (p *Profile) evict(a *agg) {
	heap.Remove(&p.kept, a.heapIdx)
	delete(p.digests, a.digest)
	for _, t := range a.textKeys {
		delete(p.byText, t)
	}
	if a.cmdKey != "" {
		delete(p.byCmd, a.cmdKey)
	}
	// Sketches of one mapping always merge: the error cannot happen.
	_ = p.otherRow().merge(a)
	h := maphash.String(digestSeed, a.digest)
	p.cand.add(h, a.weight())
	p.fold(h)
}

// fold counts digest hash h among the digests in "(other)".
func (p *Profile) fold(h uint64) {
	if len(p.folded) < maxFolded {
		p.folded[h] = struct{}{}
	}
}

// AddNote records a note about the whole profile (a dropped packet count, a
// degraded mode). Notes are deduplicated and bounded.
func (p *Profile) AddNote(n string) { p.notes.add(n, false) }

func (p *Profile) latency(s *event.Statement) int64 {
	v := s.ClientUS
	if p.opts.Metric == ServerLatency {
		v = s.ServerUS
	}
	return max(v, 0)
}

// connSeed hashes connection identities; one per process (read only), so
// that profiles built in the same process merge.
var connSeed = maphash.MakeSeed()

// addConn remembers a hash of the connection's identity: its address pair
// when captured, its id when read from a slow log.
func (p *Profile) addConn(s *event.Statement) {
	if p.connsFull {
		return
	}
	var h uint64
	switch {
	case s.Conn != "":
		h = maphash.String(connSeed, s.Conn)
	case s.ConnID != 0:
		h = maphash.Comparable(connSeed, s.ConnID)
	default:
		return
	}
	p.conns[h] = struct{}{}
	p.checkConns()
}

func (p *Profile) checkConns() {
	if len(p.conns) >= maxConnections && !p.connsFull {
		p.connsFull = true
		p.AddNote(fmt.Sprintf("at least %d distinct connections: the connection count is a lower bound", maxConnections))
	}
}

func (p *Profile) addSpan(s *event.Statement) {
	start := s.TReqFirst
	if start <= 0 {
		return
	}
	end := max(s.TRespLast, start+p.latency(s))
	if p.firstUS == 0 || start < p.firstUS {
		p.firstUS = start
	}
	p.lastUS = max(p.lastUS, end)
}

// aggFor finds or creates the statement's digest row; beyond MaxDigests
// new digests go to the "(other)" row unless promoted (rowFor).
func (p *Profile) aggFor(s *event.Statement) *agg {
	var a *agg
	switch {
	case s.Digest != "":
		a = p.digests[s.Digest]
	case s.DigestText != "":
		a = p.byText[s.DigestText]
	default:
		a = p.byCmd[s.Cmd]
	}
	if a != nil {
		return a
	}
	digest, text := digestOf(s)
	a = p.digests[digest]
	if a == nil {
		a = p.rowFor(digest, text, p.latency(s)+1)
	}
	if a != nil {
		p.remember(s, a)
		return a
	}
	return p.otherRow()
}

// remember indexes a row for statements that carry no digest; the row
// keeps its keys so that evict can drop them.
func (p *Profile) remember(s *event.Statement, a *agg) {
	switch {
	case s.Digest != "":
	case s.DigestText != "":
		if len(a.textKeys) < maxTextAliases {
			p.byText[s.DigestText] = a
			a.textKeys = append(a.textKeys, s.DigestText)
		}
	default:
		p.byCmd[s.Cmd] = a
		a.cmdKey = s.Cmd
	}
}

// digestOf returns the statement's digest and text. Commands without SQL
// (COM_PING, an execute whose PREPARE was not seen) group by command.
func digestOf(s *event.Statement) (digest, text string) {
	text = s.DigestText
	if text == "" {
		text = "(" + s.Cmd + ")"
	}
	if s.Digest != "" {
		return s.Digest, text
	}
	return sqltext.Digest(text), text
}

// agg is one digest's running totals.
type agg struct {
	digest, text string
	calls        int64
	totalUS      int64
	maxUS        int64
	sketch       *ddsketch.DDSketch
	positive     store.Store // the sketch's store of values > 0, see addToSketch
	errors       int64
	zeroWindowUS int64
	joined       int64
	parts        Parts
	classStats
	// heapIdx is the row's place in Profile.kept; textKeys and cmdKey its
	// keys in byText and byCmd.
	heapIdx  int
	textKeys []string
	cmdKey   string
	credit   int64 // weight counted in "(other)" before the row was promoted
}

func newAgg(digest, text string) *agg { return &agg{digest: digest, text: text} }

// sketchMapping is every sketch's index mapping (it is read only, so the
// rows share one).
var sketchMapping = sync.OnceValue(func() mapping.IndexMapping {
	m, err := mapping.NewLogarithmicMapping(sketchAccuracy)
	if err != nil {
		panic(fmt.Sprintf("ddsketch with constant parameters: %v", err)) // unreachable: constants are valid
	}
	return m
})

// ensureSketch gives the row its sketch, filled with the latencies it kept
// exactly. A row has one only beyond exactValues calls: below, every
// latency is kept (classStats.exact) and the quantiles are exact, so a
// sketch would only cost its stores (most rows of a profile of many
// digests see a few calls).
func (a *agg) ensureSketch() {
	if a.sketch != nil {
		return
	}
	// As ddsketch.LogCollapsingLowestDenseDDSketch builds it, keeping the
	// positive store for addToSketch.
	pos := store.NewCollapsingLowestDenseStore(sketchBins)
	a.sketch = ddsketch.NewDDSketch(sketchMapping(), pos, store.NewCollapsingLowestDenseStore(sketchBins))
	a.positive = pos
	for _, us := range a.exact {
		a.addToSketch(us)
	}
}

// smallIndexes is the sketch's bin index of each latency below its length
// (µs): most statements take less, and the sketch would take a logarithm
// for every one.
var smallIndexes = sync.OnceValue(func() []int32 {
	m, err := mapping.NewLogarithmicMapping(sketchAccuracy)
	if err != nil {
		panic(fmt.Sprintf("ddsketch with constant parameters: %v", err)) // unreachable: constants are valid
	}
	t := make([]int32, 1<<14)
	for us := 1; us < len(t); us++ {
		t[us] = int32(m.Index(float64(us)))
	}
	return t
})

// addToSketch adds us as sketch.Add does: a positive value goes to the
// positive store at its bin index (looked up when small), 0 is counted
// apart.
func (a *agg) addToSketch(us int64) {
	if t := smallIndexes(); us > 0 && us < int64(len(t)) {
		a.positive.Add(int(t[us]))
		return
	}
	// Add fails only for negative or NaN values; us is clamped to >= 0.
	_ = a.sketch.Add(float64(us))
}

func (a *agg) add(s *event.Statement, us int64) {
	a.calls++
	a.totalUS += us
	a.maxUS = max(a.maxUS, us)
	if a.calls > exactValues { // classStats.keep has kept the others, and lets them go now
		a.ensureSketch()
		a.addToSketch(us)
	}
	if s.Error != nil {
		a.errors++
	}
	a.zeroWindowUS += s.ZeroWindowUS
	if s.Joined {
		a.joined++
		a.parts.Add(s.Parts)
	}
}

func (a *agg) merge(o *agg) error {
	var err error
	if a.calls+o.calls > exactValues { // beyond what is kept exactly (classStats.merge)
		a.ensureSketch()
		if o.sketch != nil {
			err = a.sketch.MergeWith(o.sketch)
		}
		for _, us := range o.exact {
			a.addToSketch(us)
		}
	}
	a.classStats.merge(&o.classStats, a.calls, o.calls)
	a.calls += o.calls
	a.totalUS += o.totalUS
	a.maxUS = max(a.maxUS, o.maxUS)
	a.errors += o.errors
	a.zeroWindowUS += o.zeroWindowUS
	a.joined += o.joined
	a.parts.Add(o.parts)
	return err
}

// quantile returns the q-quantile in whole microseconds: exact (nearest
// rank) while the class has kept every value, else from the sketch, never
// above the exact maximum (the sketch may overshoot it by up to 1%).
func (a *agg) quantile(q float64) int64 {
	if a.exact != nil {
		return nearestRank(a.sortedExact(), q)
	}
	if a.sketch == nil {
		return 0 // no statement
	}
	v, err := a.sketch.GetValueAtQuantile(q)
	if err != nil {
		return 0 // empty sketch
	}
	return min(int64(math.Round(v)), a.maxUS)
}

// Parts are totals, in microseconds, of the decomposition of joined
// statements' client time (docs/events.md); they sum to ClientUS.
type Parts = event.Parts

// noteKind is how a statement's note is counted in the profile: numbers,
// which differ per statement ("server start moved -157 us ..."), become N,
// so notes of one kind are counted together. Each statement keeps its own
// exact note in --events.
func noteKind(n string) string {
	if !hasDigit(n) {
		return n // the common case: no copy
	}
	var b strings.Builder
	inNum := false
	for _, r := range n {
		if isDigit(r) || (inNum && r == '.') {
			if !inNum {
				b.WriteByte('N')
				inNum = true
			}
			continue
		}
		inNum = false
		b.WriteRune(r)
	}
	return b.String()
}

func isDigit(r rune) bool { return r >= '0' && r <= '9' }

func hasDigit(n string) bool {
	for i := 0; i < len(n); i++ {
		if n[i] >= '0' && n[i] <= '9' {
			return true
		}
	}
	return false
}

// noteSet keeps distinct notes in first-seen order with how many statements
// carried each (profile notes count none); beyond maxNotes it only counts.
type noteSet struct {
	order   []string
	stmts   map[string]*int64
	dropped int64
	// recent holds the counters of the notes counted last. A statement's
	// notes are nearly always the same few constant strings, long ones,
	// and comparing a string with itself stops at its pointer, where a map
	// lookup hashes every byte of it.
	recent     [recentNotes]recentNote
	recentNext int
}

type recentNote struct {
	note string
	c    *int64
}

// recentNotes is how many counters noteSet.count looks at before the map.
const recentNotes = 4

func (s *noteSet) add(n string, perStatement bool) {
	var k int64
	if perStatement {
		k = 1
	}
	s.addN(n, k)
}

// count records a statement's note under its kind (noteKind). A note with
// no number in it is its own kind: when seen before, one map lookup
// counts it, without scanning it (every statement's notes pass here; the
// scan was a visible share of watch's CPU: docs/performance.md, "The
// joiner's CPU").
func (s *noteSet) count(n string) {
	for i := range s.recent {
		if r := &s.recent[i]; r.c != nil && r.note == n {
			*r.c++
			return
		}
	}
	if c := s.stmts[n]; c != nil {
		*c++
		s.recent[s.recentNext] = recentNote{note: n, c: c}
		s.recentNext = (s.recentNext + 1) % recentNotes
		return
	}
	s.addN(noteKind(n), 1)
}

// addN records note n, carried by k more statements.
func (s *noteSet) addN(n string, k int64) {
	if s.stmts == nil {
		s.stmts = map[string]*int64{}
	}
	if c := s.stmts[n]; c != nil {
		*c += k // one map lookup for a note seen before: the common case
		return
	}
	if len(s.order) >= maxNotes {
		s.dropped += max(k, 1)
		return
	}
	s.order = append(s.order, n)
	c := new(int64)
	*c = k
	s.stmts[n] = c
}

func (s *noteSet) list() []string {
	out := make([]string, 0, len(s.order)+1)
	for _, n := range s.order {
		switch k := *s.stmts[n]; k {
		case 0:
		case 1:
			n += " (1 statement)"
		default:
			n = fmt.Sprintf("%s (%d statements)", n, k)
		}
		out = append(out, n)
	}
	if s.dropped > 0 {
		out = append(out, fmt.Sprintf("%d more notes beyond the first %d distinct not shown", s.dropped, maxNotes))
	}
	return out
}

// UnknownRespBytes, in ProfileOptions.Unknown, prints the bytes column as
// unknown.
const UnknownRespBytes = "response bytes"

// ProfileResult is a profile's outcome, digests ranked by total time.
type ProfileResult struct {
	Metric      string `json:"metric"`
	MetricLabel string `json:"metric_label,omitempty"`
	// Unknown: ProfileOptions.Unknown, the parts of the time not measured.
	Unknown     []string         `json:"unknown,omitempty"`
	Statements  int64            `json:"statements"`
	ByCommand   map[string]int64 `json:"by_command"`
	Connections int64            `json:"connections"`
	FirstUS     int64            `json:"first_us,omitempty"`
	LastUS      int64            `json:"last_us,omitempty"`
	TotalUS     int64            `json:"total_us"`
	Joined      int64            `json:"joined"`
	// Classes counts every digest row, also those a --limit left out of
	// Digests.
	Classes int64       `json:"classes"`
	Digests []DigestRow `json:"digests"`
	Notes   []string    `json:"notes"`
}

// DigestRow is one digest's (or class's) aggregate. Quantiles are exact
// (nearest rank) while a class has at most 128 calls, beyond that from a
// DDSketch with 1% relative accuracy; Parts is present when some calls were
// joined.
type DigestRow struct {
	Digest     string `json:"digest"`
	DigestText string `json:"digest_text"`
	Calls      int64  `json:"calls"`
	TotalUS    int64  `json:"total_us"`
	MinUS      int64  `json:"min_us"`
	AvgUS      int64  `json:"avg_us"`
	StddevUS   int64  `json:"stddev_us"`
	P50US      int64  `json:"p50_us"`
	P95US      int64  `json:"p95_us"`
	P99US      int64  `json:"p99_us"`
	MaxUS      int64  `json:"max_us"`
	Rows       int64  `json:"rows"`
	// RowsUnknown counts the calls whose rows the header-only capture could
	// not count (their answer was cut and no server row gave the count):
	// Rows, RowsSent and Attributes.RowsSent are over the other calls.
	RowsUnknown  int64 `json:"rows_unknown"`
	RespBytes    int64 `json:"resp_bytes"`
	Errors       int64 `json:"errors"`
	ZeroWindowUS int64 `json:"zero_window_us"`
	SlowLogTotals
	// LockWaitUS sums the lock waits of the class's calls that waited for
	// a lock (event.Statement.LockWait: a slow log's InnoDB_rec_lock_wait,
	// a wait watch attributed); LockWaits counts those calls. Both 0, and
	// left out of JSON, when no call had one: the source may not know
	// lock waits at all.
	LockWaitUS   int64 `json:"lock_wait_us,omitempty"`
	LockWaits    int64 `json:"lock_waits,omitempty"`
	RowsSent     int64 `json:"rows_sent"`
	RowsAffected int64 `json:"rows_affected"`
	BytesSent    int64 `json:"bytes_sent"`
	// Histogram counts calls per pt-query-digest query-time bucket
	// (HistogramLabels).
	Histogram    [HistogramBuckets]int64 `json:"histogram"`
	Attributes   ClassAttrs              `json:"attributes"`
	Databases    []Count                 `json:"databases,omitempty"`
	Users        []Count                 `json:"users,omitempty"`
	Hosts        []Count                 `json:"hosts,omitempty"`
	ErrorsByCode []ErrorCount            `json:"errors_by_code,omitempty"`
	FirstSeenUS  int64                   `json:"first_seen_us,omitempty"`
	LastSeenUS   int64                   `json:"last_seen_us,omitempty"`
	Sample       *Sample                 `json:"sample,omitempty"`
	Plan         *Plan                   `json:"plan,omitempty"`
	Joined       int64                   `json:"joined"`
	Parts        *Parts                  `json:"parts,omitempty"`
}

// ClassAttrs are the per-call attributes' sum, min, max and average.
type ClassAttrs struct {
	LockUS       Attr `json:"lock_us"`
	RowsSent     Attr `json:"rows_sent"`
	RowsExamined Attr `json:"rows_examined"`
	RowsAffected Attr `json:"rows_affected"`
	BytesSent    Attr `json:"bytes_sent"`
}

// SlowLogTotals are a digest's totals that only the server knows: set
// (0 included) when the times are the server's (a slow log, server-only
// watch), nil for wire data, which cannot know them, so JSON leaves them
// out rather than write an unknown as 0. Embedded in DigestRow, so the
// fields read as d.LockUS and sit inline in JSON.
type SlowLogTotals struct {
	LockUS       *int64 `json:"lock_us,omitempty"`
	RowsExamined *int64 `json:"rows_examined,omitempty"`
}

// Known returns the totals, 0 for unknown ones.
func (t SlowLogTotals) Known() (lockUS, rowsExamined int64) {
	if t.LockUS != nil {
		lockUS = *t.LockUS
	}
	if t.RowsExamined != nil {
		rowsExamined = *t.RowsExamined
	}
	return lockUS, rowsExamined
}

// Result summarises the profile. It may be called repeatedly (a live view)
// and keeps adding working afterwards.
func (p *Profile) Result() *ProfileResult {
	r := &ProfileResult{
		Metric:      p.opts.Metric.String(),
		MetricLabel: p.opts.MetricLabel,
		Unknown:     slices.Clone(p.opts.Unknown),
		Statements:  p.stmts,
		ByCommand:   p.byCommand.asMap(),
		Connections: int64(len(p.conns)),
		FirstUS:     p.firstUS,
		LastUS:      p.lastUS,
		Digests:     make([]DigestRow, 0, len(p.digests)+1),
	}
	for _, a := range p.digests {
		r.Digests = append(r.Digests, a.row())
	}
	slices.SortFunc(r.Digests, byTotal)
	if p.other != nil {
		r.Digests = append(r.Digests, p.other.row())
	}
	for i := range r.Digests {
		d := &r.Digests[i]
		r.TotalUS += d.TotalUS
		r.Joined += d.Joined
		if p.opts.Metric == ServerLatency { // the server's fields: known
			lock, exam := d.Attributes.LockUS.Sum, d.Attributes.RowsExamined.Sum
			d.SlowLogTotals = SlowLogTotals{LockUS: &lock, RowsExamined: &exam}
		}
	}
	r.Classes = int64(len(r.Digests))
	r.Notes = p.notes.list()
	if p.streams > 0 {
		r.Notes = append(r.Notes, StreamsNote(p.streams))
	}
	if p.other != nil {
		r.Notes = append(r.Notes, fmt.Sprintf("%s: %d statements of %s digests beyond the %d-digest limit",
			otherText, p.other.calls, foldedCount(len(p.folded)), p.opts.MaxDigests))
	}
	if p.promoted > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("%d digests got a row of their own when their time outgrew the smallest row's; their statements before that are in %s",
			p.promoted, otherText))
	}
	return r
}

func foldedCount(n int) string {
	if n >= maxFolded {
		return fmt.Sprintf("at least %d", n)
	}
	return fmt.Sprint(n)
}

// byTotal orders by total time, then calls, then digest: deterministic.
func byTotal(a, b DigestRow) int {
	switch {
	case a.TotalUS != b.TotalUS:
		return cmpDesc(a.TotalUS, b.TotalUS)
	case a.Calls != b.Calls:
		return cmpDesc(a.Calls, b.Calls)
	}
	return strings.Compare(a.Digest, b.Digest)
}

func cmpDesc(a, b int64) int {
	if a > b {
		return -1
	}
	return 1
}

func (a *agg) row() DigestRow {
	r := DigestRow{
		Digest: a.digest, DigestText: a.text, Calls: a.calls, TotalUS: a.totalUS,
		MinUS: a.minUS, AvgUS: a.avg(), StddevUS: a.stddev(),
		P50US: a.quantile(0.50), P95US: a.quantile(0.95), P99US: a.quantile(0.99), MaxUS: a.maxUS,
		Rows: a.rows.sum, RowsUnknown: a.rowsUnknown, RespBytes: a.bytes.sum, Errors: a.errors, ZeroWindowUS: a.zeroWindowUS,
		RowsSent: a.rows.sum, RowsAffected: a.aff.sum, BytesSent: a.bytes.sum,
		Histogram: a.hist, Attributes: a.attrs(),
		Databases: a.dbs.list(), Users: a.users.list(), Hosts: a.hosts.list(), ErrorsByCode: a.errs.list(),
		FirstSeenUS: a.firstUS, LastSeenUS: a.lastUS, Joined: a.joined,
		LockWaitUS: a.lockWaitUS, LockWaits: a.lockWaits,
	}
	if len(r.ErrorsByCode) == 0 {
		r.ErrorsByCode = nil
	}
	if a.calls > 0 {
		sample := a.sample
		r.Sample = &sample
	}
	if a.plan != nil {
		plan := *a.plan
		r.Plan = &plan
	}
	if a.joined > 0 {
		parts := a.parts
		r.Parts = &parts
	}
	return r
}

func (a *agg) avg() int64 {
	if a.calls == 0 {
		return 0
	}
	return int64(math.Round(float64(a.totalUS) / float64(a.calls)))
}

func (a *agg) attrs() ClassAttrs {
	return ClassAttrs{
		LockUS: a.lock.result(a.calls), RowsSent: a.rows.result(a.calls - a.rowsUnknown), RowsExamined: a.exam.result(a.calls),
		RowsAffected: a.aff.result(a.calls), BytesSent: a.bytes.result(a.calls),
	}
}

// sortedExact returns the kept latencies sorted (a copy: Result may be
// called while statements are still added).
func (a *agg) sortedExact() []int64 {
	v := slices.Clone(a.exact)
	slices.Sort(v)
	return v
}

// commandCounts counts statements by command name. A statement's command
// is one of a few dozen names, so a short slice scanned in order (the
// common ones come first) beats a map, whose hashing and assignment were a
// visible share of watch's CPU per statement.
type commandCounts struct {
	names  []string
	counts []int64
}

func (c *commandCounts) add(name string, n int64) {
	for i, have := range c.names {
		if have == name {
			c.counts[i] += n
			return
		}
	}
	c.names = append(c.names, name)
	c.counts = append(c.counts, n)
}

func (c *commandCounts) asMap() map[string]int64 {
	m := make(map[string]int64, len(c.names))
	for i, name := range c.names {
		m[name] += c.counts[i]
	}
	return m
}

// StreamsNote says that n replicas' binlog streams were seen and left out
// of the figures (event.ReplicaStream).
func StreamsNote(n int64) string {
	return fmt.Sprintf("%s (COM_BINLOG_DUMP): the server streams the binlog to a replica for as long as it stays connected; not a statement, left out of the statements, latencies and percentiles",
		CountNoun(n, "replica binlog stream", "replica binlog streams"))
}

// CountNoun is "1 thing" or "n things".
func CountNoun(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
