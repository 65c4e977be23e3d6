package join

import (
	"net"
	"strings"
)

// addrBook maps client addresses (ip:port) to connection ids: the
// handshakes' and, for connections opened before the capture started,
// the processlist's (MapConn). A cache of at most max entries.
type addrBook struct {
	ids map[string]uint64
	max int
}

// set records addr's connection id, dropping an arbitrary entry when full.
func (b *addrBook) set(addr string, id uint64) {
	if len(b.ids) >= b.max {
		for k := range b.ids {
			delete(b.ids, k)
			break
		}
	}
	b.ids[addr] = id
}

// clientAddr returns the client side of "cli_ip:port>srv_ip:port".
func clientAddr(conn string) string {
	i := strings.IndexByte(conn, '>')
	if i <= 0 {
		return ""
	}
	return canonicalAddr(conn[:i])
}

// canonicalAddr makes the capture's and the processlist's spelling of a
// client address agree: MariaDB shows TCP clients from 127.0.0.1 as
// "localhost:port" even with skip-name-resolve (measured on 10.11).
func canonicalAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if host == "localhost" || host == "::1" || host == "::ffff:127.0.0.1" {
		host = "127.0.0.1"
	}
	if host == addr[:len(host)] && !strings.Contains(host, ":") {
		return addr // already canonical: avoid allocating on the hot path
	}
	return net.JoinHostPort(host, port)
}
