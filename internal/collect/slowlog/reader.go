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
	if err != nil && err != io.EOF {
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
		if err != nil && err != io.EOF {
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

// Source is an opened slow log: Reader yields the (decompressed) text,
// Size is the file's size on disk (0 for stdin and pipes) and Consumed how
// many of those bytes were read so far, for progress.
type Source struct {
	Reader io.Reader
	Size   int64
	file   *os.File
	count  *countingReader
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
	return &Source{Reader: r, Size: size, file: f, count: cr}, nil
}

func openFile(path string) (*os.File, int64, error) {
	if path == "-" {
		return os.Stdin, 0, nil
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

type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}
