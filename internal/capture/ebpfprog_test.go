//go:build linux

package capture

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/cilium/ebpf"
)

// TestHeaderProgramRecords runs the kernel program on crafted frames
// (BPF_PROG_TEST_RUN) and reads what it wrote: a request whole, a short
// answer whole, a long answer cut to its headers and head and its tail,
// nothing for another port; a client's handshake response asking for
// compression puts its connection in the full map, whose long answers are
// then whole, and only that connection's.
func TestHeaderProgramRecords(t *testing.T) {
	e := openTestEBPF(t, LiveOptions{Options: Options{Ports: []uint16{3306}}, RingMB: 4})
	long := bytes.Repeat([]byte("abcdefghij"), 300)
	for _, addrs := range [][3]string{
		{"10.0.0.1:40000", "10.0.0.1:40002", "10.0.0.2:3306"},
		{"[fd00::1]:40000", "[fd00::1]:40002", "[fd00::2]:3306"},
	} {
		plain, compressed := newConv(addrs[0], addrs[2]), newConv(addrs[1], addrs[2])
		other := newConv(addrs[0], addrs[2])
		other.srv = netip.AddrPortFrom(other.srv.Addr(), 5432)
		compressedResponse := handshakeResponse()
		compressedResponse[4] |= capCompress
		segs := []seg{
			plain.fromClient(long[:300]),
			plain.fromServer(long[:500]),
			plain.fromServer(long),
			other.fromServer(long),
			compressed.fromServer(long),
			compressed.fromClient(compressedResponse),
			compressed.fromServer(long),
			plain.fromServer(long),
		}
		wantCut := []bool{false, false, true, true, false, false, true}
		for _, s := range segs {
			runProgram(t, e, frame(linkEthernet, s))
		}
		got := records(t, e)
		if len(got) != len(wantCut) {
			t.Fatalf("%s: %d records, want %d (not the other port's)", addrs[2], len(got), len(wantCut))
		}
		kept := append(segs[:3:3], segs[4:]...)
		for i, p := range got {
			s := kept[i]
			if p.cut() != wantCut[i] || p.size != len(s.payload) || p.seq != s.seq || p.src.port != s.src.Port() {
				t.Errorf("record %d: cut %v size %d seq %d port %d; want cut %v, %d bytes, seq %d, port %d",
					i, p.cut(), p.size, p.seq, p.src.port, wantCut[i], len(s.payload), s.seq, s.src.Port())
				continue
			}
			switch {
			case p.cut() && (!bytes.Equal(p.payload, s.payload[:headBytes]) || !bytes.Equal(p.tail, s.payload[len(s.payload)-tailBytes:])):
				t.Errorf("record %d: head or tail differs", i)
			case !p.cut() && !bytes.Equal(p.payload, s.payload):
				t.Errorf("record %d: payload differs", i)
			}
		}
		var v uint32
		if err := e.full.Lookup(fullKeyOf(endpointOf(compressed.cli), endpointOf(compressed.srv)), &v); err != nil {
			t.Errorf("the compressed connection is not in the full map: %v", err)
		}
		if err := e.full.Lookup(fullKeyOf(endpointOf(plain.cli), endpointOf(plain.srv)), &v); err == nil {
			t.Error("the plain connection is in the full map")
		}
	}
	if d := e.ring.Dropped(); d != 0 {
		t.Errorf("%d records dropped", d)
	}
}

// TestHeaderProgramClsact: on a kernel without tcx the program runs as a
// clsact filter: forced here, it captures lo's traffic on the port (the
// request whole, the echoed answer cut), and its filter is gone after
// Close.
func TestHeaderProgramClsact(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("a clsact filter needs CAP_NET_ADMIN (root)")
	}
	if _, err := exec.LookPath("tc"); err != nil {
		t.Fatal("tc (iproute2) is not installed")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	e, err := openEBPF("lo", LiveOptions{Options: Options{Ports: []uint16{port}}, RingMB: 4}, true)
	if err != nil {
		t.Fatal(err)
	}
	if e.ring.Hook != "clsact" {
		t.Errorf("hook %q, want clsact", e.ring.Hook)
	}
	payload := bytes.Repeat([]byte("x"), 3000)
	echo(t, ln, payload)
	time.Sleep(20 * time.Millisecond)
	var whole, cut int
	e.ring.Each(recordHeader, func(rec []byte) {
		var p packet
		if decodeRecord(rec, headBytes, 0, &p) != resultTCP || p.size != len(payload) {
			return
		}
		if p.cut() {
			cut++
		} else if bytes.Equal(p.payload, payload) {
			whole++
		}
	})
	e.Close()
	if whole != 1 || cut != 1 {
		t.Errorf("%d whole requests, %d cut answers of 3000 bytes; want 1 each", whole, cut)
	}
	out, err := exec.Command("tc", "filter", "show", "dev", "lo", "egress").CombinedOutput()
	if err != nil || bytes.Contains(out, []byte("gapscope")) {
		t.Errorf("after Close: %v\n%s", err, out)
	}
}

func endpointOf(a netip.AddrPort) endpoint { return endpoint{ip: a.Addr().As16(), port: a.Port()} }

// TestBPFRingWraps: records that wrap past the ring buffer's end (mapped
// once) read whole, in order, through several turns of a 1 MiB ring.
func TestBPFRingWraps(t *testing.T) {
	e := openTestEBPF(t, LiveOptions{Options: Options{Ports: []uint16{3306}}, RingMB: 1})
	c := newConv("10.0.0.1:40000", "10.0.0.2:3306")
	read, wrapped := 0, 0
	for i := range 1500 {
		payload := bytes.Repeat([]byte{byte(i)}, 2000+i%700) // records of varying class and size
		s := c.fromClient(payload)
		if _, err := e.ring.prog.Run(&ebpf.RunOptions{Data: frame(linkEthernet, s)}); err != nil {
			t.Fatal(err)
		}
		e.ring.Each(recordHeader, func(rec []byte) {
			var p packet
			if r := decodeRecord(rec, headBytes, 0, &p); r != resultTCP || !bytes.Equal(p.payload, payload) {
				t.Fatalf("record %d: %v, %d bytes", i, r, len(p.payload))
			}
			if len(e.ring.wrapped) > 0 && &rec[0] == &e.ring.wrapped[0] {
				wrapped++
			}
			read++
		})
	}
	if read != 1500 || wrapped == 0 {
		t.Errorf("%d records read, %d of them wrapped; want 1500, some wrapped", read, wrapped)
	}
}

// withOptions inserts ipOpts bytes of IPv4 options (NOPs) and tcpOpts of
// TCP options (NOPs, then a timestamp as Linux sends on every segment)
// into an Ethernet frame of IPv4 and TCP headers without options.
func withOptions(f []byte, ipOpts, tcpOpts int) []byte {
	const l2 = 14
	ip, tcp := f[l2:l2+20], f[l2+20:l2+40]
	out := append([]byte(nil), f[:l2]...)
	out = append(out, ip...)
	out = append(out, bytes.Repeat([]byte{1}, ipOpts)...) // NOP
	out = append(out, tcp...)
	if tcpOpts > 0 {
		out = append(out, bytes.Repeat([]byte{1}, tcpOpts-10)...)
		out = append(out, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2) // TSval 1, TSecr 2
	}
	out = append(out, f[l2+40:]...)
	h := out[l2:]
	h[0] = 0x40 | byte((20+ipOpts)/4)
	binary.BigEndian.PutUint16(h[2:], uint16(len(h)))
	h[20+ipOpts+12] = byte((20+tcpOpts)/4) << 4
	return out
}

// The program reads an IPv4 header without options and the TCP header in
// one load, and takes a second for the TCP header after IPv4 options:
// either way a request is copied whole and a long answer cut at the
// payload's true start, TCP options or not; a packet too short to be TCP
// over IPv4 passes without a record.
func TestHeaderProgramHeaderLayouts(t *testing.T) {
	e := openTestEBPF(t, LiveOptions{Options: Options{Ports: []uint16{3306}}, RingMB: 4})
	long := bytes.Repeat([]byte("0123456789"), 300)
	c := newConv("10.0.0.1:40000", "10.0.0.2:3306")
	layouts := [][2]int{{0, 0}, {0, 12}, {4, 0}, {8, 12}}
	var sent []seg
	for _, l := range layouts {
		for _, s := range []seg{c.fromClient(long[:300]), c.fromServer(long)} {
			runProgram(t, e, withOptions(frame(linkEthernet, s), l[0], l[1]))
			sent = append(sent, s)
		}
	}
	udp := make([]byte, 14+28) // IPv4 and UDP headers, no payload
	binary.BigEndian.PutUint16(udp[12:], 0x0800)
	udp[14], udp[14+9] = 0x45, 17
	runProgram(t, e, udp)
	got := records(t, e)
	if len(got) != len(sent) {
		t.Fatalf("%d records, want %d (none for the UDP packet)", len(got), len(sent))
	}
	for i, p := range got {
		s, l := sent[i], layouts[i/2]
		wantCut := i%2 == 1
		switch {
		case p.cut() != wantCut || p.size != len(s.payload) || p.seq != s.seq:
			t.Errorf("options %v, record %d: cut %v, %d bytes, seq %d; want cut %v, %d, %d", l, i, p.cut(), p.size, p.seq, wantCut, len(s.payload), s.seq)
		case wantCut && (!bytes.Equal(p.payload, s.payload[:headBytes]) || !bytes.Equal(p.tail, s.payload[len(s.payload)-tailBytes:])):
			t.Errorf("options %v, record %d: head or tail differs", l, i)
		case !wantCut && !bytes.Equal(p.payload, s.payload):
			t.Errorf("options %v, record %d: payload differs", l, i)
		}
	}
}

// The reader's wake-up flag: a packet of another port leaves it set, the
// next record of the port clears it (waking the reader), and a record
// with the flag clear leaves it so.
func TestHeaderProgramWakesAfterASleep(t *testing.T) {
	e := openTestEBPF(t, LiveOptions{Options: Options{Ports: []uint16{3306}}, RingMB: 4})
	c := newConv("10.0.0.1:40000", "10.0.0.2:3306")
	other := newConv("10.0.0.1:40000", "10.0.0.2:5432")
	flag := func() uint32 {
		var v uint32
		if err := e.wake.Lookup(uint32(0), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	run := func(s seg) { runProgram(t, e, frame(linkEthernet, s)) }
	e.setWake(1)
	run(other.fromClient([]byte("SELECT 1")))
	if flag() != 1 {
		t.Fatal("a packet of another port cleared the flag")
	}
	run(c.fromClient([]byte("SELECT 1")))
	if flag() != 0 {
		t.Fatal("the port's record left the flag set: the reader would sleep on")
	}
	run(c.fromClient([]byte("SELECT 2")))
	if flag() != 0 {
		t.Fatal("a record set the flag")
	}
	n := e.ring.Each(recordHeader, func([]byte) {})
	if n != 2 {
		t.Errorf("%d records, want 2", n)
	}
}

// runProgram runs the kernel program once on frame (BPF_PROG_TEST_RUN); it
// must pass the packet on.
func runProgram(t *testing.T, e *EBPF, frame []byte) {
	t.Helper()
	if ret, err := e.ring.prog.Run(&ebpf.RunOptions{Data: frame}); err != nil || int32(ret) != tcNext {
		t.Fatalf("running the program: %d, %v", int32(ret), err)
	}
}

// records reads what the program wrote, each record decoded and copied.
func records(t *testing.T, e *EBPF) []packet {
	t.Helper()
	var got []packet
	e.ring.Each(recordHeader, func(rec []byte) {
		var p packet
		if r := decodeRecord(rec, headBytes, 0, &p); r != resultTCP {
			t.Errorf("record of %d bytes: %v", len(rec), r)
			return
		}
		p.payload, p.tail = bytes.Clone(p.payload), bytes.Clone(p.tail)
		got = append(got, p)
	})
	return got
}

// TestHeaderProgramWakeThreshold: a flag above 1 is a wake threshold the
// program keeps: records below it leave a sleeping reader asleep, the
// record that brings the waiting bytes to it wakes the reader, and the
// records after it do not until the reader rearms.
func TestHeaderProgramWakeThreshold(t *testing.T) {
	e := openTestEBPF(t, LiveOptions{Options: Options{Ports: []uint16{3306}}, RingMB: 4})
	c := newConv("10.0.0.1:40000", "10.0.0.2:3306")
	const threshold = 4096
	e.setWake(threshold)
	flag := func() uint32 {
		var v uint32
		if err := e.wake.Lookup(uint32(0), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	// waitWhile runs records while the reader waits up to d, and returns
	// how long it waited (the records start once it surely sleeps). On a
	// host so busy that the reader had not begun its wait 200 ms later,
	// it would find the records already there and return at once, which
	// says nothing of the program: the ring is emptied, the wake latch put
	// back as it was, and the step run again.
	waitWhile := func(d time.Duration, payloads ...[]byte) time.Duration {
		latch := make([]byte, 4)
		if _, err := e.wakeMem.ReadAt(latch, wakeLatchOffset); err != nil {
			t.Fatal(err)
		}
		for {
			began := make(chan time.Time, 1)
			done := make(chan time.Duration)
			go func() {
				start := time.Now()
				began <- start
				e.ring.Wait(d)
				done <- time.Since(start)
			}()
			time.Sleep(200 * time.Millisecond)
			sent := time.Now()
			for _, p := range payloads {
				runProgram(t, e, frame(linkEthernet, c.fromClient(p)))
			}
			waited := <-done
			if (<-began).Before(sent) {
				return waited
			}
			e.ring.Each(recordHeader, func([]byte) {})
			if _, err := e.wakeMem.WriteAt(latch, wakeLatchOffset); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := waitWhile(time.Second, []byte("SELECT 1"), []byte("SELECT 2")); got < time.Second {
		t.Errorf("two short records, below the threshold, woke the reader after %v", got)
	}
	if flag() != threshold {
		t.Fatalf("flag %d after records below the threshold, want it kept", flag())
	}
	e.ring.Each(recordHeader, func([]byte) {})
	big := bytes.Repeat([]byte("x"), 900) // a request is copied whole: 5 of them pass 4 KiB
	if got := waitWhile(10*time.Second, big, big, big, big, big); got >= 10*time.Second {
		t.Error("the records passing the threshold did not wake the reader")
	}
	if flag() != threshold {
		t.Errorf("flag %d after the wake, want the threshold kept", flag())
	}
	// One wake per crossing: until the reader has run again (rearmWake,
	// before its next wait) more records past the threshold leave it
	// asleep; after it, the next record wakes it again.
	e.ring.Each(recordHeader, func([]byte) {})
	if got := waitWhile(500*time.Millisecond, big, big, big, big, big); got < 500*time.Millisecond {
		t.Errorf("records past the threshold again woke the reader after %v, before it rearmed", got)
	}
	e.ring.Each(recordHeader, func([]byte) {})
	e.rearmWake()
	if got := waitWhile(10*time.Second, big, big, big, big, big); got >= 10*time.Second {
		t.Error("a record past the threshold after the reader rearmed did not wake it")
	}
}
