package watch

import (
	"context"
	"maps"
	"net"
	"strings"
	"sync"
	"sync/atomic"
)

// ownAddrs remembers the local addresses of gapscope's own connections to
// the server, so that their traffic on the wire (handshakes, pings, the
// driver's own statements that carry no /* gapscope */ marker) is never
// reported as the application's.
//
// The capture asks isOwn for every statement, and connections are dialled
// rarely: the set is copied on write and read without a lock.
type ownAddrs struct {
	mu    sync.Mutex // serialises writers
	addrs atomic.Pointer[map[string]bool]
	// dials and sent count the connections watch opened and the
	// statements it sent (collect.OpenConfigCounting): the poller takes
	// them from the server's counters to see whether anyone else is there.
	dials, sent atomic.Int64
}

func newOwnAddrs() *ownAddrs {
	o := &ownAddrs{}
	o.addrs.Store(&map[string]bool{})
	return o
}

func (o *ownAddrs) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	o.dials.Add(1) // the server counts an attempt that fails, too
	if err == nil {
		o.add(c.LocalAddr().String())
	}
	return c, err
}

// add remembers one of our connections' local address.
func (o *ownAddrs) add(addr string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	next := maps.Clone(*o.addrs.Load())
	next[addr] = true
	o.addrs.Store(&next)
}

// isOwn reports whether a wire connection "client>server" is one of ours.
func (o *ownAddrs) isOwn(conn string) bool {
	client, _, _ := strings.Cut(conn, ">")
	return (*o.addrs.Load())[client]
}

// isOwnHost reports whether a processlist HOST (ip:port) is one of ours.
// MariaDB writes a TCP client of 127.0.0.1 as localhost:port unless it
// skips name resolution, while our dialler knows it as 127.0.0.1:port.
func (o *ownAddrs) isOwnHost(host string) bool {
	if o.isOwn(host) {
		return true
	}
	if port, ok := strings.CutPrefix(host, "localhost:"); ok {
		return o.isOwn("127.0.0.1:" + port)
	}
	return false
}
