package watch

import (
	"context"
	"net"
	"strings"
	"sync"
)

// ownAddrs remembers the local addresses of gapscope's own connections to
// the server, so that their traffic on the wire (handshakes, pings, the
// driver's own statements that carry no /* gapscope */ marker) is never
// reported as the application's.
type ownAddrs struct {
	mu    sync.Mutex
	addrs map[string]bool
}

func newOwnAddrs() *ownAddrs { return &ownAddrs{addrs: map[string]bool{}} }

func (o *ownAddrs) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err == nil {
		o.mu.Lock()
		o.addrs[c.LocalAddr().String()] = true
		o.mu.Unlock()
	}
	return c, err
}

// isOwn reports whether a wire connection "client>server" is one of ours.
func (o *ownAddrs) isOwn(conn string) bool {
	client, _, _ := strings.Cut(conn, ">")
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.addrs[client]
}
