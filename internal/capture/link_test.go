//go:build linux

package capture

import (
	"context"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/netlab"
)

// linkLab is a 5 ms (each way) link with a TCP echo server in its server
// namespace.
func linkLab(t *testing.T) (*netlab.Link, net.Listener) {
	t.Helper()
	if testing.Short() {
		t.Skip("network namespaces: not in -short")
	}
	if err := netlab.Available(); err != nil {
		t.Skip(err)
	}
	l, err := netlab.New(netlab.Options{Delay: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var ln net.Listener
	err = netlab.RunIn(l.ServerNS(), func() (err error) {
		ln, err = net.Listen("tcp", netlab.ServerAddr+":0")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return l, ln
}

// echoRounds dials the echo server from the client namespace and makes a
// few round trips; the connection stays open until the test ends.
func echoRounds(t *testing.T, l *netlab.Link, addr string, n int) net.Conn {
	t.Helper()
	c, err := netlab.DialerIn(l.ClientNS())(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	buf := make([]byte, 4)
	for i := 0; i < n; i++ {
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// A live capture on a TUN device (raw IP, no link-layer header), opened
// from inside the client's namespace, sees the connection and measures the
// 10 ms round trip from its handshake and ACKs, on the client's side.
func TestLiveCaptureOnTUNMeasuresThePath(t *testing.T) {
	l, ln := linkLab(t)
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	var live *Live
	err := netlab.RunIn(l.ClientNS(), func() (err error) {
		live, err = OpenLive(l.ClientDevice(), LiveOptions{Options: Options{Ports: []uint16{port},
			LocalAddrs: []netip.Addr{netip.MustParseAddr(netlab.ClientAddr)}}, RingMB: 2})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan Stats, 1)
	go func() {
		st, _ := live.Run(ctx, func(*event.Statement) {})
		done <- st
	}()
	time.Sleep(100 * time.Millisecond)
	echoRounds(t, l, ln.Addr().String(), 5)
	time.Sleep(100 * time.Millisecond)
	cancel()
	st := <-done
	t.Logf("capture: %d packets, path %+v", st.Packets, st.Path)
	if st.Packets < 10 || st.Malformed != 0 {
		t.Errorf("%d packets, %d malformed: raw IP frames not decoded", st.Packets, st.Malformed)
	}
	if st.Path.Point != PointClient || st.Path.Conns != 1 {
		t.Errorf("path %+v, want one connection seen from the client", st.Path)
	}
	if st.Path.RTTMinUS < 10_000 || st.Path.RTTMinUS > 12_000 {
		t.Errorf("round trip %d us across a 5 ms link, want 10 ms and a little", st.Path.RTTMinUS)
	}
}

// On the application's host the kernel's own round trip of its sockets to
// the server is readable through sock_diag.
func TestPeerSocketsRoundTrip(t *testing.T) {
	l, ln := linkLab(t)
	c := echoRounds(t, l, ln.Addr().String(), 5)
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	var socks []SocketStat
	err := netlab.RunIn(l.ClientNS(), func() (err error) {
		socks, err = PeerSockets(port)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(socks) != 1 || socks[0].Local.String() != c.LocalAddr().String() {
		t.Fatalf("sockets %+v, want the one connection from %s", socks, c.LocalAddr())
	}
	s := socks[0]
	t.Logf("kernel: rtt %d us, rttvar %d, min_rtt %d", s.RTTUS, s.RTTVarUS, s.MinRTTUS)
	if s.MinRTTUS < 10_000 || s.MinRTTUS > 12_000 || s.RTTUS < s.MinRTTUS {
		t.Errorf("kernel min_rtt %d us (srtt %d) across a 5 ms link, want 10 ms and a little", s.MinRTTUS, s.RTTUS)
	}
}
