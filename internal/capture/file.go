package capture

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// checkEvery is how many packets pass between context and progress checks.
const checkEvery = 4096

// ReadFile decodes a pcap or pcapng capture (optionally gzip-compressed) and
// calls emit for every statement, on the calling goroutine. A truncated or
// partly corrupt file keeps what was decoded and says so in Stats.Notes.
// On cancellation it stops reading, closes open connections and returns
// ctx.Err() with the statistics so far.
func ReadFile(ctx context.Context, path string, opts Options, emit func(*event.Statement)) (Stats, error) {
	return ReadFiles(ctx, []string{path}, opts, emit)
}

// ReadFiles reads captures one after the other through one tracker, so a
// connection that spans rotated files (tcpdump -C/-G) stays one connection.
func ReadFiles(ctx context.Context, paths []string, opts Options, emit func(*event.Statement)) (Stats, error) {
	t := NewTracker(opts, emit)
	t.portsSeen = map[uint16]int64{}
	err := t.readFiles(ctx, paths)
	st := t.Stats()
	st.PortsSeen = t.portsSeen
	return st, err
}

// readFiles reads paths in order, then closes every connection.
func (t *Tracker) readFiles(ctx context.Context, paths []string) error {
	prog := newProgress(t.opts.Progress, paths)
	var err error
	for _, p := range paths {
		if err = t.readFile(ctx, p, prog); err != nil {
			break
		}
	}
	t.Close(t.nowUS)
	prog.finish()
	return err
}

// packetReader is what pcapgo's two readers have in common.
type packetReader interface {
	ZeroCopyReadPacketData() ([]byte, gopacket.CaptureInfo, error)
}

// readFile feeds one file's packets to the tracker.
func (t *Tracker) readFile(ctx context.Context, path string, prog *progress) error {
	f, err := openCapture(path)
	if err != nil {
		return fmt.Errorf("opening capture: %w", err)
	}
	defer f.Close()
	cr := &countingReader{r: f}
	prog.file(cr)
	r, linkOf, err := openReader(bufio.NewReaderSize(cr, 1<<20))
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	return t.readPackets(ctx, path, r, linkOf, prog)
}

// openCapture opens a capture file, "-" meaning standard input (a pcap
// stream: tcpdump -w - | gapscope analyze -).
func openCapture(path string) (io.ReadCloser, error) {
	if path == "-" {
		return io.NopCloser(os.Stdin), nil
	}
	return os.Open(path)
}

func (t *Tracker) readPackets(ctx context.Context, path string, r packetReader, linkOf func(gopacket.CaptureInfo) layers.LinkType, prog *progress) error {
	var n int64
	for {
		data, ci, err := r.ZeroCopyReadPacketData()
		if err != nil {
			t.endOfFile(path, n, err)
			return nil
		}
		n++
		t.Packet(linkOf(ci), ci.Timestamp.UnixMicro(), data)
		if n%checkEvery == 0 {
			prog.update()
			if err := ctx.Err(); err != nil {
				return err
			}
		}
	}
}

// endOfFile turns the error that ended a file into a note unless it is a
// clean end.
func (t *Tracker) endOfFile(path string, packets int64, err error) {
	switch {
	case errors.Is(err, io.EOF):
	case errors.Is(err, io.ErrUnexpectedEOF):
		t.AddNote("%s: file truncated after %d packet(s); the last one is incomplete", path, packets)
	default:
		t.AddNote("%s: stopped reading after %d packet(s): %v", path, packets, err)
	}
}

// File magics (first four bytes, as little-endian uint32).
const (
	magicPcapMicro   = 0xa1b2c3d4
	magicPcapNano    = 0xa1b23c4d
	magicPcapMicroBE = 0xd4c3b2a1
	magicPcapNanoBE  = 0x4d3cb2a1
	magicPcapNG      = 0x0a0d0d0a
)

// openReader sniffs gzip, pcap or pcapng and returns a reader and a way to
// learn each packet's link type.
func openReader(br *bufio.Reader) (packetReader, func(gopacket.CaptureInfo) layers.LinkType, error) {
	head, err := br.Peek(4)
	if len(head) == 0 && (err == io.EOF || err == nil) {
		return nil, nil, ErrEmptyFile
	}
	if len(head) >= 2 && head[0] == 0x1f && head[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, nil, fmt.Errorf("gzip: %w", err)
		}
		return openReader(bufio.NewReaderSize(zr, 1<<20))
	}
	if len(head) < 4 {
		return nil, nil, fmt.Errorf("%w (only %d bytes)", ErrNotCapture, len(head))
	}
	switch Format(head) {
	case "pcap":
		return openPcap(br)
	case "pcapng":
		return openPcapNG(br)
	}
	return nil, nil, fmt.Errorf("%w (starts with % x)", ErrNotCapture, head)
}

// Format names the capture format of a file that starts with head: "pcap"
// (either byte order, µs or ns), "pcapng", or "" for neither. It does not
// look through gzip; the commands use it to say what a file is.
func Format(head []byte) string {
	if len(head) < 4 {
		return ""
	}
	switch binary.LittleEndian.Uint32(head) {
	case magicPcapMicro, magicPcapNano, magicPcapMicroBE, magicPcapNanoBE:
		return "pcap"
	case magicPcapNG:
		return "pcapng"
	}
	return ""
}

func openPcap(br *bufio.Reader) (packetReader, func(gopacket.CaptureInfo) layers.LinkType, error) {
	r, err := pcapgo.NewReader(br)
	if err != nil {
		return nil, nil, headerError("pcap", err)
	}
	lt := r.LinkType()
	if !SupportedLinkType(lt) {
		return nil, nil, &UnsupportedLinkTypeError{LinkType: uint32(lt)}
	}
	return r, func(gopacket.CaptureInfo) layers.LinkType { return lt }, nil
}

func openPcapNG(br *bufio.Reader) (packetReader, func(gopacket.CaptureInfo) layers.LinkType, error) {
	// Mixed link types: each interface block has its own, so a file from
	// several interfaces (dumpcap -i any -i eth0) loses nothing.
	r, err := pcapgo.NewNgReader(br, pcapgo.NgReaderOptions{WantMixedLinkType: true, SkipUnknownVersion: true})
	if err != nil {
		return nil, nil, headerError("pcapng", err)
	}
	if lt := r.LinkType(); !SupportedLinkType(lt) && r.NInterfaces() == 1 {
		return nil, nil, &UnsupportedLinkTypeError{LinkType: uint32(lt)}
	}
	linkOf := func(ci gopacket.CaptureInfo) layers.LinkType {
		if len(ci.AncillaryData) > 0 {
			if lt, ok := ci.AncillaryData[0].(layers.LinkType); ok {
				return lt
			}
		}
		return r.LinkType()
	}
	return r, linkOf, nil
}

// headerError explains a file whose header cannot be read.
func headerError(format string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%s header truncated: %w", format, err)
	}
	return fmt.Errorf("%s header: %w", format, err)
}

// countingReader counts bytes read from the file, for progress.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// progress reports bytes read across all files.
type progress struct {
	fn    func(done, total int64)
	total int64
	prior int64 // bytes of files already read
	cur   *countingReader
}

func newProgress(fn func(done, total int64), paths []string) *progress {
	p := &progress{fn: fn}
	if fn == nil {
		return p
	}
	for _, path := range paths {
		if st, err := os.Stat(path); err == nil {
			p.total += st.Size()
		}
	}
	return p
}

func (p *progress) file(cr *countingReader) {
	if p.cur != nil {
		p.prior += p.cur.n
	}
	p.cur = cr
	p.update()
}

func (p *progress) update() {
	if p.fn != nil && p.cur != nil {
		p.fn(p.prior+p.cur.n, p.total)
	}
}

func (p *progress) finish() {
	if p.fn != nil {
		p.fn(p.total, p.total)
	}
}
