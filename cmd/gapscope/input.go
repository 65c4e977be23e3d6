package main

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

// inputKind is what a file looks like, so that a command given the wrong
// file can say what it got and which command reads it.
type inputKind struct {
	what   string // with its article: "a pcapng capture", "gzip of text"
	reader string // the gapscope command that reads it; "" when none does
	format string // "capture", "slowlog", or "" for anything else
}

// sniffBytes is how much of a file sniffInput looks at.
const sniffBytes = 8 << 10

// sniffInput looks at the start of path (through gzip, which both commands
// accept) and says what it is.
func sniffInput(path string) (inputKind, error) {
	st, err := os.Stat(path)
	if err != nil {
		return inputKind{}, err
	}
	if st.IsDir() {
		return inputKind{what: "a directory"}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return inputKind{}, err
	}
	defer f.Close()
	return sniffReader(bufio.NewReaderSize(f, sniffBytes))
}

func sniffReader(br *bufio.Reader) (inputKind, error) {
	head, err := br.Peek(sniffBytes)
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return inputKind{}, err
	}
	if len(head) == 0 {
		return inputKind{what: "empty (0 bytes)"}, nil
	}
	if bytes.HasPrefix(head, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return inputKind{what: "a damaged gzip file"}, nil
		}
		inner, err := sniffReader(bufio.NewReaderSize(io.LimitReader(zr, sniffBytes), sniffBytes))
		if err != nil {
			return inputKind{what: "a damaged gzip file"}, nil
		}
		inner.what = "gzip of " + inner.what
		return inner, nil
	}
	return classify(head), nil
}

// slowLogMarks start lines only a slow query log has: its header lines, and
// the banner the server writes when it opens the log.
var slowLogMarks = [][]byte{[]byte("# Query_time:"), []byte("# User@Host:"), []byte("# Time:"), []byte(" started with:\n")}

func classify(head []byte) inputKind {
	if f := capture.Format(head); f != "" {
		return inputKind{what: "a " + f + " capture", reader: "gapscope analyze", format: "capture"}
	}
	switch {
	case bytes.HasPrefix(head, []byte("SQLite format 3\x00")):
		return inputKind{what: "an SQLite database (a gapscope store?)", reader: "gapscope report --store"}
	case bytes.IndexByte(head, 0) >= 0 || !utf8.Valid(trimPartialRune(head)):
		return inputKind{what: "binary data"}
	}
	for _, m := range slowLogMarks {
		if bytes.Contains(head, m) {
			return inputKind{what: "a MySQL/MariaDB slow query log", reader: "gapscope digest", format: "slowlog"}
		}
	}
	if bytes.HasPrefix(bytes.TrimSpace(head), []byte("{")) {
		return inputKind{what: "JSON text (gapscope events?)", reader: "gapscope report --events"}
	}
	if len(head) < sniffBytes {
		return inputKind{what: fmt.Sprintf("text (%d lines)", bytes.Count(head, []byte("\n")))}
	}
	return inputKind{what: "text"}
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

// advice says which command reads an input of this kind.
func (k inputKind) advice() string {
	if k.reader == "" {
		return ""
	}
	return "; read it with " + k.reader
}
