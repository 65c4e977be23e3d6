package capture

import (
	"fmt"
	"net/netip"
	"testing"

	"golang.org/x/net/bpf"
)

func TestBuildFilterMatchesPorts(t *testing.T) {
	ports := []uint16{3306, 3307}
	tcp := func(src, dst string) seg {
		return seg{src: netip.MustParseAddrPort(src), dst: netip.MustParseAddrPort(dst), flags: tcpACK, wscale: -1, payload: []byte("x")}
	}
	cases := []struct {
		name string
		s    seg
		want bool
	}{
		{"v4 to server", tcp("10.0.0.1:40000", "10.0.0.2:3306"), true},
		{"v4 from second server", tcp("10.0.0.2:3307", "10.0.0.1:40000"), true},
		{"v4 other port", tcp("10.0.0.1:40000", "10.0.0.2:5432"), false},
		{"v6 to server", tcp("[::1]:40000", "[::1]:3307"), true},
		{"v6 other port", tcp("[::1]:40000", "[::1]:22"), false},
	}
	for _, link := range []filterLink{filterEthernet, filterRawIP} {
		prog, err := buildFilter(ports, link, false, Sample{})
		if err != nil {
			t.Fatal(err)
		}
		vm, err := bpf.NewVM(disassemble(t, prog))
		if err != nil {
			t.Fatal(err)
		}
		lt := linkEthernet
		if link == filterRawIP {
			lt = linkRaw
		}
		for _, c := range cases {
			n, err := vm.Run(frame(lt, c.s))
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if (n > 0) != c.want {
				t.Errorf("link %d %s: accepted %d bytes, want %v", link, c.name, n, c.want)
			}
		}
		// An IPv4 fragment after the first carries no TCP header: dropped.
		f := frame(lt, cases[0].s)
		off := 0
		if lt == linkEthernet {
			off = 14
		}
		f[off+6], f[off+7] = 0x00, 0x20
		if n, _ := vm.Run(f); n != 0 {
			t.Errorf("link %d: later fragment accepted", link)
		}
		// UDP to the port is not TCP.
		u := frame(lt, cases[0].s)
		u[off+9] = 17
		if n, _ := vm.Run(u); n != 0 {
			t.Errorf("link %d: UDP accepted", link)
		}
	}
}

func TestBuildFilterOutgoingCheckAssembles(t *testing.T) {
	prog, err := buildFilter([]uint16{3306}, filterEthernet, true, Sample{})
	if err != nil || len(prog) < 10 {
		t.Fatalf("%d instructions, %v", len(prog), err)
	}
	if _, err := buildFilter(nil, filterEthernet, false, Sample{}); err == nil {
		t.Error("no ports accepted")
	}
}

func disassemble(t *testing.T, raw []bpf.RawInstruction) []bpf.Instruction {
	ins, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatal("filter does not disassemble")
	}
	return ins
}

// A sampled filter keeps a connection in both directions exactly when the
// sample Follows its client port, and spreads even ports (what Linux hands
// connect()) over the buckets; a keyed sample follows its key's port.
func TestBuildFilterSamplesConnections(t *testing.T) {
	for _, sample := range []Sample{{N: 4}, {N: 4, Key: PortKey(40002)}, {N: 4, Key: PortKey(40004)}} {
		testSampledFilter(t, sample)
	}
	if !(Sample{N: 1024, Key: PortKey(40002)}).Follows(40002) {
		t.Error("a sample keyed by a port does not follow that port")
	}
}

func testSampledFilter(t *testing.T, sample Sample) {
	prog, err := buildFilter([]uint16{3306}, filterEthernet, false, sample)
	if err != nil {
		t.Fatal(err)
	}
	vm, err := bpf.NewVM(disassemble(t, prog))
	if err != nil {
		t.Fatal(err)
	}
	accepted := 0
	for port := uint16(40000); port < 41000; port += 2 {
		want := sample.Follows(port)
		if want {
			accepted++
		}
		for _, v6 := range []bool{false, true} {
			host := "10.0.0.%d:%d"
			if v6 {
				host = "[fd00::%d]:%d"
			}
			client := netip.MustParseAddrPort(fmt.Sprintf(host, 1, port))
			server := netip.MustParseAddrPort(fmt.Sprintf(host, 2, 3306))
			for _, s := range []seg{
				{src: client, dst: server, flags: tcpACK, wscale: -1, payload: []byte("q")},
				{src: server, dst: client, flags: tcpACK, wscale: -1, payload: []byte("r")},
			} {
				n, err := vm.Run(frame(linkEthernet, s))
				if err != nil {
					t.Fatal(err)
				}
				if (n > 0) != want {
					t.Fatalf("port %d v6=%v %v->%v: accepted %d bytes, Follows says %v", port, v6, s.src, s.dst, n, want)
				}
			}
		}
	}
	if accepted < 100 || accepted > 150 { // 500 even ports, 1 in 4 expected
		t.Errorf("%d of 500 even client ports sampled at %+v", accepted, sample)
	}
	// Another port is still dropped whatever its peer.
	other := seg{src: netip.MustParseAddrPort("10.0.0.1:40000"), dst: netip.MustParseAddrPort("10.0.0.2:5432"), flags: tcpACK, wscale: -1}
	if n, _ := vm.Run(frame(linkEthernet, other)); n != 0 {
		t.Error("a packet to another port passed the sampled filter")
	}
}

// With one Key, 1 in 2N follows a subset of 1 in N: a budget that cuts
// keeps following connections it followed.
// A paused sample's filter accepts nothing, on any link; it follows no port.
func TestBuildFilterPaused(t *testing.T) {
	paused := Sample{N: 4, Key: PortKey(40002), Paused: true}
	for _, link := range []filterLink{filterEthernet, filterRawIP} {
		prog, err := buildFilter([]uint16{3306}, link, true, paused)
		if err != nil {
			t.Fatal(err)
		}
		if len(prog) != 1 || prog[0].Op != 0x06 || prog[0].K != 0 { // BPF_RET|BPF_K 0
			t.Errorf("link %d: paused filter %+v, want a single ret 0", link, prog)
		}
	}
	if paused.Follows(40002) || !paused.On() || paused.Resumed() != (Sample{N: 4, Key: PortKey(40002)}) {
		t.Errorf("paused sample: follows %v, on %v, resumed %+v", paused.Follows(40002), paused.On(), paused.Resumed())
	}
}

func TestSamplesNest(t *testing.T) {
	for _, key := range []uint32{0, PortKey(40002), PortKey(51234)} {
		for n := uint16(1); n < 1024; n *= 2 {
			for port := uint16(32768); port < 61000; port += 2 {
				if (Sample{N: 2 * n, Key: key}).Follows(port) && !(Sample{N: n, Key: key}).Follows(port) {
					t.Fatalf("key %d: port %d in 1 in %d but not in 1 in %d", key, port, 2*n, n)
				}
			}
		}
	}
}

// A filter with a short answer snap cuts what the server sends to that many
// bytes and keeps requests whole, over IPv4 and IPv6; other ports are still
// dropped, and a sampled filter keeps answers whole.
func TestBuildFilterSnapCutsAnswersOnly(t *testing.T) {
	big := make([]byte, 500)
	for _, v6 := range []bool{false, true} {
		client, server := netip.MustParseAddrPort("10.0.0.1:40000"), netip.MustParseAddrPort("10.0.0.2:3306")
		if v6 {
			client, server = netip.MustParseAddrPort("[fd00::1]:40000"), netip.MustParseAddrPort("[fd00::2]:3306")
		}
		request := frame(linkEthernet, seg{src: client, dst: server, flags: tcpACK, wscale: -1, payload: big})
		answer := frame(linkEthernet, seg{src: server, dst: client, flags: tcpACK, wscale: -1, payload: big})
		other := frame(linkEthernet, seg{src: client, dst: netip.AddrPortFrom(server.Addr(), 5432), flags: tcpACK, wscale: -1, payload: big})
		for _, c := range []struct {
			sample                 Sample
			wantReq, wantAns, want int
		}{
			{Sample{N: 1}, len(request), 128, 0},
			{Sample{N: 2, Key: PortKey(40000)}, len(request), len(answer), 0},
		} {
			prog, err := buildFilterSnap([]uint16{3306}, filterEthernet, false, c.sample, 128)
			if err != nil {
				t.Fatal(err)
			}
			vm, err := bpf.NewVM(disassemble(t, prog))
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range []struct {
				name  string
				frame []byte
				want  int
			}{{"request", request, c.wantReq}, {"answer", answer, c.wantAns}, {"other port", other, c.want}} {
				n, err := vm.Run(f.frame) // the kernel keeps min(n, frame length)
				if n = min(n, len(f.frame)); err != nil || n != f.want {
					t.Errorf("v6=%v sample %+v %s: kept %d bytes (%v), want %d", v6, c.sample, f.name, n, err, f.want)
				}
			}
		}
	}
}
