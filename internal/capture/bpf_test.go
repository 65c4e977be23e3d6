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
