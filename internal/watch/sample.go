package watch

import (
	"net"
	"slices"
	"strconv"
	"sync"

	"github.com/gapscope/gapscope/internal/capture"
	"github.com/gapscope/gapscope/internal/collect"
)

// connSample follows the connections of a sampled run: the capture keeps
// those whose client port capture.SampledPort accepts (in the kernel
// filter), and the poller asks the server to leave out the statements of
// the others. Which connection is which comes from the processlist (HOST
// ip:port), re-read every second; a connection opened since is not known
// to be out, so its statements are read until then, and dropped here if
// it turns out unsampled.
type connSample struct {
	n    uint16
	mu   sync.Mutex
	in   map[uint64]bool // connections known to be sampled
	out  map[uint64]bool // connections known not to be sampled
	list []uint64        // out, sorted; rebuilt when out changed
	made bool
}

func newConnSample(n uint16) *connSample {
	return &connSample{n: n, in: map[uint64]bool{}, out: map[uint64]bool{}}
}

// on reports whether sampling is on (n > 1).
func (c *connSample) on() bool { return c != nil && c.n > 1 }

// sampledHost reports whether a processlist HOST (ip:port) is sampled.
func (c *connSample) sampledHost(host string) bool {
	_, p, err := net.SplitHostPort(host)
	if err != nil {
		return false
	}
	port, err := strconv.ParseUint(p, 10, 16)
	return err == nil && capture.SampledPort(uint16(port), c.n)
}

// replace takes a processlist read (ids by HOST): the connections it lists
// that are not sampled are out from now on, closed ones forgotten.
// Connections without a port (sockets) are never on the wire: out too.
func (c *connSample) replace(hosts map[uint64]string) {
	if !c.on() {
		return
	}
	in, out := map[uint64]bool{}, map[uint64]bool{}
	for id, host := range hosts {
		if c.sampledHost(host) {
			in[id] = true
		} else {
			out[id] = true
		}
	}
	c.mu.Lock()
	c.in, c.out, c.made = in, out, false
	c.mu.Unlock()
}

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
// server sent before the processlist named their connection), and reports
// whether rows of connections it does not know yet remain: a processlist
// read then tells which they are, before the joiner buffers rows that no
// wire statement will ever claim.
func (c *connSample) keep(rows []collect.ServerStatement) ([]collect.ServerStatement, bool) {
	if !c.on() {
		return rows, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	unknown := false
	rows = slices.DeleteFunc(rows, func(r collect.ServerStatement) bool {
		unknown = unknown || (r.ConnID != 0 && !c.in[r.ConnID] && !c.out[r.ConnID])
		return c.out[r.ConnID]
	})
	return rows, unknown
}
