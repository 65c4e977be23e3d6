package capture

import (
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/mysqlproto"
)

// Answers captured header-only (the eBPF source, ebpfrecord.go): a
// server segment longer than head+tail bytes of payload arrives cut, its
// first and last bytes known and the middle not. The decoder
// (mysqlproto.ConnDecoder) frames a byte stream, so the tracker follows
// the MySQL packet boundaries of each connection's answers itself
// (answerFramer) and hands the decoder only what keeps its framing true:
//
//   - a packet whose header and first payload byte were seen and that
//     spans the middle is completed with zero bytes (the decoder reads a
//     packet's first bytes only: its type, an OK's or ERR's fields; a row
//     is counted by its header): framing, row counts and every header
//     stay exact;
//   - when a packet boundary falls in the middle, framing is lost: the
//     packet in progress is completed (or, when its header was cut, held
//     back), and the decoder waits at a packet boundary. The tail of this
//     and each later segment is searched for the answer's end: a final
//     packet (EOF, OK-as-EOF or ERR: first byte 0xFE or 0xFF) that ends
//     exactly at the segment's end. Found, it is fed, and framing
//     resumes after it. The answer's rows are then unknown (rows 0 and a
//     note on the statement); its bytes are exact (every segment's
//     length is known) and so are its times.
//   - when the client speaks before an end was found (MySQL is half
//     duplex: the answer is over), the statement ends at the last answer
//     segment seen, incomplete as the decoder says, and the connection
//     is switched to full payloads.
//
// Connections whose answers cannot be framed from their heads at all
// (compressed, TLS) are put in the full map by the kernel program from
// the client's handshake flags, or by the tracker when it learns it
// later (a connection opened before the capture).

// answerFramer follows the MySQL packet boundaries of one connection's
// answers as the decoder is fed them.
type answerFramer struct {
	need  int // payload bytes left of the current packet
	hdr   [4]byte
	hdrN  int
	typed bool // the current packet's first payload byte was fed
	// hdrAt is where in the bytes last walked the current packet's header
	// began (-1: before them).
	hdrAt int
	// lost: a packet boundary fell in bytes not captured; the decoder
	// waits at a boundary for the answer's end.
	lost bool
	// skipped counts the answer's bytes not fed to the decoder, for the
	// next statement with an answer; lastUS is the last answer segment's
	// time.
	skipped int64
	lastUS  int64
}

// walk advances over bytes fed to the decoder.
func (a *answerFramer) walk(b []byte) {
	a.hdrAt = -1
	for i := 0; i < len(b); {
		if a.need > 0 {
			n := min(a.need, len(b)-i)
			a.need -= n
			i += n
			a.typed = true
			continue
		}
		if a.hdrN == 0 {
			a.hdrAt = i
			if i+4 <= len(b) { // a whole header here: read in place, not a copy call per row
				a.need, a.typed = int(b[i])|int(b[i+1])<<8|int(b[i+2])<<16, false
				i += 4
				continue
			}
		}
		n := copy(a.hdr[a.hdrN:], b[i:])
		a.hdrN += n
		i += n
		if a.hdrN == 4 {
			a.need, a.hdrN, a.typed = int(a.hdr[0])|int(a.hdr[1])<<8|int(a.hdr[2])<<16, 0, false
		}
	}
}

// boundary puts the framer at a packet boundary.
func (a *answerFramer) boundary() { a.need, a.hdrN, a.typed, a.lost = 0, 0, false, false }

// headAnswers reports whether the flow's answers are framed here: a
// header-only capture, the plain protocol, no TLS.
func (f *flow) headAnswers() bool {
	return f.t.heads && !f.inTLS && !f.dec.Info().Compressed
}

// answerBytes feeds whole answer bytes to the decoder in a header-only
// capture: framed as they go, or, once framing is lost, searched for the
// answer's end.
func (f *flow) answerBytes(tsUS int64, data []byte) {
	a := &f.ans
	a.lastUS = tsUS
	if !a.lost {
		a.walk(data)
		f.dec.Feed(toClient, tsUS, data)
		return
	}
	f.resume(tsUS, data, 0)
}

// resume looks for the answer's end at the end of data (the last bytes
// of a segment, skipped bytes before them): found, it is fed and framing
// resumes.
func (f *flow) resume(tsUS int64, data []byte, skipped int) {
	a := &f.ans
	j := answerEnd(data)
	if j < 0 {
		a.skipped += int64(skipped + len(data))
		return
	}
	a.skipped += int64(skipped + j)
	a.boundary()
	f.dec.Feed(toClient, tsUS, data[j:])
}

// answerEnd returns where in b a final packet begins that ends exactly at
// b's end (an EOF, OK-as-EOF or ERR), or -1. Rows never begin with 0xFE
// short of 16 MiB, nor with 0xFF.
func answerEnd(b []byte) int {
	for j := 0; j+5 <= len(b); j++ {
		n := int(b[j]) | int(b[j+1])<<8 | int(b[j+2])<<16
		if j+4+n != len(b) {
			continue
		}
		if typ := b[j+4]; typ == 0xfe && n >= 5 || typ == 0xff && n >= 3 && (b[j+5] != 0xff || b[j+6] != 0xff) {
			return j
		}
	}
	return -1
}

// zeros completes packets whose middle was not captured.
var zeros [4096]byte

func (f *flow) feedZeros(tsUS int64, n int) {
	for n > 0 {
		k := min(n, len(zeros))
		f.dec.Feed(toClient, tsUS, zeros[:k])
		n -= k
	}
}

// answerCut delivers an answer segment of size bytes of which the first
// (head) and the last (tail) were captured.
func (f *flow) answerCut(tsUS int64, head, tail []byte, size int) {
	if f.inTLS {
		// Timing by flights needs only the bytes' count once the handshake
		// is over; a cut handshake record stops the walk (tls.go).
		if !f.tls.conn.finished {
			f.tls.conn.server.lost = true
		}
		f.tls.bytes(f, toClient, tsUS, head)
		f.tls.respBytes += int64(size - len(head))
		return
	}
	a := &f.ans
	a.lastUS = tsUS
	middle := size - len(head) - len(tail)
	if f.dec.Info().Compressed {
		// Compressed packets inflate only whole: a connection opened
		// before the capture, which the kernel could not put in the map.
		a.skipped += int64(size)
		f.lostAnswer(tsUS)
		return
	}
	if a.lost {
		f.resume(tsUS, tail, len(head)+middle)
		return
	}
	st := *a
	st.walk(head)
	switch {
	case st.hdrN > 0 || st.need > 0 && !st.typed:
		// A header cut by the middle, or one whose packet's first byte is
		// in it: held back, so that the decoder waits at a boundary.
		if st.hdrAt < 0 {
			a.skipped += int64(size)
			f.lostAnswer(tsUS) // the header began in an earlier segment
			return
		}
		f.dec.Feed(toClient, tsUS, head[:st.hdrAt])
		st.boundary()
		*a = st
		a.lost = true
		f.resume(tsUS, tail, len(head)-st.hdrAt+middle)
	case st.need >= middle:
		// The packet spans the middle: complete it, framing is kept.
		f.dec.Feed(toClient, tsUS, head)
		f.feedZeros(tsUS, middle)
		st.need -= middle
		*a = st
		a.walk(tail)
		f.dec.Feed(toClient, tsUS, tail)
	default:
		// A packet boundary in the middle: complete the packet in
		// progress, then look for the answer's end in the tail.
		f.dec.Feed(toClient, tsUS, head)
		f.feedZeros(tsUS, st.need)
		skipped := middle - st.need
		st.boundary()
		*a = st
		a.lost = true
		f.resume(tsUS, tail, skipped)
	}
}

// lostAnswer tells the decoder the answer's bytes were lost (a gap: the
// pending statement ends incomplete, the decoder waits for the next
// command) and switches the connection to full payloads.
func (f *flow) lostAnswer(tsUS int64) {
	f.t.stats.Gaps++
	f.dec.Gap(toClient, tsUS)
	f.ans.boundary()
	f.wantFull()
}

// clientSpoke: a request ends any answer before it.
func (a *answerFramer) clientSpoke() {
	if a.lost {
		a.boundary()
	}
}

// wantFull asks the kernel for the connection's whole answers.
func (f *flow) wantFull() {
	if f.fullAsked || f.t.full == nil {
		return
	}
	f.fullAsked = true
	f.t.stats.FullFlows++
	f.t.full(f.key, f.clientIsA, true)
}

// headStatement settles what a header-only capture knows of s, the
// statement whose exchange ex just ended: when part of its answer was not
// fed to the decoder, its rows are unknown, its bytes and last answer
// time the wire's; an answer whose end was never found switches the
// connection to full payloads.
func (f *flow) headStatement(s *event.Statement, ex *mysqlproto.Exchange) {
	a := &f.ans
	if a.skipped == 0 || ex.RespFirst == 0 {
		return
	}
	s.RespBytes += a.skipped
	a.skipped = 0
	s.Rows, s.RowsBy = 0, event.RowsCut // written as a note (event.NoteRowsUnknown)
	f.t.stats.RowsUnknown++
	if a.lastUS > s.TRespLast {
		setTimes(s, s.TReqFirst, s.TReqLast, s.TRespFirst, a.lastUS)
	}
	if ex.Incomplete {
		f.wantFull()
	}
}
