package web

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"sync"

	"github.com/gapscope/gapscope/internal/event"
)

// The page's history: every statement watch hands the view is counted in
// the 10-second step its response ended in, per (digest, user, db, pool
// group), for the last 15 minutes. The page's charts, its per-digest table
// and its filters are computed from it on request, so a filter changes
// every number on the page, not just what is listed.
const (
	stepUS   = 10_000_000          // one point of the charts
	windowUS = 15 * 60 * 1_000_000 // what the charts and the table cover
	nSteps   = windowUS / stepUS
	// maxKeys bounds the (digest, user, db, group) cells of one step; the
	// rest share an "other" digest keeping their user, db and group, and
	// past twice as many a single cell: an application sending endless
	// distinct statements must not grow watch's memory.
	maxKeys = 200
	// maxListed bounds the digests and filter choices the page gets.
	maxListed = 100
)

// otherDigest names the cell of statements past maxKeys.
const otherDigest = "(other)"

// key is one cell of a step.
type key struct {
	digest, user, db string
	group            int // -1: unknown
}

// cell sums the statements of one key in one step. Client times are
// counted for every statement with a response; the five parts only for
// joined ones (unjoined statements have none).
type cell struct {
	text     string
	calls    int64
	joined   int64
	clientUS int64
	maxUS    int64
	parts    [5]int64
	// lockUS sums the known lock waits of the joined statements (a part
	// of exec, parts[2]); lockWaits counts the statements that had one.
	lockUS    int64
	lockWaits int64
	hist      hist
}

// history is the ring of steps. Its lock is taken once per statement on
// watch's joiner goroutine, for a map lookup and a few additions.
type history struct {
	mu   sync.Mutex
	ring stepRing[key, cell]
}

func newHistory() *history { return &history{} }

// add counts one statement.
func (h *history) add(s *event.Statement) {
	if !s.HasResponse() || s.Why == event.ReplicaStream {
		return // COM_QUIT and the like, a replica's binlog stream: no latency to show
	}
	idx := s.TRespLast / stepUS
	k := key{digest: digestOf(s), user: s.User, db: s.DB, group: -1}
	if s.PoolGroup != nil {
		k.group = *s.PoolGroup
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	cells := h.ring.slot(idx)
	if cells == nil {
		return // older than the ring
	}
	c := cells[k]
	if c == nil {
		switch {
		case len(cells) >= 2*maxKeys:
			k = key{digest: otherDigest, group: -1}
		case len(cells) >= maxKeys:
			k.digest = otherDigest
		}
		if c = cells[k]; c == nil {
			c = &cell{text: textOf(s)}
			if k.digest == otherDigest {
				c.text = "statements past the page's " + strconv.Itoa(maxKeys) + " distinct digests per 10 s"
			}
			cells[k] = c
		}
	}
	c.calls++
	c.clientUS += s.ClientUS
	c.maxUS = max(c.maxUS, s.ClientUS)
	c.hist.add(s.ClientUS)
	if s.Joined {
		c.joined++
		c.parts[0] += s.RequestUS
		c.parts[1] += s.QueueUS
		c.parts[2] += s.ExecUS
		c.parts[3] += s.SendStallUS
		c.parts[4] += s.DeliveryUS
		if w := s.LockWaitTime(); w > 0 {
			c.lockUS += w
			c.lockWaits++
		}
	}
}

// digestOf keys a statement's class: gapscope's own fingerprint (the same
// joined or not), else the server's digest, else its text or command.
func digestOf(s *event.Statement) string {
	return cmp.Or(s.Fingerprint, s.Digest, s.DigestText, s.SQL, "("+s.Cmd+")")
}

func textOf(s *event.Statement) string {
	return cmp.Or(s.DigestText, s.SQL, s.Cmd)
}

// Filter selects the statements the page shows; an empty field selects all.
type Filter struct {
	Digest string `json:"digest"`
	User   string `json:"user"`
	DB     string `json:"db"`
	// Group is a pool group's number, "none" for statements without one,
	// or "" for all.
	Group string `json:"group"`
}

func (f Filter) match(k key) bool {
	if f.Digest != "" && k.digest != f.Digest || f.User != "" && k.user != f.User || f.DB != "" && k.db != f.DB {
		return false
	}
	switch f.Group {
	case "":
		return true
	case "none":
		return k.group < 0
	}
	return k.group >= 0 && strconv.Itoa(k.group) == f.Group
}

// Live is what the page draws beside the snapshot: the charts' points, the
// per-digest table and the filters' choices, for one filter.
type Live struct {
	NowUS    int64       `json:"now_us"`
	StepUS   int64       `json:"step_us"`
	WindowUS int64       `json:"window_us"`
	Filter   Filter      `json:"filter"`
	Series   []Point     `json:"series"`
	Digests  []DigestRow `json:"digests"`
	Options  Options     `json:"options"`
	// Transactions are the window's transactions for the filter's user
	// and db (nil when the view takes none, or none ended in the window).
	Transactions *TxnLive `json:"transactions,omitempty"`
}

// Point is one step of the charts. Parts are the mean of each part over
// the step's joined statements (request, queue, exec, send stall,
// delivery), so stacked they make the mean client time of those;
// LockWaitUS is the mean lock wait over the same statements, a part of
// the exec part.
type Point struct {
	TimeUS     int64    `json:"t"`
	Calls      int64    `json:"calls"`
	Joined     int64    `json:"joined"`
	P50US      int64    `json:"p50_us"`
	P99US      int64    `json:"p99_us"`
	MaxUS      int64    `json:"max_us"`
	Parts      [5]int64 `json:"parts_us"`
	LockWaitUS int64    `json:"lock_wait_us"`
}

// DigestRow is one digest over the window. Parts are the sums of each part
// over its joined statements (their shares are what the page shows);
// LockWaitUS sums their known lock waits (a part of exec), LockWaits
// counts the statements that had one.
type DigestRow struct {
	Digest  string   `json:"digest"`
	Text    string   `json:"text"`
	Calls   int64    `json:"calls"`
	Joined  int64    `json:"joined"`
	P50US   int64    `json:"p50_us"`
	P95US   int64    `json:"p95_us"`
	P99US   int64    `json:"p99_us"`
	MaxUS   int64    `json:"max_us"`
	TotalUS int64    `json:"total_us"`
	Parts   [5]int64 `json:"parts_us"`
	// LockWaitUS and LockWaits: see above.
	LockWaitUS int64 `json:"lock_wait_us"`
	LockWaits  int64 `json:"lock_waits"`
}

// Options are the values the filters offer, over the window.
type Options struct {
	Digests []Choice `json:"digests"`
	Users   []string `json:"users"`
	DBs     []string `json:"dbs"`
	Groups  []int    `json:"groups"`
	// NoGroup: some statements carry no pool group.
	NoGroup bool `json:"no_group"`
}

// Choice is a digest the digest filter offers.
type Choice struct {
	Digest string `json:"digest"`
	Text   string `json:"text"`
}

// live computes the page's history for f over the window that ends at
// nowUS.
func (h *history) live(f Filter, nowUS int64) *Live {
	out := &Live{NowUS: nowUS, StepUS: stepUS, WindowUS: windowUS, Filter: f}
	last := nowUS / stepUS
	first := last - nSteps + 1
	type digestAcc struct {
		row  DigestRow
		hist dense
	}
	digests := map[string]*digestAcc{}
	users, dbs, groups := map[string]bool{}, map[string]bool{}, map[int]bool{}
	optTotal := map[string]*Choice{}
	optTime := map[string]int64{}
	h.mu.Lock()
	defer h.mu.Unlock()
	for idx := first; idx <= last; idx++ {
		p := Point{TimeUS: idx * stepUS}
		cells, ok := h.ring.step(idx)
		if !ok {
			out.Series = append(out.Series, p)
			continue
		}
		var d dense
		for k, c := range cells {
			users[k.user], dbs[k.db] = true, true
			if k.group >= 0 {
				groups[k.group] = true
			} else {
				out.Options.NoGroup = true
			}
			if optTotal[k.digest] == nil {
				optTotal[k.digest] = &Choice{Digest: k.digest, Text: c.text}
			}
			optTime[k.digest] += c.clientUS
			if !f.match(k) {
				continue
			}
			p.Calls += c.calls
			p.Joined += c.joined
			p.MaxUS = max(p.MaxUS, c.maxUS)
			for i := range p.Parts {
				p.Parts[i] += c.parts[i]
			}
			p.LockWaitUS += c.lockUS
			d.merge(&c.hist)
			a := digests[k.digest]
			if a == nil {
				a = &digestAcc{row: DigestRow{Digest: k.digest, Text: c.text}}
				digests[k.digest] = a
			}
			a.row.Calls += c.calls
			a.row.Joined += c.joined
			a.row.TotalUS += c.clientUS
			a.row.MaxUS = max(a.row.MaxUS, c.maxUS)
			for i := range a.row.Parts {
				a.row.Parts[i] += c.parts[i]
			}
			a.row.LockWaitUS += c.lockUS
			a.row.LockWaits += c.lockWaits
			a.hist.merge(&c.hist)
		}
		if p.Calls > 0 {
			p.P50US = min(d.quantile(0.50), p.MaxUS)
			p.P99US = min(d.quantile(0.99), p.MaxUS)
		}
		if p.Joined > 0 {
			for i := range p.Parts {
				p.Parts[i] /= p.Joined
			}
			p.LockWaitUS = min(p.LockWaitUS/p.Joined, p.Parts[2])
		}
		out.Series = append(out.Series, p)
	}
	for _, a := range digests {
		r := a.row
		r.P50US = min(a.hist.quantile(0.50), r.MaxUS)
		r.P95US = min(a.hist.quantile(0.95), r.MaxUS)
		r.P99US = min(a.hist.quantile(0.99), r.MaxUS)
		out.Digests = append(out.Digests, r)
	}
	slices.SortFunc(out.Digests, func(a, b DigestRow) int {
		return cmp.Or(cmp.Compare(b.TotalUS, a.TotalUS), cmp.Compare(a.Digest, b.Digest))
	})
	out.Digests = out.Digests[:min(len(out.Digests), maxListed)]
	for _, c := range optTotal {
		out.Options.Digests = append(out.Options.Digests, *c)
	}
	slices.SortFunc(out.Options.Digests, func(a, b Choice) int {
		return cmp.Or(cmp.Compare(optTime[b.Digest], optTime[a.Digest]), cmp.Compare(a.Digest, b.Digest))
	})
	out.Options.Digests = out.Options.Digests[:min(len(out.Options.Digests), maxListed)]
	out.Options.Users = sortedKeys(users)
	out.Options.DBs = sortedKeys(dbs)
	for g := range groups {
		out.Options.Groups = append(out.Options.Groups, g)
	}
	slices.Sort(out.Options.Groups)
	return out
}

// sortedKeys lists the non-empty keys of m, bounded by maxListed.
func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		if k != "" {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out[:min(len(out), maxListed)]
}

// A hist counts client times in log buckets: four per power of two, so a
// quantile read from it is within 12.5% of the true value (and never above
// the largest time seen, which the callers clamp to). It keeps only the
// buckets it uses, as (bucket, count) pairs: a cell holds one digest's
// calls of 10 s, whose times spread over a few buckets.
type hist struct {
	b []bucketCount
}

type bucketCount struct {
	idx   uint16
	count uint32
}

// nBuckets covers every int64: 64 powers of two, four buckets each.
const nBuckets = 64 * 4

// bucketOf maps a time to its bucket: for v in [2^e, 2^(e+1)) with e >= 2,
// bucket 4e + the next two bits; below 4 µs a bucket per value.
func bucketOf(us int64) int {
	if us < 4 {
		return int(max(us, 0))
	}
	e := bits.Len64(uint64(us)) - 1
	return 4*e + int(uint64(us)>>(e-2)&3)
}

// bucketMid is a representative time of bucket i (its midpoint).
func bucketMid(i int) int64 {
	if i < 4 {
		return int64(i)
	}
	e, sub := i/4, int64(i%4)
	lo := int64(1)<<e + sub<<(e-2)
	if e < 3 {
		return lo // one value per bucket
	}
	return lo + int64(1)<<(e-3)
}

func (h *hist) add(us int64) {
	i := uint16(bucketOf(us))
	for j := range h.b {
		if h.b[j].idx == i {
			h.b[j].count++
			return
		}
	}
	h.b = append(h.b, bucketCount{idx: i, count: 1})
}

// dense is a histogram merged from cells, for reading quantiles.
type dense struct {
	n      int64
	counts [nBuckets]int64
}

func (d *dense) merge(h *hist) {
	for _, b := range h.b {
		d.counts[b.idx] += int64(b.count)
		d.n += int64(b.count)
	}
}

// quantile returns the time at or below which a share q of the counted
// times fall (0 when none were counted).
func (d *dense) quantile(q float64) int64 {
	if d.n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(d.n))) // nearest rank
	rank = min(max(rank, 1), d.n)
	var seen int64
	for i, c := range d.counts {
		seen += c
		if seen >= rank {
			return bucketMid(i)
		}
	}
	return 0
}
