package capture

import (
	"io"
	"net"
	"testing"
	"time"
)

// A server socket whose client does not read becomes receive-window
// limited; sock_diag reports it under the listening port, with the time the
// kernel counted, bounded by how long the client held off.
func TestServerSocketsRwndLimited(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	start := time.Now()
	go func() { // the server writes until the client's window and its own buffer are full
		chunk := make([]byte, 64<<10)
		for {
			if _, err := server.Write(chunk); err != nil {
				return
			}
		}
	}()
	const held = 400 * time.Millisecond
	time.Sleep(held)
	socks, err := ServerSockets(port)
	elapsed := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	var found *SocketStat
	for i := range socks {
		if socks[i].Remote.String() == client.LocalAddr().String() {
			found = &socks[i]
		}
		if socks[i].Local.Port() != port {
			t.Errorf("socket of another port listed: %+v", socks[i])
		}
	}
	if found == nil {
		t.Fatalf("server socket for client %s not among %+v", client.LocalAddr(), socks)
	}
	t.Logf("server socket: %+v after holding the client %s", *found, elapsed)
	// The kernel counts in jiffies (4 ms at HZ=250): allow two of them.
	if found.RwndLimitedUS == 0 || found.RwndLimitedUS > uint64((elapsed+8*time.Millisecond).Microseconds()) {
		t.Errorf("rwnd-limited %d µs while the client held off %s", found.RwndLimitedUS, elapsed)
	}
	if found.BytesAcked == 0 {
		t.Error("no bytes acknowledged: TCP_INFO not parsed")
	}
	go io.Copy(io.Discard, client) // let the writer finish
}

func TestParseDiagMsgShortInfo(t *testing.T) {
	msg := make([]byte, diagMsgLen+8)
	msg[0] = 2          // AF_INET
	msg[diagMsgLen] = 8 // attribute length
	msg[diagMsgLen+2] = diagInfoAttr
	if _, ok, err := parseDiagMsg(msg); ok || err != ErrNoRwndLimited {
		t.Errorf("a 4-byte tcp_info parsed: ok %v, err %v", ok, err)
	}
	if _, ok, err := parseDiagMsg(msg[:10]); ok || err != nil {
		t.Errorf("a truncated message: ok %v, err %v", ok, err)
	}
}
