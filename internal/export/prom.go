// Package export hands what watch measures to the engines people already
// run: Prometheus (a /metrics handler) and OpenTelemetry (OTLP traces and
// metrics). It is the only package that imports their SDKs. Both are
// watch Sinks: they see every statement after the join and every live
// snapshot.
package export

import (
	"cmp"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/sqltext"
	"github.com/gapscope/gapscope/internal/watch"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// OtherDigest is the digest label of every statement whose digest is not
// among the top K by client time.
const OtherDigest = "other"

// DefaultTopDigests is how many digests keep their own series.
const DefaultTopDigests = 100

// durationBuckets are the classic buckets of the client-time histogram,
// 100 µs to 10 s: a point lookup on a local server is around 100 µs, and
// past 10 s the exact time matters less than that it is that slow.
var durationBuckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// idleBuckets are the buckets of the transactions' time in the
// application, 1 ms to 60 s: a healthy application sends its next
// statement within milliseconds, one that works or waits on something else
// inside its transaction takes seconds, and past a minute what matters is
// that it is that long.
var idleBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// LockKinds are the lock kinds of gapscope_lock_wait_seconds_total, whose
// series exist from the start; a lock wait of another or no known kind
// counts under LockKindUnknown.
var LockKinds = [3]string{event.LockRow, event.LockMetadata, event.LockTable}

// LockKindUnknown is the kind label of a lock wait whose kind is unknown.
const LockKindUnknown = "unknown"

// TxnEnds are the end labels of gapscope_transactions_total, whose series
// exist from the start; another value counts under "unknown".
var TxnEnds = [4]string{event.TxnEndCommit.String(), event.TxnEndRollback.String(), event.TxnEndImplicit.String(), event.TxnEndOpen.String()}

// LockKind is the kind label of s's lock wait: one of LockKinds, else
// LockKindUnknown.
func LockKind(s *event.Statement) string {
	if s.LockWait != nil && s.BlockedBy != nil {
		for _, k := range LockKinds {
			if s.BlockedBy.Kind == k {
				return k
			}
		}
	}
	return LockKindUnknown
}

// Phases names the five parts of a statement's client time, in the order
// they happen, as metric labels and span names.
var Phases = [5]string{"request", "queue", "exec", "send_stall", "delivery"}

// PhaseUS returns the five parts of s in the order of Phases.
func PhaseUS(s *event.Statement) [5]int64 {
	return [5]int64{s.RequestUS, s.QueueUS, s.ExecUS, s.SendStallUS, s.DeliveryUS}
}

// maxDigestText cuts the text of gapscope_digest_info: a label is not the
// place for a whole statement.
const maxDigestText = 200

// Prometheus is a watch Sink that keeps gapscope's metrics and serves them.
type Prometheus struct {
	reg      *prometheus.Registry
	duration *prometheus.HistogramVec
	phase    *prometheus.CounterVec
	joined   *prometheus.CounterVec
	info     *prometheus.GaugeVec
	findings *prometheus.CounterVec
	active   *prometheus.GaugeVec
	health   *healthCollector
	// lockWait and lockWaits count lock wait by kind (LockKinds, then
	// LockKindUnknown); txnIdle and txns the finished transactions.
	lockWait  *prometheus.CounterVec
	lockWaits *prometheus.CounterVec
	lockSec   [len(LockKinds)]prometheus.Counter
	lockN     [len(LockKinds)]prometheus.Counter
	txnIdle   prometheus.Histogram
	txns      *prometheus.CounterVec
	txnEnd    [len(TxnEnds)]prometheus.Counter

	mu      sync.Mutex
	top     int
	digests map[string]*digestState
	// tops counts the digests of digests that have their own series: a
	// new digest asks it, and an application naming an alias per call
	// makes every statement a new digest.
	tops int
	// bar is the least client time among the digests that had series at
	// the last ranking. A digest passing twice the bar takes its series at
	// once rather than at the next snapshot, so that a heavy digest first
	// seen after the slots filled (with one-off digests, say) is on
	// /metrics from that statement on, not counted in "other" until it
	// recurs after a snapshot. Twice, so that digests of like weight
	// around the K-th do not take and lose series statement by statement.
	bar   int64
	other *digestState
	// raised are the finding codes present in the last snapshot: a code
	// counts in gapscope_findings_total when it appears, not on every
	// snapshot that repeats it.
	raised map[string]bool
}

// digestState is one digest's series and its rank.
type digestState struct {
	name     string
	clientUS int64 // ranks digests: top K by client time keep series
	top      bool
	hists    map[labelPair]prometheus.Observer
	phase    [5]prometheus.Counter
	joined   prometheus.Counter
	// info is the label set of its gapscope_digest_info series.
	info [3]string
}

type labelPair struct{ schema, command string }

// NewPrometheus returns the exporter keeping the top topDigests digests'
// own series (DefaultTopDigests for 0 or less).
func NewPrometheus(topDigests int) *Prometheus {
	if topDigests <= 0 {
		topDigests = DefaultTopDigests
	}
	p := &Prometheus{reg: prometheus.NewRegistry(), top: topDigests, digests: map[string]*digestState{}, raised: map[string]bool{}}
	p.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "gapscope_statement_duration_seconds",
		Help: "Client-seen time of each statement, from the request's first byte to the response's last, as captured on the wire.",
		// Classic buckets for every Prometheus; native-histogram settings
		// for servers that scrape them (a server without the feature
		// ignores them).
		Buckets:                         durationBuckets,
		NativeHistogramBucketFactor:     1.1,
		NativeHistogramMaxBucketNumber:  160,
		NativeHistogramMinResetDuration: time.Hour,
	}, []string{"digest", "schema", "command"})
	p.phase = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gapscope_statement_phase_seconds_total",
		Help: "Seconds joined statements spent in each part of their client time (request, queue, exec, send_stall, delivery).",
	}, []string{"digest", "phase"})
	p.joined = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gapscope_statements_joined_total",
		Help: "Statements joined with their performance_schema row, whose phases gapscope_statement_phase_seconds_total counts.",
	}, []string{"digest"})
	p.info = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gapscope_digest_info",
		Help: "1 for each digest with its own series: the server's DIGEST (to join with mysqld_exporter) and the digest text, cut.",
	}, []string{"digest", "server_digest", "digest_text"})
	p.findings = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gapscope_findings_total",
		Help: "Times a finding was raised by the live diagnosis (counted when it appears, not while it stays).",
	}, []string{"code"})
	p.active = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "gapscope_finding_active",
		Help: "1 while the live diagnosis reports the finding.",
	}, []string{"code", "severity"})
	p.health = &healthCollector{}
	p.other = p.newDigest(OtherDigest)
	p.other.top = true
	p.newTxnMetrics()
	p.reg.MustRegister(p.duration, p.phase, p.joined, p.info, p.findings, p.active, p.health,
		p.lockWait, p.lockWaits, p.txnIdle, p.txns)
	return p
}

// newTxnMetrics creates the lock wait and transaction metrics, with a
// zero series for every known kind and end from the start (a rate over a
// series that appears only at its first event misses that event).
func (p *Prometheus) newTxnMetrics() {
	p.lockWait = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gapscope_lock_wait_seconds_total",
		Help: "Seconds statements spent waiting for a lock another connection held (part of their exec time), by lock kind (row, metadata, table; unknown without a known blocker).",
	}, []string{"kind"})
	p.lockWaits = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gapscope_lock_waits_total",
		Help: "Statements that waited for a lock another connection held, by lock kind (divide gapscope_lock_wait_seconds_total's rate by its rate for the mean wait).",
	}, []string{"kind"})
	for i, k := range LockKinds {
		p.lockSec[i], p.lockN[i] = p.lockWait.WithLabelValues(k), p.lockWaits.WithLabelValues(k)
	}
	p.txnIdle = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:                            "gapscope_transaction_idle_seconds",
		Help:                            "Time each finished transaction sat open in its application: the sum of the gaps between a response and the application's next request inside it.",
		Buckets:                         idleBuckets,
		NativeHistogramBucketFactor:     1.1,
		NativeHistogramMaxBucketNumber:  160,
		NativeHistogramMinResetDuration: time.Hour,
	})
	p.txns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "gapscope_transactions_total",
		Help: "Finished transactions, by how they ended (commit, rollback, implicit, open: still open when the connection closed or watch stopped).",
	}, []string{"end"})
	for i, e := range TxnEnds {
		p.txnEnd[i] = p.txns.WithLabelValues(e)
	}
}

// Handler serves the registry in the Prometheus exposition formats.
func (p *Prometheus) Handler() http.Handler {
	return promhttp.HandlerFor(p.reg, promhttp.HandlerOpts{Registry: p.reg})
}

// Registry is the exporter's registry (for tests and embedding).
func (p *Prometheus) Registry() *prometheus.Registry { return p.reg }

// Fingerprint is the digest label of s: gapscope's own digest of the wire
// text, the same whether it joined or not; commands without text group by
// command, as in the profile.
func Fingerprint(s *event.Statement) string {
	if s.Fingerprint != "" {
		return s.Fingerprint
	}
	return sqltext.Digest(cmp.Or(s.DigestText, "("+s.Cmd+")"))
}

var _ watch.Sink = (*Prometheus)(nil)

// Takes is part of watch.Sink: Prometheus counts statements and
// transactions, and re-ranks its digests at each snapshot.
func (p *Prometheus) Takes() watch.Takes {
	return watch.TakesStatements | watch.TakesTransactions | watch.TakesSnapshots
}

// Close is part of watch.Sink: /metrics keeps serving the run's final
// counts for as long as the server serves it (--http-linger).
func (p *Prometheus) Close(final *watch.Snapshot) error {
	p.Snapshot(final)
	return nil
}

// Statement counts one statement (a watch.Sink method).
func (p *Prometheus) Statement(s *event.Statement) {
	if lw := s.LockWaitTime(); lw > 0 {
		p.countLockWait(s, lw)
	}
	if !s.HasResponse() || s.Why == event.ReplicaStream {
		return // no client time: COM_QUIT and the like, a server-only statement; a replica's binlog stream is no statement
	}
	name := Fingerprint(s)
	p.mu.Lock()
	defer p.mu.Unlock()
	d := p.digests[name]
	if d == nil {
		d = p.track(name, s.ClientUS)
	} else {
		d.clientUS += s.ClientUS
	}
	if !d.top && d.clientUS > 2*p.bar {
		p.promote(d)
	}
	if !d.top {
		d = p.other
	}
	p.observe(d, s)
}

// countLockWait adds s's lock wait of lw µs to its kind's series.
func (p *Prometheus) countLockWait(s *event.Statement, lw int64) {
	sec, n := p.lockWait, p.lockWaits
	if i := slices.Index(LockKinds[:], LockKind(s)); i >= 0 {
		p.lockSec[i].Add(float64(lw) / 1e6)
		p.lockN[i].Inc()
		return
	}
	// unknown: rare, and its series appear at its first wait
	sec.WithLabelValues(LockKindUnknown).Add(float64(lw) / 1e6)
	n.WithLabelValues(LockKindUnknown).Inc()
}

// Transaction counts one finished transaction (watch calls it for each
// transaction when it ends, or is still open at a connection's close or
// the run's end).
func (p *Prometheus) Transaction(t *event.Transaction) {
	p.txnIdle.Observe(float64(max(t.InAppUS, 0)) / 1e6)
	i := slices.Index(TxnEnds[:], t.EndKind)
	if i < 0 {
		p.txns.WithLabelValues("unknown").Inc()
		return
	}
	p.txnEnd[i].Inc()
}

// track starts ranking a digest of clientUS so far; it gets its own
// series at once while fewer than top digests have them.
func (p *Prometheus) track(name string, clientUS int64) *digestState {
	if len(p.digests) >= p.maxTracked() {
		p.forgetSmallest()
	}
	d := p.newDigest(name)
	d.clientUS = clientUS
	p.digests[name] = d
	if p.tops < p.top {
		d.top = true
		p.tops++
		if p.tops == p.top {
			p.bar = p.leastKept()
		}
	}
	return d
}

// slack is how many digests may take series between two rankings beyond
// the top K, by passing the bar; one more ranks at once.
func (p *Prometheus) slack() int { return max(p.top/4, 1) }

// promote gives d its series now; past the slack the digests are ranked
// again, which takes the series of the smallest away.
func (p *Prometheus) promote(d *digestState) {
	d.top = true
	p.tops++
	if p.tops > p.top+p.slack() {
		p.rerank()
	}
}

// leastKept is the least client time among the digests with series.
func (p *Prometheus) leastKept() int64 {
	least := int64(-1)
	for _, d := range p.digests {
		if d.top && (least < 0 || d.clientUS < least) {
			least = d.clientUS
		}
	}
	return max(least, 0)
}

// maxTracked bounds the digests ranked (with or without series): an
// application generating endless distinct statements must not grow
// watch's memory without end.
func (p *Prometheus) maxTracked() int { return max(10*p.top, 1000) }

// forgetSmallest drops the half of the untracked-series digests with the
// least client time, so that forgetting happens rarely.
func (p *Prometheus) forgetSmallest() {
	var rest []*digestState
	for _, d := range p.digests {
		if !d.top {
			rest = append(rest, d)
		}
	}
	slices.SortFunc(rest, func(a, b *digestState) int { return cmp.Compare(a.clientUS, b.clientUS) })
	for _, d := range rest[:len(rest)/2+1] {
		delete(p.digests, d.name)
	}
}

func (p *Prometheus) newDigest(name string) *digestState {
	d := &digestState{name: name, hists: map[labelPair]prometheus.Observer{}}
	return d
}

// observe adds s to d's series, creating them on first use (series are
// looked up once per digest, schema and command, not per statement).
func (p *Prometheus) observe(d *digestState, s *event.Statement) {
	lp := labelPair{s.DB, s.Cmd}
	h := d.hists[lp]
	if h == nil {
		h = p.duration.WithLabelValues(d.name, s.DB, s.Cmd)
		d.hists[lp] = h
	}
	h.Observe(float64(s.ClientUS) / 1e6)
	if d != p.other {
		p.setInfo(d, s)
	}
	if !s.Joined {
		return
	}
	if d.joined == nil {
		d.joined = p.joined.WithLabelValues(d.name)
		for i, ph := range Phases {
			d.phase[i] = p.phase.WithLabelValues(d.name, ph)
		}
	}
	d.joined.Inc()
	for i, us := range PhaseUS(s) {
		d.phase[i].Add(float64(us) / 1e6)
	}
}

// setInfo keeps d's info series: its text from the first statement, the
// server's digest from the first joined one.
func (p *Prometheus) setInfo(d *digestState, s *event.Statement) {
	server := ""
	if s.Joined {
		server = s.Digest
	}
	if d.info[0] != "" && (server == "" || server == d.info[1]) {
		return
	}
	if d.info[0] != "" {
		p.info.DeleteLabelValues(d.info[:]...)
	}
	text := cmp.Or(d.info[2], sqltext.Clip(cmp.Or(s.DigestText, "("+s.Cmd+")"), maxDigestText))
	d.info = [3]string{d.name, cmp.Or(server, d.info[1]), text}
	p.info.WithLabelValues(d.info[:]...).Set(1)
}

// Snapshot re-ranks the digests and takes watch's health and findings (a
// watch.Sink method).
func (p *Prometheus) Snapshot(s *watch.Snapshot) {
	p.health.set(s.Health)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rerank()
	p.countFindings(s.Findings)
}

// rerank gives the top K digests by client time their own series; a
// digest that falls out loses its series (deleted, so that Prometheus
// marks them stale) and counts in "other" from then on.
func (p *Prometheus) rerank() {
	all := make([]*digestState, 0, len(p.digests))
	for _, d := range p.digests {
		all = append(all, d)
	}
	slices.SortFunc(all, func(a, b *digestState) int {
		return cmp.Or(cmp.Compare(b.clientUS, a.clientUS), cmp.Compare(a.name, b.name))
	})
	for i, d := range all {
		switch keep := i < p.top; {
		case keep && !d.top:
			d.top = true
			p.tops++
		case !keep && d.top:
			p.evict(d)
		}
	}
	p.bar = 0
	if len(all) >= p.top {
		p.bar = all[p.top-1].clientUS
	}
}

func (p *Prometheus) evict(d *digestState) {
	labels := prometheus.Labels{"digest": d.name}
	p.duration.DeletePartialMatch(labels)
	p.phase.DeletePartialMatch(labels)
	p.joined.DeletePartialMatch(labels)
	p.info.DeletePartialMatch(labels)
	p.tops--
	d.top, d.hists, d.joined, d.phase, d.info = false, map[labelPair]prometheus.Observer{}, nil, [5]prometheus.Counter{}, [3]string{}
}

func (p *Prometheus) countFindings(fs []event.Finding) {
	now := map[string]bool{}
	p.active.Reset()
	for _, f := range fs {
		now[f.Code] = true
		p.active.WithLabelValues(f.Code, string(f.Severity)).Set(1)
		if !p.raised[f.Code] {
			p.findings.WithLabelValues(f.Code).Inc()
		}
	}
	p.raised = now
}
