package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/gapscope/gapscope/internal/collect/slowlog"
)

// slowLogInputs remembers each file digest read to the end, to tell a slow
// log with nothing in it from a file that is no slow log at all.
type slowLogInputs struct {
	paths []string
	stats []slowlog.FileStats
}

func (in *slowLogInputs) add(path string, st slowlog.FileStats) {
	in.paths = append(in.paths, path)
	in.stats = append(in.stats, st)
}

// wrongInputs is the error of files that are not slow logs (exit 1).
type wrongInputs []string

func (w wrongInputs) Error() string { return strings.Join(w, "; ") }

// check says on stderr which slow logs held no event and returns the files
// without a single slow-log event that are something else (a capture, a
// database, text...), each with what it looks like and the command that
// reads it.
func (in *slowLogInputs) check(errOut io.Writer) wrongInputs {
	var wrong wrongInputs
	for i, path := range in.paths {
		st := in.stats[i]
		if st.Events > 0 {
			continue
		}
		name, k := path, inputKind{}
		if path == "-" {
			name, k = "standard input", stdinKind(st)
		} else if sniffed, err := sniffInput(path); err == nil {
			k = sniffed
		}
		switch {
		case k.format == "slowlog":
			fmt.Fprintf(errOut, "gapscope: note: %s is a slow log with no complete event in its %s\n", name, plural(st.Lines, "line"))
		case st.Bytes == 0:
			fmt.Fprintf(errOut, "gapscope: note: %s is empty: no slow query logged\n", name)
		default:
			wrong = append(wrong, fmt.Sprintf("%s holds no slow-log event: it is %s, not a MySQL/MariaDB slow query log%s", name, k.what, k.advice()))
		}
	}
	return wrong
}

// stdinKind describes standard input, which cannot be read twice, from the
// start of its text as the reader kept it (a file's start is sniffed the
// same way), else from the parser's counts: header lines it could not use
// are a slow log's; statement text alone (what binary data parses as) is not.
func stdinKind(st slowlog.FileStats) inputKind {
	if k := classify(st.Head); !strings.HasPrefix(k.what, "text") {
		return k
	}
	if st.HeaderOnly > 0 || st.Malformed > 0 || st.AdminCommands > 0 {
		return inputKind{what: "a slow query log", format: "slowlog"}
	}
	return inputKind{what: fmt.Sprintf("%s (%d bytes) of something else", plural(st.Lines, "line"), st.Bytes)}
}
