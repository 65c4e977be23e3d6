//go:build linux

package capture

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
	"unsafe"

	"github.com/gopacket/gopacket/afpacket"
	"golang.org/x/sys/unix"
)

// v3Ring reads the TPACKET_V3 ring afpacket mapped, in place, block by
// block, without a system call: whether the next block is handed over is
// its status word in the ring, so the capture's wake-ups (the readyWaiter
// looks at the same word) and its reads make none. afpacket's own read
// polls the socket (poll(2)) each time it reaches a block the kernel still
// holds, and any system call entered while the process is idle wakes the
// Go runtime's monitor thread from its deep sleep into a millisecond of
// 20 µs wake-ups: under a saturating load, where blocks come every few
// milliseconds, that thread was a sixth of watch's CPU (figures in
// docs/performance.md). afpacket still opens the socket, sizes and maps the
// ring, attaches filters and reads the kernel's counters.
//
// The layout read is the kernel's (linux/if_packet.h): a block starts with
// struct tpacket_block_desc, whose tpacket_hdr_v1 holds block_status (the
// kernel hands a block over by setting TP_STATUS_USER there; the reader
// gives it back by writing TP_STATUS_KERNEL), num_pkts and
// offset_to_first_pkt; each frame starts with struct tpacket3_hdr
// (tp_next_offset, tp_sec, tp_nsec, tp_snaplen, ..., tp_mac).
type v3Ring struct {
	ring      []byte
	blockSize int
	numBlocks int
	block     int // the block being read, or waited for
	// open: the block is handed over and being read; next is the offset
	// in it of the next frame, left the frames not read yet.
	open bool
	next int
	left uint32
}

// Offsets in the kernel's structures.
const (
	blockStatusOff = 8  // tpacket_block_desc.hdr.bh1.block_status
	blockPktsOff   = 12 // num_pkts
	blockFirstOff  = 16 // offset_to_first_pkt
	frameNextOff   = 0  // tpacket3_hdr.tp_next_offset
	frameSecOff    = 4  // tp_sec
	frameNsecOff   = 8  // tp_nsec
	frameSnapOff   = 12 // tp_snaplen
	frameMacOff    = 24 // tp_mac
	frameHdrLen    = 48 // sizeof(struct tpacket3_hdr)
)

// newV3Ring reads tp's mapping and the block it will read next (afpacket
// may have read some already: attachFilter discards what came before the
// filter through it). blockSize is the size tp was opened with.
func newV3Ring(tp *afpacket.TPacket, blockSize int) (*v3Ring, error) {
	v := reflect.ValueOf(tp).Elem()
	ringF, offF := v.FieldByName("ring"), v.FieldByName("offset")
	if !ringF.IsValid() || ringF.Type() != reflect.TypeOf([]byte(nil)) || !offF.IsValid() || offF.Kind() != reflect.Int {
		return nil, errors.New("afpacket.TPacket has no ring mapping or offset field in this version")
	}
	// Reading unexported fields through their address is allowed; the
	// mapping lives until tp.Close.
	ring := *(*[]byte)(unsafe.Pointer(ringF.UnsafeAddr()))
	offset := int(offF.Int())
	if blockSize <= 0 || len(ring) < blockSize || len(ring)%blockSize != 0 {
		return nil, fmt.Errorf("ring of %d bytes is not whole blocks of %d", len(ring), blockSize)
	}
	r := &v3Ring{ring: ring, blockSize: blockSize, numBlocks: len(ring) / blockSize}
	if offset < 0 || offset >= r.numBlocks {
		offset = 0
	}
	r.block = offset
	return r, nil
}

// status is the block's status word, which the kernel writes.
func (r *v3Ring) status(block int) *uint32 {
	return (*uint32)(unsafe.Pointer(&r.ring[block*r.blockSize+blockStatusOff]))
}

// ready reports whether a frame can be read now (the readyWaiter's test).
func (r *v3Ring) ready() bool {
	return r.open || atomic.LoadUint32(r.status(r.block))&unix.TP_STATUS_USER != 0
}

// read returns the next frame and its capture time in Unix microseconds,
// or ok false when the kernel holds the next block. The frame is valid
// until the next read: the block goes back to the kernel then.
func (r *v3Ring) read() (frame []byte, tsUS int64, ok bool) {
	frame, tsNS, ok := r.readNS()
	return frame, tsNS / 1000, ok
}

// readNS is read with the frame's stamp in Unix ns (a growing ring tells
// the packets two rings both got by it).
func (r *v3Ring) readNS() (frame []byte, tsNS int64, ok bool) {
	for {
		if !r.open {
			if atomic.LoadUint32(r.status(r.block))&unix.TP_STATUS_USER == 0 {
				return nil, 0, false
			}
			base := r.block * r.blockSize
			r.left = binary.LittleEndian.Uint32(r.ring[base+blockPktsOff:])
			r.next = int(binary.LittleEndian.Uint32(r.ring[base+blockFirstOff:]))
			r.open = true
		}
		if r.left == 0 {
			r.release()
			continue
		}
		off := r.next
		if off < frameHdrLen || off+frameHdrLen > r.blockSize {
			r.release() // a corrupt offset: give the block back rather than read outside it
			continue
		}
		hdr := r.ring[r.block*r.blockSize+off:][:frameHdrLen]
		snap := int(binary.LittleEndian.Uint32(hdr[frameSnapOff:]))
		mac := int(binary.LittleEndian.Uint16(hdr[frameMacOff:]))
		sec := int64(binary.LittleEndian.Uint32(hdr[frameSecOff:]))
		nsec := int64(binary.LittleEndian.Uint32(hdr[frameNsecOff:]))
		r.left--
		r.next += int(binary.LittleEndian.Uint32(hdr[frameNextOff:]))
		if off+mac+snap > r.blockSize {
			continue // a frame that does not fit its block: skipped
		}
		start := r.block*r.blockSize + off + mac
		return r.ring[start : start+snap : start+snap], sec*1_000_000_000 + nsec, true
	}
}

// release gives the open block back to the kernel and moves to the next.
func (r *v3Ring) release() {
	atomic.StoreUint32(r.status(r.block), unix.TP_STATUS_KERNEL)
	r.open = false
	if r.block++; r.block == r.numBlocks {
		r.block = 0
	}
}
