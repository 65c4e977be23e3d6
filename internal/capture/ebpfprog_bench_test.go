//go:build linux

package capture

import (
	"bytes"
	"testing"

	"github.com/cilium/ebpf"
	ebpfasm "github.com/cilium/ebpf/asm"
)

// BenchmarkHeaderProgram is the header-only program's own time per packet,
// in the kernel (BPF_PROG_TEST_RUN: kernel-ns/packet, the kernel's clock
// around the runs), for a packet of another port (only the header match
// reads it), a request, a short answer copied whole and a long one cut;
// and, to read them against, the floors every capture program
// pays: returning at once, matching the port, reading the clock, and
// reserving and submitting an empty record. Caches are warm here, so live
// packets cost more (docs/performance.md reads both). Needs root.
//
// The ring is written through once before (a page of it first written in
// a virtual machine costs a fault on the host), and drained every
// batch: past BPFWakeBytes waiting, each record would ask the kernel to
// wake the reader, which live reads keep from happening.
func BenchmarkHeaderProgram(b *testing.B) {
	e := openTestEBPF(b, LiveOptions{Options: Options{Ports: []uint16{3306}}, RingMB: 4})
	c := newConv("10.0.0.1:40000", "10.0.0.2:3306")
	request := frame(linkEthernet, c.fromClient(bytes.Repeat([]byte("x"), 200)))
	short := frame(linkEthernet, c.fromServer(bytes.Repeat([]byte("y"), 300)))
	// A test run takes a frame of one page at most: 3,000 bytes are past
	// the head and tail, so the answer is cut.
	long := frame(linkEthernet, c.fromServer(bytes.Repeat([]byte("z"), 3_000)))
	other := frame(linkEthernet, newConv("10.0.0.1:40000", "10.0.0.2:5432").fromClient([]byte("SELECT 1")))
	drain := func() { e.ring.Each(recordHeader, func([]byte) {}) }
	for range 2 * len(e.ring.data) / int(cutRecordSize(headBytes, tailBytes)) / progBatch {
		if _, _, err := e.ring.prog.Benchmark(long, progBatch, nil); err != nil {
			b.Fatal(err)
		}
		drain()
	}
	exit := ebpfasm.Instructions{ebpfasm.Mov.Imm(ebpfasm.R0, tcNext).WithSymbol(BPFNext), ebpfasm.Return()}
	floor := func(body ...ebpfasm.Instruction) *ebpf.Program {
		ins := append(BPFMatch(14 /* lo: an Ethernet header */, []uint16{3306}, "kept", "kept"), ebpfasm.Mov.Imm(ebpfasm.R0, 0).WithSymbol("kept"))
		ins = append(append(ins, body...), exit...)
		p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SchedCLS, License: "GPL", Instructions: ins})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { p.Close() })
		return p
	}
	returnOnly, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SchedCLS, License: "GPL", Instructions: exit})
	if err != nil {
		b.Fatal(err)
	}
	defer returnOnly.Close()
	for _, bm := range []struct {
		name   string
		prog   *ebpf.Program
		data   []byte
		behind bool // BPFWakeBytes already wait, unread
	}{
		{"floor-return", returnOnly, request, false},
		{"floor-match", floor(), request, false},
		{"floor-match-clock", floor(ebpfasm.FnKtimeGetNs.Call()), request, false},
		{"floor-match-reserve-submit", floor(
			ebpfasm.LoadMapPtr(ebpfasm.R1, e.ring.ring.FD()),
			ebpfasm.Mov.Imm(ebpfasm.R2, 64),
			ebpfasm.Mov.Imm(ebpfasm.R3, 0),
			ebpfasm.FnRingbufReserve.Call(),
			ebpfasm.JEq.Imm(ebpfasm.R0, 0, BPFNext),
			ebpfasm.Mov.Reg(ebpfasm.R1, ebpfasm.R0),
			ebpfasm.Mov.Imm(ebpfasm.R2, 1), // BPF_RB_NO_WAKEUP
			ebpfasm.FnRingbufSubmit.Call(),
		), request, false},
		{"other-port", e.ring.prog, other, false},
		{"request-200B", e.ring.prog, request, false},
		{"answer-300B-whole", e.ring.prog, short, false},
		{"answer-3000B-cut", e.ring.prog, long, false},
		{"answer-3000B-cut-reader-behind", e.ring.prog, long, true},
	} {
		b.Run(bm.name, func(b *testing.B) {
			var total float64
			runs := 0
			for b.Loop() {
				if bm.behind {
					b.StopTimer()
					behind(b, e, long)
					b.StartTimer()
				}
				_, per, err := bm.prog.Benchmark(bm.data, progBatch, nil)
				if err != nil {
					b.Fatal(err)
				}
				drain()
				total += float64(per.Nanoseconds()) * progBatch
				runs += progBatch
			}
			b.ReportMetric(total/float64(runs), "kernel-ns/packet")
		})
	}
	if d := e.ring.Dropped(); d != 0 {
		b.Errorf("%d records dropped", d)
	}
}

// behind leaves BPFWakeBytes of cut records unread in the ring, as when
// the reader falls behind, with the wake latch clear: the batch timed
// next asks for one wake, as a reader that runs between batches lets it.
func behind(b *testing.B, e *EBPF, long []byte) {
	b.Helper()
	if _, _, err := e.ring.prog.Benchmark(long, BPFWakeBytes/int(cutRecordSize(headBytes, tailBytes))+1, nil); err != nil {
		b.Fatal(err)
	}
	e.rearmWake()
}

// progBatch is how many runs one BPF_PROG_TEST_RUN makes: their records
// (at most a cut record each) stay under BPFWakeBytes.
const progBatch = 256
