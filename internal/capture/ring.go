//go:build linux

package capture

import (
	"errors"
	"fmt"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/afpacket"
	"golang.org/x/net/bpf"
)

// The kernel filter must be the only way a packet reaches the ring. gopacket
// binds the socket to ETH_P_ALL and sets up the ring inside NewTPacket, before
// a filter can be attached, so the ring fills with everything the interface
// carries in between: mapping a 64 MiB ring takes 25-600 ms on a busy host,
// and 25 of 30 opens on a loaded lo here found frames of other connections
// in the ring (up to 24,000), every one twice (loopback hands each packet to
// packet sockets once outgoing, once incoming; the outgoing copy is what the
// filter drops). The tracker counted the second copies as retransmits and
// the other connections as MySQL flows started before the capture.
//
// The fix is libpcap's: attach a filter that accepts nothing, discard what
// the ring already holds, then attach the real filter.

// rejectAll accepts no packet ("ret #0").
var rejectAll = []bpf.RawInstruction{{Op: 0x06, K: 0}}

// filterRing is what attachFilter uses: the ring (*afpacket.TPacket, its
// reads never blocking) and a wait for it to hold a block.
type filterRing interface {
	SetBPF([]bpf.RawInstruction) error
	ZeroCopyReadPacketData() ([]byte, gopacket.CaptureInfo, error)
	wait(d time.Duration) bool
}

// liveRing is a TPacket opened with a zero poll timeout and its waiter.
type liveRing struct {
	*afpacket.TPacket
	w *readyWaiter
}

func (r liveRing) wait(d time.Duration) bool { return r.w.wait(d) }

// maxDrain bounds how long attachFilter discards. With rejectAll attached
// nothing new enters the ring, so a finite ring empties in one pass; the
// bound only guards against a kernel that keeps handing blocks over.
const maxDrain = 5 * time.Second

// drainQuiet is how long an empty ring must stay empty for the drain to
// end: longer than the block timeout.
const drainQuiet = 5 * blockTimeout / 2

// attachFilter installs filter on r so that every packet read afterwards has
// passed it. It returns how many frames were queued before and discarded.
//
// The drain ends when the ring is empty and stays so for drainQuiet: longer
// than its block timeout, after which the kernel hands over the
// partly filled block it was writing, so by then nothing queued before
// rejectAll is left.
func attachFilter(r filterRing, filter []bpf.RawInstruction) (int, error) {
	if err := r.SetBPF(rejectAll); err != nil {
		return 0, err
	}
	n, err := drain(r, time.Now().Add(maxDrain))
	if err != nil {
		return n, err
	}
	return n, r.SetBPF(filter)
}

// drain reads and discards frames until the ring has none left.
func drain(r filterRing, deadline time.Time) (int, error) {
	for n := 0; ; n++ {
		_, _, err := r.ZeroCopyReadPacketData()
		if errors.Is(err, afpacket.ErrTimeout) {
			if !r.wait(drainQuiet) {
				return n, nil
			}
			n-- // nothing was read: the loop counts frames
			continue
		}
		if err != nil {
			return n, fmt.Errorf("discarding frames queued before the filter: %w", err)
		}
		if time.Now().After(deadline) {
			return n, fmt.Errorf("discarding frames queued before the filter: ring still busy after %v (%d frames)", maxDrain, n)
		}
	}
}
