package watch

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gapscope/gapscope/internal/capture"
	"github.com/gapscope/gapscope/internal/collect"
)

// connSample is the join sample: the connections whose fast statements
// are joined, those whose client port the capture.Sample follows. The loop
// hands the others' statements on unjoined (joins), and the poller asks
// the server to leave out their rows. Every connection is captured. Which connection is which comes from the processlist (HOST
// ip:port), re-read every second; a connection opened since is not known
// to be out, so its statements are read until then, and dropped here if
// it turns out unsampled.
type connSample struct {
	mu   sync.Mutex
	s    capture.Sample  // a CPU budget changes it (set)
	in   map[uint64]bool // connections known to be sampled
	out  map[uint64]bool // connections known not to be sampled
	list []uint64        // out, sorted; rebuilt when out changed
	// closed: connections out that the processlist no longer lists, by
	// when that was first seen.
	closed map[uint64]time.Time
	made   bool
}

func newConnSample(s capture.Sample) *connSample {
	return &connSample{s: s, in: map[uint64]bool{}, out: map[uint64]bool{}, closed: map[uint64]time.Time{}}
}

// on reports whether sampling is on (connections left out).
func (c *connSample) on() bool { return c != nil && c.get().On() }

func (c *connSample) get() capture.Sample {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.s
}

// set follows the sample s from now on. Which connections are in or out is not
// known until the next replace (a processlist read): until then every row
// is kept, as for a connection just opened.
func (c *connSample) set(s capture.Sample) {
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
func (c *connSample) replace(hosts map[uint64]string) { c.replaceAt(hosts, time.Now()) }

func (c *connSample) replaceAt(hosts map[uint64]string, now time.Time) {
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
}

// closedGrace is how long a closed connection stays out of a sample:
// reads cover the history since the last read (plus a slack of
// milliseconds), so after this its rows are behind every read.
const closedGrace = 10 * time.Second

// skipped returns the connections whose statements the server need not
// send (nil when not sampling).
func (c *connSample) skipped() []uint64 {
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
	return c.list
}

// keep drops, in place, the rows of connections known to be out (rows the
// server sent before the processlist named their connection), but for
// those of at least slowPS on the server (the rows of slow statements,
// which are joined on every connection), and reports whether rows of
// connections it does not know yet remain: a processlist read then tells
// which they are, before the joiner buffers rows that no wire statement
// will ever claim.
func (c *connSample) keep(rows []collect.ServerStatement, slowPS uint64) ([]collect.ServerStatement, bool) {
	if !c.on() {
		return rows, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	unknown := false
	rows = slices.DeleteFunc(rows, func(r collect.ServerStatement) bool {
		unknown = unknown || (r.ConnID != 0 && !c.in[r.ConnID] && !c.out[r.ConnID])
		return c.out[r.ConnID] && (slowPS == 0 || r.TimerWait < slowPS)
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

// serverFollows makes the join sample s: the rows the server side reads
// and keeps, sorted by the last processlist read (hosts).
func (p *poller) serverFollows(s capture.Sample) {
	p.sample.set(s)
	p.sample.replace(p.hosts)
	if p.joiner != nil {
		p.joiner.SetPartial(s.On())
	}
}
