package watch

import (
	"context"
	"maps"
	"net"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gapscope/gapscope/internal/collect"
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
	// pool counts the connections watch opened and the statements it
	// sent (collect.Secrets.OpenConfigCounting): the poller takes them from the
	// server's counters to see whether anyone else is there.
	pool collect.PoolCounts
}

func newOwnAddrs() *ownAddrs {
	o := &ownAddrs{}
	o.addrs.Store(&map[string]bool{})
	return o
}

func (o *ownAddrs) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
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

// ownCounts are watch's own statements and connections at one moment:
// begun, and done (answered, or connected).
type ownCounts struct {
	begun, sent, dialsBegun, dials int64
}

// counts reads them, what is done before what is begun: one that begins
// and ends between the loads shows as under way, never the other way
// round.
func (o *ownAddrs) counts() ownCounts {
	c := ownCounts{sent: o.pool.Statements(), dials: o.pool.Connections()}
	c.begun, c.dialsBegun = o.pool.StatementsBegun(), o.pool.ConnectionsBegun()
	return c
}

// quietAround reports whether one statement of watch's own ran alone
// between two counts: nothing was under way at the first, one statement
// began between them (the read they bracket) and every one had ended at
// the second, with no connection opening. The server's counters read by
// that statement then count exactly watch's sent statements and dials,
// itself included.
func quietAround(before, after ownCounts) bool {
	return before.begun == before.sent && before.dialsBegun == before.dials &&
		after.begun == before.begun+1 && after.sent == after.begun &&
		after.dialsBegun == before.dialsBegun && after.dials == after.dialsBegun
}
