package mysqlproto

import (
	"bytes"
	"compress/flate"
	"errors"
	"io"
)

// packet is one MySQL packet as a framer delivers it.
type packet struct {
	payload []byte // the payload, or its first bytes when the decoder kept only a prefix
	length  int    // payload length from the header
	seq     byte
	first   int64 // capture time of the packet's first byte
	last    int64 // capture time of its last byte
	wire    int64 // wire bytes attributed to the packet (headers included)
}

// bigBuffer is the capacity above which a framer lets a buffer go after
// use, so that one 16 MiB payload does not pin memory for the connection's
// lifetime.
const bigBuffer = 1 << 20

// framer splits one direction's bytes into MySQL packets. A packet wholly
// inside the fed slice is delivered in place; only a packet split across
// feeds is copied, and then only the prefix the decoder wants to keep.
type framer struct {
	hdr    [4]byte
	hdrN   int
	length int
	need   int // payload bytes still to come
	keep   int // payload bytes to retain
	buf    []byte
	first  int64
}

func (f *framer) reset() {
	f.hdrN, f.need = 0, 0
	f.buf = f.buf[:0]
}

// feed frames data, delivering each packet to the stream's decoder. It
// returns how many bytes it consumed: all of them unless the decoder switched
// the stream to the compressed protocol (outer framer only) or reset it.
func (f *framer) feed(s *stream, data []byte, tsFirst, tsLast int64, inner bool) int {
	gen := s.gen
	consumed := 0
	for len(data) > 0 {
		if f.hdrN == 0 && !inner && s.dir == ServerToClient {
			if n := s.d.skipRows(data, tsFirst, tsLast); n > 0 {
				data, consumed = data[n:], consumed+n
				continue
			}
		}
		if f.hdrN == 0 && len(data) >= 4 {
			n := 4 + le24(data)
			if n <= len(data) {
				s.deliver(packet{payload: data[4:n], length: n - 4, seq: data[3],
					first: tsFirst, last: tsLast, wire: s.wireFor(n, inner)})
				data, consumed = data[n:], consumed+n
				if s.gen != gen || (!inner && s.compressed) {
					return consumed
				}
				continue
			}
		}
		n, done := f.partial(s, data, tsFirst, tsLast, inner)
		data, consumed = data[n:], consumed+n
		if done && (s.gen != gen || (!inner && s.compressed)) {
			return consumed
		}
	}
	return consumed
}

// partial consumes bytes of a packet that is split across feeds; done
// reports whether it completed (and delivered) one.
func (f *framer) partial(s *stream, data []byte, tsFirst, tsLast int64, inner bool) (int, bool) {
	used := 0
	if f.hdrN < 4 {
		if f.hdrN == 0 {
			f.first = tsFirst
		}
		n := copy(f.hdr[f.hdrN:], data)
		f.hdrN += n
		used = n
		if f.hdrN < 4 {
			return used, false
		}
		f.length = le24(f.hdr[:])
		f.need = f.length
		f.keep = s.keepFor(f.length)
		f.buf = f.buf[:0]
		data = data[n:]
	}
	take := min(f.need, len(data))
	if room := f.keep - len(f.buf); room > 0 {
		f.buf = append(f.buf, data[:min(take, room)]...)
	}
	f.need -= take
	used += take
	if f.need > 0 {
		return used, false
	}
	f.hdrN = 0
	s.deliver(packet{payload: f.buf, length: f.length, seq: f.hdr[3],
		first: f.first, last: tsLast, wire: s.wireFor(4+f.length, inner)})
	if cap(f.buf) > bigBuffer {
		f.buf = nil
	}
	return used, true
}

// zframer undoes the compressed protocol: 7-byte headers (compressed
// length, sequence, uncompressed length) around zlib data, or around raw
// data when the uncompressed length is 0. The result feeds an inner framer,
// since one compressed packet may hold several MySQL packets or part of one.
type zframer struct {
	hdr   [7]byte
	hdrN  int
	clen  int
	ulen  int
	need  int
	buf   []byte
	first int64
	out   []byte
	src   bytes.Reader
	fr    io.ReadCloser // raw DEFLATE reader, reset per packet
	inner framer
}

func (z *zframer) reset() {
	z.hdrN, z.need = 0, 0
	z.buf = z.buf[:0]
	z.inner.reset()
}

// maxInflated bounds the uncompressed length a header may announce.
const maxInflated = maxPacket + 4

func (z *zframer) feed(s *stream, data []byte, ts int64) int {
	gen := s.gen
	consumed := 0
	for len(data) > 0 && s.gen == gen {
		if z.hdrN == 0 && len(data) >= 7 {
			n := 7 + le24(data)
			if n <= len(data) {
				s.zwire += int64(n)
				z.unpack(s, data[7:n], le24(data[4:]), ts, ts)
				data, consumed = data[n:], consumed+n
				continue
			}
		}
		n := z.partial(s, data, ts)
		data, consumed = data[n:], consumed+n
	}
	if s.gen != gen {
		return consumed + len(data)
	}
	return consumed
}

func (z *zframer) partial(s *stream, data []byte, ts int64) int {
	used := 0
	if z.hdrN < 7 {
		if z.hdrN == 0 {
			z.first = ts
		}
		n := copy(z.hdr[z.hdrN:], data)
		z.hdrN += n
		used = n
		if z.hdrN < 7 {
			return used
		}
		z.clen, z.ulen = le24(z.hdr[:]), le24(z.hdr[4:])
		z.need = z.clen
		z.buf = z.buf[:0]
		data = data[n:]
	}
	take := min(z.need, len(data))
	z.buf = append(z.buf, data[:take]...)
	z.need -= take
	used += take
	if z.need > 0 {
		return used
	}
	z.hdrN = 0
	s.zwire += int64(7 + z.clen)
	z.unpack(s, z.buf, z.ulen, z.first, ts)
	if cap(z.buf) > bigBuffer {
		z.buf = nil
	}
	return used
}

var errInflate = errors.New("compressed packet does not inflate to its announced length")

// unpack inflates one compressed packet's payload and frames the result.
func (z *zframer) unpack(s *stream, payload []byte, ulen int, tsFirst, tsLast int64) {
	if ulen == 0 {
		z.inner.feed(s, payload, tsFirst, tsLast, true)
		return
	}
	out, err := z.inflate(payload, ulen)
	if err != nil {
		s.d.lostFraming(noteBadCompressed)
		return
	}
	z.inner.feed(s, out, tsFirst, tsLast, true)
	if cap(z.out) > bigBuffer {
		z.out = nil
	}
}

// inflate undoes zlib framing by hand: a 2-byte header, DEFLATE data and
// an Adler-32 trailer we do not verify. compress/zlib would allocate a
// checksum state on every Reset; DEFLATE itself rejects corrupt data.
func (z *zframer) inflate(payload []byte, ulen int) ([]byte, error) {
	// DEFLATE expands at most 1032:1; a larger claim is corrupt and must not
	// make us allocate 16 MiB.
	if ulen > maxInflated || ulen > 1032*len(payload)+64 || len(payload) < 2 || payload[0]&0x0f != 8 ||
		(uint16(payload[0])<<8|uint16(payload[1]))%31 != 0 || payload[1]&0x20 != 0 {
		return nil, errInflate
	}
	z.src.Reset(payload[2:])
	if z.fr == nil {
		z.fr = flate.NewReader(&z.src)
	} else if err := z.fr.(flate.Resetter).Reset(&z.src, nil); err != nil {
		return nil, err
	}
	if cap(z.out) < ulen {
		z.out = make([]byte, ulen)
	}
	z.out = z.out[:ulen]
	if _, err := io.ReadFull(z.fr, z.out); err != nil {
		return nil, errInflate
	}
	return z.out, nil
}

// stream is one direction of a connection.
type stream struct {
	d          *ConnDecoder
	dir        Direction
	compressed bool
	plain      framer
	z          zframer
	zwire      int64  // compressed wire bytes not yet attributed to a packet
	gen        uint32 // bumped on reset so that framers drop stale bytes
}

func (s *stream) reset() {
	s.plain.reset()
	s.z.reset()
	s.zwire = 0
	s.gen++
}

func (s *stream) feed(data []byte, ts int64) {
	gen := s.gen
	for len(data) > 0 && s.gen == gen {
		var n int
		if s.compressed {
			n = s.z.feed(s, data, ts)
		} else {
			n = s.plain.feed(s, data, ts, ts, false)
		}
		data = data[n:]
	}
}

// wireFor attributes wire bytes to a packet: its own size in the plain
// protocol, the compressed bytes received since the last packet otherwise.
func (s *stream) wireFor(n int, inner bool) int64 {
	if !inner {
		return int64(n)
	}
	w := s.zwire
	s.zwire = 0
	return w
}

func (s *stream) keepFor(length int) int { return s.d.keepFor(s.dir, length) }

func (s *stream) deliver(p packet) { s.d.onPacket(s.dir, &p) }
