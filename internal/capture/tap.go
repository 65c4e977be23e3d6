//go:build linux

package capture

import (
	"context"
	"fmt"
	"sync/atomic"
)

// TapStats is what a Tap saw.
type TapStats struct {
	Frames      int64 // frames read from the ring
	Bytes       int64 // bytes the kernel copied into the ring (captured lengths)
	KernelDrops int64 // frames the kernel dropped (ring full)
}

// Tap is the ring and kernel filter of a live capture that decodes nothing:
// it measures what the kernel's packet tap costs the host (on loopback it
// runs in the sender's context, so the server pays for it) apart from
// gapscope's own work.
type Tap struct {
	l             *Live
	frames, bytes atomic.Int64
}

// OpenTap opens the same ring and kernel filter as OpenLive. answerSnap > 0
// cuts the frames of server answers to that many bytes in the kernel
// filter, to measure what the copy into the ring costs; a decoding capture
// cannot use it (it frames every byte of an answer).
func OpenTap(iface string, opts LiveOptions, answerSnap int) (*Tap, error) {
	l, err := OpenLive(iface, opts)
	if err != nil {
		return nil, err
	}
	if answerSnap > 0 {
		filter, err := buildFilterSnap(l.opts.Ports, l.flink, l.dropOutgoing, uint32(answerSnap))
		if err == nil {
			err = l.tp.SetBPF(filter)
		}
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("setting the cut filter on %s: %w", iface, err)
		}
	}
	return &Tap{l: l}, nil
}

// Run reads and counts every frame until ctx ends, then closes the ring.
func (t *Tap) Run(ctx context.Context) (TapStats, error) {
	l := t.l
	defer l.Close()
	defer context.AfterFunc(ctx, l.ready.interrupt)()
	for ctx.Err() == nil {
		data, _, ok := l.rd.read()
		if !ok {
			l.ready.wait(idleWait)
			continue
		}
		t.frames.Add(1)
		t.bytes.Add(int64(len(data)))
	}
	st := t.Stats()
	if _, v3, err := l.tp.SocketStats(); err == nil {
		st.KernelDrops = int64(v3.Drops())
	}
	return st, nil
}

// Stats returns the frames and bytes read so far (safe while Run runs).
func (t *Tap) Stats() TapStats {
	return TapStats{Frames: t.frames.Load(), Bytes: t.bytes.Load()}
}
