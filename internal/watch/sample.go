package watch

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gapscope/gapscope/internal/capture"
	"github.com/gapscope/gapscope/internal/collect"
)

// joinSample is the join sample and the CPU budget that sets it: the
// connections whose fast statements are joined, those whose client port
// the capture.Sample follows. One owner, the poller: it learns the
// connections (learn, from the processlist), lets the budget's governor
// change the sample (govern), and drops the rows of the connections left
// out (keep, skipped). Everyone else reads the sample through get alone:
// the loop hands the statements of connections left out on unjoined
// (joins), the live view and the web page say what it follows. Every
// connection is captured whatever the sample.
//
// Which connection is which comes from the processlist (HOST ip:port),
// re-read every second; a connection opened since is not known to be out,
// so its statements are read until then, and dropped here if it turns out
// unsampled.
type joinSample struct {
	// Under mu: what get, and the poller's reads of the rows, consult.
	mu   sync.Mutex
	s    capture.Sample  // a CPU budget changes it (set)
	in   map[uint64]bool // connections known to be sampled
	out  map[uint64]bool // connections known not to be sampled
	list []uint64        // out, sorted; rebuilt when out changed
	// closed: connections out that the processlist no longer lists, by
	// when that was first seen.
	closed map[uint64]time.Time
	made   bool
	// leftOut: connections whose rows a read left out or dropped, by when
	// (µs) one last did. A statement of one of them that began before then
	// and was given up without its row lost it to the sample, even when a
	// later cut (another pivot, another share) holds its connection again.
	leftOut map[uint64]int64

	// The poller's alone (its goroutine; before it starts, build; after it
	// ended, the result).
	policy samplePolicy // the CPU budget's governor, or noBudget
	own    *ownAddrs
	// hosts is the last processlist read: HOST by id; appPorts the client
	// ports of the application's connections on the wire (not watch's
	// own) in it: what the governor's estimates count, for every sample it
	// weighs.
	hosts    map[uint64]string
	appPorts []uint16
	// pivotHost is the connection a budgeted sample is keyed on
	// (choosePivot), pivotKey its key.
	pivotHost string
	pivotKey  uint32
	// readAt is when a sampled poll last re-read the processlist.
	readAt time.Time
}

// newJoinSample is the join sample s (a fixed --sample, or all), changed
// by policy as the run goes (a CPU budget's governor; noBudget keeps it).
func newJoinSample(s capture.Sample, policy samplePolicy, own *ownAddrs) *joinSample {
	return &joinSample{s: capture.Sample{N: max(s.N, 1), Key: s.Key}, policy: policy, own: own,
		in: map[uint64]bool{}, out: map[uint64]bool{}, closed: map[uint64]time.Time{}, leftOut: map[uint64]int64{}}
}

// on reports whether sampling is on (connections left out).
func (c *joinSample) on() bool { return c.get().On() }

func (c *joinSample) get() capture.Sample {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.s
}

// set follows the sample s from now on. Which connections are in or out is not
// known until the next replace (a processlist read): until then every row
// is kept, as for a connection just opened.
func (c *joinSample) set(s capture.Sample) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.s = capture.Sample{N: max(s.N, 1), Key: s.Key, Paused: s.Paused}
	c.in, c.out, c.made = map[uint64]bool{}, map[uint64]bool{}, false
	c.closed = map[uint64]time.Time{}
}

// sampledHost reports whether a processlist HOST (ip:port) is in sample s.
func sampledHost(host string, s capture.Sample) bool {
	port, ok := hostPort(host)
	return ok && s.Follows(port)
}

// hostPort is the client port of a processlist HOST or a wire address
// (ip:port, [v6]:port), parsed by hand: the join sample asks it of every
// statement.
func hostPort(host string) (uint16, bool) {
	i := strings.LastIndexByte(host, ':')
	if i < 0 || i == len(host)-1 || len(host)-i > 6 {
		return 0, false
	}
	var port uint32
	for _, c := range []byte(host[i+1:]) {
		if c < '0' || c > '9' {
			return 0, false
		}
		port = port*10 + uint32(c-'0')
	}
	return uint16(port), port <= 0xffff
}

// replace takes a processlist read (ids by HOST): the connections it lists
// that are not sampled are out from now on. Connections without a port
// (sockets) are never on the wire: out too. A connection out that has
// closed stays out for closedGrace: its last statements can still be in
// the history the next reads cover, and must not come back as rows of a
// connection nobody knows.
func (c *joinSample) replace(hosts map[uint64]string) { c.replaceAt(hosts, time.Now()) }

func (c *joinSample) replaceAt(hosts map[uint64]string, now time.Time) {
	n := c.get()
	if !n.On() {
		return
	}
	in, out := map[uint64]bool{}, map[uint64]bool{}
	for id, host := range hosts {
		if sampledHost(host, n) {
			in[id] = true
		} else {
			out[id] = true
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.s != n {
		return // a set came in between: the next read classifies
	}
	for id := range c.out {
		if _, open := hosts[id]; !open {
			if _, ok := c.closed[id]; !ok {
				c.closed[id] = now
			}
		}
	}
	for id, at := range c.closed {
		if now.Sub(at) > closedGrace {
			delete(c.closed, id)
		} else {
			out[id] = true
		}
	}
	c.in, c.out, c.made = in, out, false
	c.forgetLeftOut(now.Add(-leftOutMemory).UnixMicro())
}

// leftOutMemory is how long leftOut remembers a connection: longer than
// any statement waits for its row (the joiner's MaxWait, 5 s by default)
// before it is given up.
const leftOutMemory = time.Minute

// forgetLeftOut forgets the connections last left out before cutoff (µs);
// under mu.
func (c *joinSample) forgetLeftOut(cutoff int64) {
	for id, at := range c.leftOut {
		if at < cutoff {
			delete(c.leftOut, id)
		}
	}
}

// lostToSample reports whether a read left out, or dropped, the rows of
// connection id at or after fromUS: a statement of it that began then and
// was given up without its row lost that row to the sample.
func (c *joinSample) lostToSample(id uint64, fromUS int64) bool {
	if id == 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.leftOut[id]
	return ok && at >= fromUS
}

// closedGrace is how long a closed connection stays out of a sample:
// reads cover the history since the last read (plus a slack of
// milliseconds), so after this its rows are behind every read.
const closedGrace = 10 * time.Second

// skipped returns the connections whose statements the server need not
// send (nil when not sampling).
func (c *joinSample) skipped() []uint64 {
	if !c.on() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.made {
		c.list = c.list[:0]
		for id := range c.out {
			c.list = append(c.list, id)
		}
		slices.Sort(c.list)
		c.made = true
	}
	now := time.Now().UnixMicro() // the read that leaves them out begins
	for _, id := range c.list {
		c.leftOut[id] = now
	}
	return c.list
}

// keep drops, in place, the rows of connections known to be out (rows the
// server sent before the processlist named their connection), but for
// those of at least slowPS on the server (the rows of slow statements,
// which are joined on every connection), and reports whether rows of
// connections it does not know yet remain: a processlist read then tells
// which they are, before the joiner buffers rows that no wire statement
// will ever claim.
func (c *joinSample) keep(rows []collect.ServerStatement, slowPS uint64) ([]collect.ServerStatement, bool) {
	if !c.on() {
		return rows, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	unknown := false
	now := time.Now().UnixMicro()
	rows = slices.DeleteFunc(rows, func(r collect.ServerStatement) bool {
		unknown = unknown || (r.ConnID != 0 && !c.in[r.ConnID] && !c.out[r.ConnID])
		drop := c.out[r.ConnID] && (slowPS == 0 || r.TimerWait < slowPS)
		if drop {
			c.leftOut[r.ConnID] = now
		}
		return drop
	})
	return rows, unknown
}

// joins reports whether the sample s joins the fast statements of the
// wire connection conn ("client>server").
func joins(s capture.Sample, conn string) bool {
	if !s.On() {
		return true
	}
	client, _, _ := strings.Cut(conn, ">")
	port, ok := hostPort(client)
	return ok && s.Follows(port)
}

// learn takes a processlist read: HOST by id, the application's client
// ports on the wire, the pivot; and, when sampling, which connections are
// in and out from now on.
func (c *joinSample) learn(procs []collect.Process) {
	c.choosePivot(procs)
	c.hosts = make(map[uint64]string, len(procs))
	c.appPorts = c.appPorts[:0]
	for _, pr := range procs {
		c.hosts[pr.ID] = pr.Host // sockets and background threads: never sampled
		if port, ok := hostPort(pr.Host); ok && !c.own.isOwnHost(pr.Host) {
			c.appPorts = append(c.appPorts, port)
		}
	}
	c.replace(c.hosts)
}

// govern lets the CPU budget change the join sample, given watch's CPU
// time so far (cpu) and the server's statements per second (rate). It
// reports whether the sample changed (the joiner is then told whether it
// is partial).
func (c *joinSample) govern(now time.Time, cpu time.Duration, rate float64) bool {
	return c.policy.govern(c, now, cpu, rate)
}

// samplePolicy changes the join sample as the run goes: the CPU budget's
// governor, or noBudget, which keeps it. Its state is the poller's.
type samplePolicy interface {
	govern(c *joinSample, now time.Time, cpu time.Duration, rate float64) bool
	// note says what it did over the run ("": nothing to say).
	note(startUS, endUS int64) string
	// cost adds what it did to the run's OwnCost.
	cost(c *joinSample, o *OwnCost)
}

// noBudget keeps the join sample as it started.
type noBudget struct{}

func (noBudget) govern(*joinSample, time.Time, time.Duration, float64) bool { return false }
func (noBudget) note(int64, int64) string                                   { return "" }
func (noBudget) cost(*joinSample, *OwnCost)                                 {}

// govern is the budget's step: it weighs the shares of the connections
// the sample could follow against watch's CPU so far.
func (g *governor) govern(c *joinSample, now time.Time, cpu time.Duration, rate float64) bool {
	cur := c.get()
	g.key = c.pivotKey
	next := c.budgetSample(g.observe(now, cpu, cur.N, func(n uint16) float64 { return c.followedRate(n, rate) }))
	if next == cur {
		return false
	}
	if next.N == cur.N { // the pivot connection went: the same share, other connections
		g.rekey(now, next.N)
	}
	c.set(next)
	c.replace(c.hosts)
	return true
}

func (g *governor) cost(c *joinSample, o *OwnCost) {
	o.Budget, o.Steps = g.budget, g.steps
	joined, app := c.followedConns(c.get())
	o.JoinedConns, o.AppConns = &joined, &app
}

// keepRows drops the rows of the connections left out. Rows of
// connections opened since the last processlist read make it read the
// processlist again (reread, at most every sampleRefresh) to classify
// them.
func (c *joinSample) keepRows(got []collect.ServerStatement, reread func()) []collect.ServerStatement {
	got, unknown := c.keep(got, slowRowPS)
	if unknown && time.Since(c.readAt) >= sampleRefresh {
		c.readAt = time.Now()
		reread()
		got, _ = c.keep(got, slowRowPS)
	}
	return got
}

// budgetSample is the join sample a budgeted run keeps at 1 in n: keyed
// by the pivot connection, so that however few connections there are and
// whatever their ports hash to, a cut never leaves none joined (with
// eight connections, a sample keyed 0 held none at 1 in 4 one time in
// ten, and the governor then had to stay at 1 in 2).
func (c *joinSample) budgetSample(n uint16) capture.Sample {
	if n <= 1 {
		return capture.All
	}
	return capture.Sample{N: n, Key: c.pivotKey}
}

// choosePivot keeps the pivot connection while the processlist lists it,
// and otherwise picks another: a client on the wire that is not one of
// watch's own, running a command when the processlist was read if one is
// (a busy connection rather than an idle one in a pool), the lowest id
// among equals so that reads agree.
func (c *joinSample) choosePivot(procs []collect.Process) {
	best, bestBusy := -1, false
	for i, pr := range procs {
		if _, ok := hostPort(pr.Host); !ok || c.own.isOwnHost(pr.Host) {
			continue
		}
		if pr.Host == c.pivotHost {
			return
		}
		busy := pr.Command != "Sleep"
		if best < 0 || (busy && !bestBusy) || (busy == bestBusy && pr.ID < procs[best].ID) {
			best, bestBusy = i, busy
		}
	}
	if best < 0 {
		return // nothing to pivot on: the key stays
	}
	port, _ := hostPort(procs[best].Host)
	c.pivotHost, c.pivotKey = procs[best].Host, capture.PortKey(port)
}

// followedRate estimates the server's statements per second a 1-in-n
// sample would follow: the server's rate times the share of the
// application's connections the processlist last listed (on the wire)
// that the sample would hold.
func (c *joinSample) followedRate(n uint16, rate float64) float64 {
	held, wired := c.followedConns(c.budgetSample(n))
	if wired == 0 {
		return rate / float64(n)
	}
	return rate * float64(held) / float64(wired)
}

// followedConns counts the application's connections on the wire that
// the processlist last listed, and those s follows.
func (c *joinSample) followedConns(s capture.Sample) (held, wired int) {
	for _, port := range c.appPorts {
		if s.Follows(port) {
			held++
		}
	}
	return held, len(c.appPorts)
}

// sampleRefresh bounds how often new connections trigger a processlist read.
const sampleRefresh = 200 * time.Millisecond

// govNote says what the budget's governor did over the run ("" without a
// budget).
func (c *joinSample) govNote(startUS, endUS int64) string { return c.policy.note(startUS, endUS) }

// cost is what the budget did, for the run's OwnCost (nothing without a
// budget).
func (c *joinSample) cost(o *OwnCost) { c.policy.cost(c, o) }
