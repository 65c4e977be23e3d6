//go:build linux

package capture

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"golang.org/x/sys/unix"
)

// fakeBlock lays frames out in block b of ring as the kernel does
// (tpacket_block_desc, then tpacket3_hdr + padding + the frame, each at an
// offset the previous one's tp_next_offset gives) and hands it over.
func fakeBlock(ring []byte, blockSize, b int, tsUS []int64, frames [][]byte) {
	base := b * blockSize
	blk := ring[base : base+blockSize]
	clear(blk)
	const first, mac = 64, 66 // offset_to_first_pkt, tp_mac (the kernel aligns as it likes)
	binary.LittleEndian.PutUint32(blk[blockPktsOff:], uint32(len(frames)))
	binary.LittleEndian.PutUint32(blk[blockFirstOff:], first)
	off := first
	for i, f := range frames {
		h := blk[off:]
		size := (mac + len(f) + 15) &^ 15
		if i < len(frames)-1 {
			binary.LittleEndian.PutUint32(h[frameNextOff:], uint32(size))
		}
		binary.LittleEndian.PutUint32(h[frameSecOff:], uint32(tsUS[i]/1_000_000))
		binary.LittleEndian.PutUint32(h[frameNsecOff:], uint32(tsUS[i]%1_000_000*1000+999))
		binary.LittleEndian.PutUint32(h[frameSnapOff:], uint32(len(f)))
		binary.LittleEndian.PutUint16(h[frameMacOff:], mac)
		copy(h[mac:], f)
		off += size
	}
	binary.LittleEndian.PutUint32(blk[blockStatusOff:], unix.TP_STATUS_USER)
}

// TestV3RingReadsBlocksInPlace: the reader returns each handed-over
// block's frames in order with their kernel timestamps, gives a block back
// (TP_STATUS_KERNEL) only at the read after its last frame, so that the
// frame returned last stays valid, says not ready at a block the kernel
// holds, and wraps around the ring.
func TestV3RingReadsBlocksInPlace(t *testing.T) {
	const bs, nb = 4096, 3
	ring := make([]byte, bs*nb)
	r := &v3Ring{ring: ring, blockSize: bs, numBlocks: nb, block: 2} // afpacket stopped at block 2
	if r.ready() {
		t.Fatal("ready before any block was handed over")
	}
	if _, _, ok := r.read(); ok {
		t.Fatal("read a frame from a block the kernel holds")
	}
	fakeBlock(ring, bs, 2, []int64{1_700_000_000_000_001, 1_700_000_000_000_002}, [][]byte{[]byte("first"), []byte("second frame")})
	fakeBlock(ring, bs, 0, []int64{1_700_000_000_000_003}, [][]byte{bytes.Repeat([]byte{7}, 1500)})
	fakeBlock(ring, bs, 1, nil, nil) // a block retired empty
	if !r.ready() {
		t.Fatal("not ready with block 2 handed over")
	}
	want := []struct {
		frame []byte
		ts    int64
	}{{[]byte("first"), 1_700_000_000_000_001}, {[]byte("second frame"), 1_700_000_000_000_002}, {bytes.Repeat([]byte{7}, 1500), 1_700_000_000_000_003}}
	for i, w := range want {
		f, ts, ok := r.read()
		if !ok || !bytes.Equal(f, w.frame) || ts != w.ts {
			t.Fatalf("frame %d: %q at %d (%v), want %q at %d", i, f, ts, ok, w.frame, w.ts)
		}
		if i == 1 && binary.LittleEndian.Uint32(ring[2*bs+blockStatusOff:]) != unix.TP_STATUS_USER {
			t.Fatal("block 2 given back while its last frame was being read")
		}
	}
	if _, _, ok := r.read(); ok {
		t.Fatal("a frame past the handed-over blocks")
	}
	for b := range nb {
		if st := binary.LittleEndian.Uint32(ring[b*bs+blockStatusOff:]); st != unix.TP_STATUS_KERNEL {
			t.Errorf("block %d status %d after reading it, want it given back", b, st)
		}
	}
	if r.block != 2 || r.ready() {
		t.Errorf("after one turn the reader waits at block %d (ready %v), want block 2, not ready", r.block, r.ready())
	}
	fakeBlock(ring, bs, 2, []int64{1_700_000_000_000_009}, [][]byte{[]byte("again")})
	if f, _, ok := r.read(); !ok || string(f) != "again" {
		t.Fatalf("after wrapping: %q %v", f, ok)
	}
}

// TestLiveWaitsOnRingMemory: a live capture's wait for the ring tests
// the ring's memory (v3Ring.ready), not the socket: the readyWaiter has
// the reader's test, and a capture still sees a statement end to end.
func TestLiveWaitsOnRingMemory(t *testing.T) {
	ln, port := liveListener(t)
	live, err := OpenLive("lo", LiveOptions{Options: Options{Ports: []uint16{port}}})
	if err != nil {
		t.Skipf("no live capture here: %v", err)
	}
	if live.rd == nil || live.ready.readable == nil {
		t.Fatal("the live capture reads its ring through afpacket's polling read")
	}
	tally := newFrameTally(port)
	live.tap = tally.add
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := live.Run(ctx, func(*event.Statement) {}); err != nil {
			t.Error(err)
		}
	}()
	echoOnce(t, ln)
	select {
	case <-tally.echoed:
	case <-time.After(10 * time.Second):
		t.Error("echo reply not captured within 10 s")
	}
	cancel()
	<-done
}
