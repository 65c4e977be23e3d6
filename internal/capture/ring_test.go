//go:build linux

package capture

import (
	"errors"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/afpacket"
	"golang.org/x/net/bpf"
)

// fakeRing is a ring whose kernel side is a queue of frames: each frame
// enqueued while a filter is attached must pass it (as in the kernel), and
// frames enqueued before any filter stay queued until read.
type fakeRing struct {
	queued  [][]byte
	filter  *bpf.VM
	log     []string // SetBPF and read calls, in order
	readErr error
	setErr  error
}

func (r *fakeRing) SetBPF(f []bpf.RawInstruction) error {
	if r.setErr != nil {
		return r.setErr
	}
	if reflect.DeepEqual(f, rejectAll) {
		r.log = append(r.log, "rejectAll")
	} else {
		r.log = append(r.log, "filter")
	}
	ins, ok := bpf.Disassemble(f)
	if !ok {
		return errors.New("filter does not disassemble")
	}
	vm, err := bpf.NewVM(ins)
	r.filter = vm
	return err
}

// arrive is a frame reaching the socket now.
func (r *fakeRing) arrive(frame []byte) {
	if r.filter != nil {
		if n, _ := r.filter.Run(frame); n == 0 {
			return
		}
	}
	r.queued = append(r.queued, frame)
}

func (r *fakeRing) ZeroCopyReadPacketData() ([]byte, gopacket.CaptureInfo, error) {
	if r.readErr != nil {
		return nil, gopacket.CaptureInfo{}, r.readErr
	}
	if len(r.queued) == 0 {
		r.log = append(r.log, "timeout")
		return nil, gopacket.CaptureInfo{}, afpacket.ErrTimeout
	}
	f := r.queued[0]
	r.queued = r.queued[1:]
	r.log = append(r.log, "read")
	return f, gopacket.CaptureInfo{CaptureLength: len(f)}, nil
}

// wait: the fake kernel hands frames over at once.
func (r *fakeRing) wait(time.Duration) bool { return len(r.queued) > 0 }

func tcpFrame(src, dst string) []byte {
	return frame(linkEthernet, seg{src: netip.MustParseAddrPort(src), dst: netip.MustParseAddrPort(dst),
		flags: tcpACK, wscale: -1, payload: []byte("x")})
}

// TestAttachFilterDiscardsWhatCameBefore: frames of other ports queued while
// the ring was being set up are read and thrown away under rejectAll, and the
// real filter goes on only once the ring is empty.
func TestAttachFilterDiscardsWhatCameBefore(t *testing.T) {
	filter, err := buildFilter([]uint16{3306}, filterEthernet, false)
	if err != nil {
		t.Fatal(err)
	}
	r := &fakeRing{}
	other := tcpFrame("127.0.0.1:40000", "127.0.0.1:5432")
	ours := tcpFrame("127.0.0.1:40001", "127.0.0.1:3306")
	for range 3 { // unfiltered: the window inside NewTPacket
		r.arrive(other)
		r.arrive(other)
	}
	r.arrive(ours)
	n, err := attachFilter(r, filter)
	if err != nil {
		t.Fatal(err)
	}
	if n != 7 {
		t.Errorf("discarded %d frames, want the 7 queued before the filter", n)
	}
	want := []string{"rejectAll", "read", "read", "read", "read", "read", "read", "read", "timeout", "filter"}
	if !reflect.DeepEqual(r.log, want) {
		t.Errorf("calls %v, want %v", r.log, want)
	}
	r.arrive(other)
	r.arrive(ours)
	if got, _, err := r.ZeroCopyReadPacketData(); err != nil || !reflect.DeepEqual(got, ours) {
		t.Errorf("after attachFilter read %x %v, want only the server-port frame", got, err)
	}
	if len(r.queued) != 0 {
		t.Errorf("%d frames left, want none", len(r.queued))
	}
}

func TestRejectAllRejects(t *testing.T) {
	vm, err := bpf.NewVM(disassemble(t, rejectAll))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := vm.Run(tcpFrame("127.0.0.1:40001", "127.0.0.1:3306")); n != 0 || err != nil {
		t.Errorf("rejectAll kept %d bytes (%v)", n, err)
	}
}

func TestAttachFilterErrors(t *testing.T) {
	filter, _ := buildFilter([]uint16{3306}, filterEthernet, false)
	boom := errors.New("boom")
	if _, err := attachFilter(&fakeRing{setErr: boom}, filter); !errors.Is(err, boom) {
		t.Errorf("SetBPF error: got %v", err)
	}
	r := &fakeRing{readErr: boom}
	if _, err := attachFilter(r, filter); !errors.Is(err, boom) {
		t.Errorf("read error: got %v", err)
	}
	if !reflect.DeepEqual(r.log, []string{"rejectAll"}) {
		t.Errorf("real filter attached after a failed drain: %v", r.log)
	}
}
