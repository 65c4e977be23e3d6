package capture

import (
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
		prog, err := buildFilter(ports, link, false)
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
	prog, err := buildFilter([]uint16{3306}, filterEthernet, true)
	if err != nil || len(prog) < 10 {
		t.Fatalf("%d instructions, %v", len(prog), err)
	}
	if _, err := buildFilter(nil, filterEthernet, false); err == nil {
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

// With one Key, 1 in 2N follows a subset of 1 in N: a budget that cuts
// keeps following connections it followed; a sample keyed by a port
// follows that port; a paused one follows none.
func TestSamplesNest(t *testing.T) {
	if !(Sample{N: 1024, Key: PortKey(40002)}).Follows(40002) {
		t.Error("a sample keyed by a port does not follow that port")
	}
	if (Sample{N: 4, Key: PortKey(40002), Paused: true}).Follows(40002) {
		t.Error("a paused sample follows a port")
	}
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
// dropped.
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
			wantReq, wantAns, want int
		}{
			{len(request), 128, 0},
		} {
			prog, err := buildFilterSnap([]uint16{3306}, filterEthernet, false, 128)
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
					t.Errorf("v6=%v %s: kept %d bytes (%v), want %d", v6, f.name, n, err, f.want)
				}
			}
		}
	}
}
