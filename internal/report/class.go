package report

import (
	"encoding/json"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/gapscope/gapscope/internal/event"
)

// Bounds of a class's own state: memory grows with the number of classes,
// never with the number of statements.
const (
	// exactValues is how many latencies a class keeps for exact
	// percentiles; beyond it the sketch answers.
	exactValues = 128
	// maxValueCounts bounds the distinct databases, users, hosts and error
	// codes counted per class; the rest are counted as one "(other)".
	maxValueCounts = 32
	// HistogramBuckets are pt-query-digest's query-time buckets: 1 µs,
	// 10 µs, ... 1 s, and 10 s or more.
	HistogramBuckets = 8
)

// Extra is what a source knows about a statement beyond event.Statement: a
// slow log's client host, rows affected and query-plan fields; and the
// statement's class when the profile groups by another key than the
// digest (pt-query-digest's fingerprint).
type Extra struct {
	// ClassID and ClassText name the class; empty: the statement's digest.
	ClassID, ClassText string
	Host               string
	RowsAffected       int64
	// Plan is nil when the source has no query-plan or InnoDB fields.
	Plan *Plan
	// FillText, when set, fills the statement's SQL and digest text, which
	// a source grouping by ClassID may leave empty: the report calls it
	// for the statements it keeps as samples only.
	FillText func()
}

// Plan holds a slow log's query-plan and storage-engine fields. For one
// statement the yes/no fields are 0 or 1; for a class they are counts of
// statements and the others are sums. Waits are microseconds. The yes/no
// counters are always written; an engine counter (InnoDBIOReadOps on) is
// written, 0 included, when a statement of the class had it (Known), since
// one log writes those and another does not.
type Plan struct {
	Statements     int64 `json:"statements"` // that carried plan fields
	FullScan       int64 `json:"full_scan"`
	FullJoin       int64 `json:"full_join"`
	TmpTable       int64 `json:"tmp_table"`
	TmpTableOnDisk int64 `json:"tmp_table_on_disk"`
	Filesort       int64 `json:"filesort"`
	FilesortOnDisk int64 `json:"filesort_on_disk"`
	QCHit          int64 `json:"qc_hit"`
	TmpTables      int64 `json:"tmp_tables"`
	TmpDiskTables  int64 `json:"tmp_disk_tables"`
	MergePasses    int64 `json:"merge_passes"`
	// Percona Server's InnoDB fields.
	InnoDBIOReadOps     int64 `json:"innodb_io_r_ops,omitempty"`
	InnoDBIOReadBytes   int64 `json:"innodb_io_r_bytes,omitempty"`
	InnoDBIOReadWaitUS  int64 `json:"innodb_io_r_wait_us,omitempty"`
	InnoDBRecLockWaitUS int64 `json:"innodb_rec_lock_wait_us,omitempty"`
	InnoDBQueueWaitUS   int64 `json:"innodb_queue_wait_us,omitempty"`
	InnoDBPagesDistinct int64 `json:"innodb_pages_distinct,omitempty"`
	// MariaDB's log_slow_verbosity=engine (or innodb) fields.
	PagesAccessed   int64 `json:"pages_accessed,omitempty"`
	PagesRead       int64 `json:"pages_read,omitempty"`
	PagesPrefetched int64 `json:"pages_prefetched,omitempty"`
	PagesUpdated    int64 `json:"pages_updated,omitempty"`
	OldRowsRead     int64 `json:"old_rows_read,omitempty"`
	PagesReadTimeUS int64 `json:"pages_read_time_us,omitempty"`
	EngineTimeUS    int64 `json:"engine_time_us,omitempty"`
	// Known marks the engine counters some statement had, one bit each as
	// slowlog.Event.EngineFields marks them (slowlog.Engine*):
	// InnoDBIOReadOps 1<<0 ... EngineTimeUS 1<<10 in their order, then
	// InnoDBIOReadBytes 1<<11 and PagesPrefetched 1<<12.
	Known uint16 `json:"-"`
}

// planFields is Plan without its MarshalJSON.
type planFields Plan

// planJSON is Plan's JSON form: the engine counters through pointers, set
// when known. They shadow the embedded ones and, being Plan's last fields,
// keep their place in the output.
type planJSON struct {
	planFields
	InnoDBIOReadOps     *int64 `json:"innodb_io_r_ops,omitempty"`
	InnoDBIOReadBytes   *int64 `json:"innodb_io_r_bytes,omitempty"`
	InnoDBIOReadWaitUS  *int64 `json:"innodb_io_r_wait_us,omitempty"`
	InnoDBRecLockWaitUS *int64 `json:"innodb_rec_lock_wait_us,omitempty"`
	InnoDBQueueWaitUS   *int64 `json:"innodb_queue_wait_us,omitempty"`
	InnoDBPagesDistinct *int64 `json:"innodb_pages_distinct,omitempty"`
	PagesAccessed       *int64 `json:"pages_accessed,omitempty"`
	PagesRead           *int64 `json:"pages_read,omitempty"`
	PagesPrefetched     *int64 `json:"pages_prefetched,omitempty"`
	PagesUpdated        *int64 `json:"pages_updated,omitempty"`
	OldRowsRead         *int64 `json:"old_rows_read,omitempty"`
	PagesReadTimeUS     *int64 `json:"pages_read_time_us,omitempty"`
	EngineTimeUS        *int64 `json:"engine_time_us,omitempty"`
}

// MarshalJSON writes an engine counter when known (Known) or not 0.
func (p Plan) MarshalJSON() ([]byte, error) {
	j := planJSON{planFields: planFields(p)}
	engine := []struct {
		v   int64
		dst **int64
		bit uint16
	}{{p.InnoDBIOReadOps, &j.InnoDBIOReadOps, 1 << 0}, {p.InnoDBIOReadWaitUS, &j.InnoDBIOReadWaitUS, 1 << 1},
		{p.InnoDBRecLockWaitUS, &j.InnoDBRecLockWaitUS, 1 << 2}, {p.InnoDBQueueWaitUS, &j.InnoDBQueueWaitUS, 1 << 3},
		{p.InnoDBPagesDistinct, &j.InnoDBPagesDistinct, 1 << 4}, {p.PagesAccessed, &j.PagesAccessed, 1 << 5},
		{p.PagesRead, &j.PagesRead, 1 << 6}, {p.PagesUpdated, &j.PagesUpdated, 1 << 7}, {p.OldRowsRead, &j.OldRowsRead, 1 << 8},
		{p.PagesReadTimeUS, &j.PagesReadTimeUS, 1 << 9}, {p.EngineTimeUS, &j.EngineTimeUS, 1 << 10},
		{p.InnoDBIOReadBytes, &j.InnoDBIOReadBytes, 1 << 11}, {p.PagesPrefetched, &j.PagesPrefetched, 1 << 12}}
	for _, e := range engine {
		if e.v != 0 || p.Known&e.bit != 0 {
			*e.dst = &e.v
		}
	}
	return json.Marshal(j)
}

func (p *Plan) add(o *Plan) {
	p.Statements += o.Statements
	p.FullScan += o.FullScan
	p.FullJoin += o.FullJoin
	p.TmpTable += o.TmpTable
	p.TmpTableOnDisk += o.TmpTableOnDisk
	p.Filesort += o.Filesort
	p.FilesortOnDisk += o.FilesortOnDisk
	p.QCHit += o.QCHit
	p.TmpTables += o.TmpTables
	p.TmpDiskTables += o.TmpDiskTables
	p.MergePasses += o.MergePasses
	p.InnoDBIOReadOps += o.InnoDBIOReadOps
	p.InnoDBIOReadBytes += o.InnoDBIOReadBytes
	p.InnoDBIOReadWaitUS += o.InnoDBIOReadWaitUS
	p.InnoDBRecLockWaitUS += o.InnoDBRecLockWaitUS
	p.InnoDBQueueWaitUS += o.InnoDBQueueWaitUS
	p.InnoDBPagesDistinct += o.InnoDBPagesDistinct
	p.PagesAccessed += o.PagesAccessed
	p.PagesRead += o.PagesRead
	p.PagesPrefetched += o.PagesPrefetched
	p.PagesUpdated += o.PagesUpdated
	p.OldRowsRead += o.OldRowsRead
	p.PagesReadTimeUS += o.PagesReadTimeUS
	p.EngineTimeUS += o.EngineTimeUS
	p.Known |= o.Known
}

// attr is one attribute's running sum, minimum and maximum.
type attr struct {
	sum, min, max int64
	seen          bool
}

func (a *attr) add(v int64) {
	a.sum += v
	if !a.seen || v < a.min {
		a.min = v
	}
	a.max = max(a.max, v)
	a.seen = true
}

func (a *attr) merge(o attr) {
	if !o.seen {
		return
	}
	if !a.seen || o.min < a.min {
		a.min = o.min
	}
	a.sum += o.sum
	a.max = max(a.max, o.max)
	a.seen = true
}

// Attr is an attribute's totals over a class.
type Attr struct {
	Sum int64 `json:"sum"`
	Min int64 `json:"min"`
	Max int64 `json:"max"`
	Avg int64 `json:"avg"`
}

func (a attr) result(calls int64) Attr {
	r := Attr{Sum: a.sum, Min: a.min, Max: a.max}
	if calls > 0 {
		r.Avg = int64(math.Round(float64(a.sum) / float64(calls)))
	}
	return r
}

// valueCounts counts statements per value (database, user, host) up to
// maxValueCounts distinct values; the rest go to other. The first value
// is counted in place: most classes see one database and one user, and a
// map for that one value would cost a class more than the rest of its
// counters. The last value's counter is kept at hand: a class's
// statements mostly repeat it, and a string comparison is cheaper than a
// map lookup.
type valueCounts struct {
	first  string
	firstN int64             // 0: no value yet
	m      map[string]*int64 // the values after the first
	last   string
	lastN  *int64
	other  int64
}

func (v *valueCounts) add(s string, n int64) {
	if s == "" || n == 0 {
		return
	}
	if v.firstN == 0 {
		v.first, v.firstN = s, n
		return
	}
	if s == v.first {
		v.firstN += n
		return
	}
	if v.lastN != nil && s == v.last {
		*v.lastN += n
		return
	}
	if c, ok := v.m[s]; ok {
		*c += n
		v.last, v.lastN = s, c
		return
	}
	if 1+len(v.m) >= maxValueCounts {
		v.other += n
		return
	}
	if v.m == nil {
		v.m = map[string]*int64{}
	}
	c := new(int64)
	*c = n
	v.m[s] = c
	v.last, v.lastN = s, c
}

func (v *valueCounts) merge(o *valueCounts) {
	v.add(o.first, o.firstN)
	for _, k := range slices.Sorted(maps.Keys(o.m)) {
		v.add(k, *o.m[k])
	}
	v.other += o.other
}

// Count is one value and the statements that had it.
type Count struct {
	Value string `json:"value"`
	Count int64  `json:"count"`
}

// list returns the counts, most frequent first, "(other)" last.
func (v *valueCounts) list() []Count {
	if v.firstN == 0 && v.other == 0 {
		return nil
	}
	out := make([]Count, 0, len(v.m)+2)
	if v.firstN > 0 {
		out = append(out, Count{v.first, v.firstN})
	}
	for k, n := range v.m {
		out = append(out, Count{k, *n})
	}
	slices.SortFunc(out, func(a, b Count) int {
		if a.Count != b.Count {
			return cmpDesc(a.Count, b.Count)
		}
		return strings.Compare(a.Value, b.Value)
	})
	if v.other > 0 {
		out = append(out, Count{otherText, v.other})
	}
	return out
}

// classStats is what a class keeps beyond the profile table's totals:
// pt-query-digest's per-class report.
type classStats struct {
	minUS int64
	sumSq float64 // of latencies in µs², for the standard deviation
	exact []int64 // every latency while calls <= exactValues, else nil
	hist  [HistogramBuckets]int64
	lock  attr
	rows  attr // over the calls whose rows are known
	// rowsUnknown counts the calls whose rows the capture could not count
	// (event.Statement.RowsUnknown): left out of rows.
	rowsUnknown int64
	exam        attr
	aff         attr
	bytes       attr
	dbs         valueCounts
	users       valueCounts
	hosts       valueCounts
	errs        errorCounts
	firstUS     int64
	lastUS      int64
	sample      Sample
	plan        *Plan
	// lockWaits counts the calls that waited for a lock (a known lock
	// wait of more than 0, event.Statement.LockWaitTime); lockWaitUS sums
	// their waits.
	lockWaits, lockWaitUS int64
}

// Sample is the class's slowest statement, as pt-query-digest shows it.
type Sample struct {
	SQL     string `json:"sql"`
	DB      string `json:"db,omitempty"`
	TimeUS  int64  `json:"t,omitempty"`
	Latency int64  `json:"latency_us"`
}

func (c *classStats) add(s *event.Statement, x *Extra, us, calls int64) {
	if calls == 1 || us < c.minUS {
		c.minUS = us
	}
	c.sumSq += float64(us) * float64(us)
	c.keep(us, calls)
	c.hist[histBucket(us)]++
	c.lock.add(s.LockUS)
	if s.RowsUnknown() {
		c.rowsUnknown++
	} else {
		c.rows.add(s.Rows)
	}
	c.exam.add(s.RowsExamined)
	if w := s.LockWaitTime(); w > 0 {
		c.lockWaits++
		c.lockWaitUS += w
	}
	c.bytes.add(s.RespBytes)
	c.dbs.add(s.DB, 1)
	c.users.add(s.User, 1)
	if s.Error != nil {
		c.errs.add(s.Error.Code, 1)
	}
	if x != nil {
		c.aff.add(x.RowsAffected)
		c.hosts.add(x.Host, 1)
		c.addPlan(x.Plan)
	} else {
		c.aff.add(0)
	}
	c.seen(s, x, us, calls)
}

func (c *classStats) keep(us, calls int64) {
	switch {
	case calls <= exactValues:
		if c.exact == nil {
			c.exact = make([]int64, 0, 8)
		}
		c.exact = append(c.exact, us)
	case c.exact != nil:
		c.exact = nil // the sketch answers from here on
	}
}

func (c *classStats) addPlan(p *Plan) {
	if p == nil {
		return
	}
	if c.plan == nil {
		c.plan = &Plan{}
	}
	c.plan.add(p)
}

// seen updates first/last seen and the sample (the slowest statement; the
// first of equals).
func (c *classStats) seen(s *event.Statement, x *Extra, us, calls int64) {
	if t := s.TReqFirst; t > 0 {
		if c.firstUS == 0 || t < c.firstUS {
			c.firstUS = t
		}
		c.lastUS = max(c.lastUS, t)
	}
	if calls == 1 || us > c.sample.Latency {
		if x != nil && x.FillText != nil {
			x.FillText()
		}
		c.sample = Sample{SQL: sampleText(s), DB: s.DB, TimeUS: s.TReqFirst, Latency: us}
	}
}

// sampleText is the statement's text as the source gave it: redacted
// unless the source kept literals.
func sampleText(s *event.Statement) string {
	if s.SQL != "" {
		return s.SQL
	}
	return s.DigestText
}

func (c *classStats) merge(o *classStats, calls, oCalls int64) {
	if oCalls == 0 {
		return
	}
	if calls == 0 || o.minUS < c.minUS {
		c.minUS = o.minUS
	}
	c.sumSq += o.sumSq
	if calls+oCalls <= exactValues && (calls == 0 || c.exact != nil) && o.exact != nil {
		c.exact = append(c.exact, o.exact...)
	} else {
		c.exact = nil
	}
	for i := range c.hist {
		c.hist[i] += o.hist[i]
	}
	c.lock.merge(o.lock)
	c.rows.merge(o.rows)
	c.rowsUnknown += o.rowsUnknown
	c.exam.merge(o.exam)
	c.lockWaits += o.lockWaits
	c.lockWaitUS += o.lockWaitUS
	c.aff.merge(o.aff)
	c.bytes.merge(o.bytes)
	c.dbs.merge(&o.dbs)
	c.users.merge(&o.users)
	c.hosts.merge(&o.hosts)
	for code, n := range o.errs.m {
		c.errs.add(code, n)
	}
	c.errs.other += o.errs.other
	if o.firstUS != 0 && (c.firstUS == 0 || o.firstUS < c.firstUS) {
		c.firstUS = o.firstUS
	}
	c.lastUS = max(c.lastUS, o.lastUS)
	if calls == 0 || o.sample.Latency > c.sample.Latency {
		c.sample = o.sample
	}
	c.addPlan(o.plan)
}

// histBucket is pt-query-digest's bucket of a query time: the power of ten
// of its seconds, from 1 µs (and below) to 10 s and more.
func histBucket(us int64) int {
	b := 0
	for v := us; v >= 10 && b < HistogramBuckets-1; v /= 10 {
		b++
	}
	return b
}

// HistogramLabels name the buckets as pt-query-digest prints them.
var HistogramLabels = [HistogramBuckets]string{"1us", "10us", "100us", "1ms", "10ms", "100ms", "1s", "10s+"}

// nearestRank returns the q-quantile of sorted values by the nearest-rank
// method: the smallest value with at least q of the values at or below it.
// A one-value class gives that value for every q; two values 36 and 275
// give 275 for p95.
func nearestRank(sorted []int64, q float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(q * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// stddev is the population standard deviation of the class's latencies.
func (a *agg) stddev() int64 {
	if a.calls < 2 {
		return 0
	}
	n := float64(a.calls)
	mean := float64(a.totalUS) / n
	v := a.sumSq/n - mean*mean
	if v <= 0 {
		return 0
	}
	return int64(math.Round(math.Sqrt(v)))
}

// errorCounts counts statements per server error code, bounded like
// valueCounts.
type errorCounts struct {
	m     map[uint16]int64
	other int64
}

func (e *errorCounts) add(code uint16, n int64) {
	if c, ok := e.m[code]; ok {
		e.m[code] = c + n
		return
	}
	if len(e.m) >= maxValueCounts {
		e.other += n
		return
	}
	if e.m == nil {
		e.m = map[uint16]int64{}
	}
	e.m[code] = n
}

// ErrorCount is one server error code and the statements that got it.
type ErrorCount struct {
	Code  uint16 `json:"code"`
	Count int64  `json:"count"`
}

func (e *errorCounts) list() []ErrorCount {
	out := make([]ErrorCount, 0, len(e.m)+1)
	for _, c := range slices.Sorted(maps.Keys(e.m)) {
		out = append(out, ErrorCount{c, e.m[c]})
	}
	slices.SortStableFunc(out, func(a, b ErrorCount) int {
		if a.Count != b.Count {
			return cmpDesc(a.Count, b.Count)
		}
		return 0
	})
	if e.other > 0 {
		out = append(out, ErrorCount{0, e.other}) // code 0: the other codes together
	}
	return out
}
