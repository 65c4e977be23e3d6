// Package offline turns files into profiles: packet captures (gapscope
// analyze) and slow query logs (gapscope digest); and when a file is
// neither, it says what the file is and which command reads it.
package offline

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"unicode/utf8"

	"github.com/gapscope/gapscope/internal/capture"
)

// InputKind is what a file looks like, so that a command given the wrong
// file can say what it got and which command reads it.
type InputKind struct {
	What   string // with its article: "a pcapng capture", "gzip of text"
	Reader string // the gapscope command that reads it; "" when none does
	Format string // "capture", "slowlog", or "" for anything else
}

// sniffBytes is how much of a file SniffInput looks at.
const sniffBytes = 8 << 10

// SniffInput looks at the start of path (through gzip, which both commands
// accept) and says what it is.
func SniffInput(path string) (InputKind, error) {
	st, err := os.Stat(path)
	if err != nil {
		return InputKind{}, err
	}
	if st.IsDir() {
		return InputKind{What: "a directory"}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return InputKind{}, err
	}
	defer f.Close()
	return sniffReader(bufio.NewReaderSize(f, sniffBytes))
}

func sniffReader(br *bufio.Reader) (InputKind, error) {
	head, err := br.Peek(sniffBytes)
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return InputKind{}, err
	}
	if len(head) == 0 {
		return InputKind{What: "empty (0 bytes)"}, nil
	}
	if bytes.HasPrefix(head, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return InputKind{What: "a damaged gzip file"}, nil
		}
		inner, err := sniffReader(bufio.NewReaderSize(io.LimitReader(zr, sniffBytes), sniffBytes))
		if err != nil {
			return InputKind{What: "a damaged gzip file"}, nil
		}
		inner.What = "gzip of " + inner.What
		return inner, nil
	}
	return Classify(head), nil
}

// slowLogMarks start lines only a slow query log has: its header lines, and
// the banner the server writes when it opens the log.
var slowLogMarks = [][]byte{[]byte("# Query_time:"), []byte("# User@Host:"), []byte("# Time:"), []byte(" started with:\n")}

// Classify says what a file starting with head is.
func Classify(head []byte) InputKind {
	if f := capture.Format(head); f != "" {
		return InputKind{What: "a " + f + " capture", Reader: "gapscope analyze", Format: "capture"}
	}
	switch {
	case bytes.HasPrefix(head, []byte("SQLite format 3\x00")):
		return InputKind{What: "an SQLite database (a gapscope store?)", Reader: "gapscope report --store"}
	case bytes.IndexByte(head, 0) >= 0 || !utf8.Valid(trimPartialRune(head)):
		return InputKind{What: "binary data"}
	}
	for _, m := range slowLogMarks {
		if bytes.Contains(head, m) {
			return InputKind{What: "a MySQL/MariaDB slow query log", Reader: "gapscope digest", Format: "slowlog"}
		}
	}
	if bytes.HasPrefix(bytes.TrimSpace(head), []byte("{")) {
		return InputKind{What: "JSON text (gapscope events?)", Reader: "gapscope report --events"}
	}
	if len(head) < sniffBytes {
		return InputKind{What: fmt.Sprintf("text (%d lines)", bytes.Count(head, []byte("\n")))}
	}
	return InputKind{What: "text"}
}

// trimPartialRune drops a UTF-8 sequence cut by the end of the sniffed bytes.
func trimPartialRune(b []byte) []byte {
	for i := 0; i < utf8.UTFMax && len(b) > 0; i++ {
		if r, _ := utf8.DecodeLastRune(b); r != utf8.RuneError {
			return b
		}
		b = b[:len(b)-1]
	}
	return b
}

// Advice says which command reads an input of this kind.
func (k InputKind) Advice() string {
	if k.Reader == "" {
		return ""
	}
	return "; read it with " + k.Reader
}
