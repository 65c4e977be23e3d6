package slowlog

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"
)

const (
	// readBufferSize is the bufio buffer: lines shorter than this are
	// returned without a copy.
	readBufferSize = 256 << 10
	// DefaultMaxLineBytes bounds one line (one statement line, usually).
	DefaultMaxLineBytes = 64 << 20
	// keepBufferBytes is the largest buffer kept for reuse after an event;
	// bigger ones (from one huge statement) are released.
	keepBufferBytes = 4 << 20
)

// lineReader returns lines without a copy when they fit in the bufio buffer
// and assembles longer ones in a buffer bounded by max.
type lineReader struct {
	br     *bufio.Reader
	long   []byte
	max    int
	lineNo int64
	offset int64
}

func newLineReader(r io.Reader, max int) *lineReader {
	if max <= 0 {
		max = DefaultMaxLineBytes
	}
	return &lineReader{br: bufio.NewReaderSize(r, readBufferSize), max: max}
}

// next returns the next line without its "\n" or "\r\n". The line is valid
// until the next call. cut reports that the line was longer than max and
// only its first max bytes are returned. At the end of input err is io.EOF.
func (r *lineReader) next() (line []byte, cut bool, err error) {
	if cap(r.long) > keepBufferBytes {
		r.long = nil
	}
	b, err := r.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		return r.nextLong(b)
	}
	if len(b) == 0 {
		return nil, false, err
	}
	if err != nil && !endOfInput(err) {
		return nil, false, err
	}
	r.offset += int64(len(b))
	r.lineNo++
	if len(b) > r.max {
		return trimEOL(b[:r.max]), true, nil
	}
	return trimEOL(b), false, nil
}

// nextLong assembles a line longer than the bufio buffer, keeping at most
// max bytes and discarding the rest.
func (r *lineReader) nextLong(first []byte) ([]byte, bool, error) {
	r.long = append(r.long[:0], first...)
	r.offset += int64(len(first))
	cut := false
	for {
		b, err := r.br.ReadSlice('\n')
		r.offset += int64(len(b))
		room := r.max - len(r.long)
		if len(b) > room {
			cut = true
			b = b[:max(room, 0)]
		}
		r.long = append(r.long, b...)
		if err == bufio.ErrBufferFull {
			continue
		}
		r.lineNo++
		if err != nil && !endOfInput(err) {
			return nil, cut, err
		}
		return trimEOL(r.long), cut, nil
	}
}

// takeLong hands the long-line buffer to the caller (who has just copied
// nothing out of it yet) so a huge statement line is held once, not twice.
func (r *lineReader) takeLong() []byte {
	b := r.long
	r.long = nil
	return b
}

func trimEOL(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	return b
}

// gzipMagic starts every gzip member.
var gzipMagic = []byte{0x1f, 0x8b}

// Decompress returns r itself, or a gzip reader over it when the input
// starts with the gzip magic bytes (whatever the file is called).
func Decompress(r io.Reader) (io.Reader, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	head, err := br.Peek(2)
	if err != nil && err != io.EOF {
		return nil, err
	}
	if !bytes.Equal(head, gzipMagic) {
		return br, nil
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		return nil, fmt.Errorf("reading gzip header: %w", err)
	}
	return zr, nil
}

// ErrInterrupted ends the input of a Source after Interrupt: what was read
// before it is parsed and counted as at the end of the file.
var ErrInterrupted = errors.New("reading interrupted")

// endOfInput reports whether err ends the input with what was read so far
// still valid: the end of the file, or an interruption.
func endOfInput(err error) bool { return err == io.EOF || errors.Is(err, ErrInterrupted) }

// Source is an opened slow log: Reader yields the (decompressed) text,
// Size is the file's size on disk (0 for stdin and pipes) and Consumed how
// many of those bytes were read so far, for progress.
type Source struct {
	Reader io.Reader
	Size   int64
	file   *os.File
	count  *countingReader
	head   *headRecorder
}

// HeadBytes is how much of the (decompressed) text a Source keeps for its
// caller to tell what the input was when it held no event: standard input
// cannot be read a second time to look.
const HeadBytes = 8 << 10

// headRecorder keeps the first HeadBytes read through it.
type headRecorder struct {
	r    io.Reader
	head []byte
}

func (h *headRecorder) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	if room := HeadBytes - len(h.head); room > 0 && n > 0 {
		h.head = append(h.head, p[:min(n, room)]...)
	}
	return n, err
}

// Head is the start of the text read so far, at most HeadBytes.
func (s *Source) Head() []byte {
	if s.head == nil {
		return nil
	}
	return s.head.head
}

// Interrupt makes the source's reads end with ErrInterrupted, a read
// blocked on a pipe or FIFO included (when the file supports deadlines).
func (s *Source) Interrupt() {
	s.count.interrupted.Store(true)
	if s.file != nil {
		s.file.SetReadDeadline(time.Now())
	}
}

// Consumed returns the bytes read from the underlying file so far; safe to
// call from another goroutine than the one reading.
func (s *Source) Consumed() int64 { return s.count.n.Load() }

// Close closes the file (not stdin).
func (s *Source) Close() error {
	if s.file == nil || s.file == os.Stdin {
		return nil
	}
	return s.file.Close()
}

// Open opens a slow log by path, "-" meaning standard input; gzip input is
// recognised by its magic bytes.
func Open(path string) (*Source, error) {
	f, size, err := openFile(path)
	if err != nil {
		return nil, err
	}
	cr := &countingReader{r: f}
	r, err := Decompress(cr)
	if err != nil {
		if f != os.Stdin {
			f.Close()
		}
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	head := &headRecorder{r: r}
	return &Source{Reader: head, Size: size, file: f, count: cr, head: head}, nil
}

func openFile(path string) (*os.File, int64, error) {
	if path == "-" {
		return interruptibleStdin(), 0, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if st.IsDir() {
		f.Close()
		return nil, 0, errors.New("opening " + path + ": is a directory")
	}
	size := st.Size()
	if !st.Mode().IsRegular() {
		size = 0
	}
	return f, size, nil
}

// interruptibleStdin is standard input opened so that a read blocked on it
// can be interrupted: a pipe from a shell is blocking and Go cannot set a
// deadline on it, but the same pipe opened again through /dev/stdin can.
func interruptibleStdin() *os.File {
	if os.Stdin.SetReadDeadline(time.Time{}) == nil {
		return os.Stdin
	}
	if st, err := os.Stdin.Stat(); err != nil || st.Mode()&(os.ModeNamedPipe|os.ModeCharDevice) == 0 {
		return os.Stdin // a file or a socket: reopening would not continue where it is
	}
	f, err := os.Open("/dev/stdin")
	if err != nil {
		return os.Stdin
	}
	if f.SetReadDeadline(time.Time{}) != nil {
		f.Close()
		return os.Stdin
	}
	return f
}

type countingReader struct {
	r           io.Reader
	n           atomic.Int64
	interrupted atomic.Bool
}

func (c *countingReader) Read(p []byte) (int, error) {
	if c.interrupted.Load() {
		return 0, ErrInterrupted
	}
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	if errors.Is(err, os.ErrDeadlineExceeded) && c.interrupted.Load() {
		err = ErrInterrupted
	}
	return n, err
}
