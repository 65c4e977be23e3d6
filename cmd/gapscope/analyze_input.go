package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/gapscope/gapscope/internal/capture"
)

// checkCaptureFiles refuses, before reading anything, a file analyze cannot
// read, saying what it is instead: a directory, an empty file, a slow log,
// text. Standard input ("-") is read as it comes.
func checkCaptureFiles(files []string) error {
	for _, path := range files {
		if path == "-" {
			continue
		}
		k, err := sniffInput(path)
		if err != nil {
			return fmt.Errorf("opening capture: %w", err)
		}
		if k.format != "capture" {
			return fmt.Errorf("%s is %s, not a pcap or pcapng capture (optionally gzip-compressed)%s", path, k.what, k.advice())
		}
	}
	return nil
}

// noMySQLInCapture is the error of a capture in which no MySQL connection
// was found: an empty table would look like an idle server.
func noMySQLInCapture(st capture.Stats, opts capture.Options, interrupted bool) error {
	if st.Flows > 0 || st.Packets == 0 || interrupted {
		return nil
	}
	return fmt.Errorf("no MySQL connection in %d packets on port %s; %s: is the server on another --port?",
		st.Packets, portList(opts.Ports), describePorts(st.PortsSeen))
}

// inputNotes says, on stderr and in the report, what a capture without
// statements held, and which --port given saw no connection at all.
func inputNotes(errOut io.Writer, st capture.Stats, portsGiven bool, opts capture.Options) []string {
	var notes []string
	if st.Packets == 0 {
		notes = append(notes, "the capture holds no packet (a header only): nothing to profile")
	} else if st.Statements == 0 {
		notes = append(notes, fmt.Sprintf("%d MySQL connections but no statement in them", st.Flows))
	}
	if portsGiven && st.Packets > 0 {
		for _, p := range opts.Ports {
			if st.PortsSeen[p] == 0 {
				notes = append(notes, fmt.Sprintf("--port %d: no connection on that port in the capture; %s", p, describePorts(st.PortsSeen)))
			}
		}
	}
	for _, n := range notes {
		fmt.Fprintln(errOut, "gapscope: note:", n)
	}
	return notes
}

// describePorts lists the ports of a capture's connections, busiest first.
func describePorts(seen map[uint16]int64) string {
	if len(seen) == 0 {
		return "it holds no TCP connection"
	}
	ports := make([]uint16, 0, len(seen))
	for p := range seen {
		ports = append(ports, p)
	}
	slices.SortFunc(ports, func(a, b uint16) int {
		if c := cmp.Compare(seen[b], seen[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	parts := make([]string, 0, 5)
	for i, p := range ports {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("%d more", len(ports)-5))
			break
		}
		parts = append(parts, fmt.Sprintf("%d (%s)", p, plural(seen[p], "connection")))
	}
	return "its TCP connections are on ports " + strings.Join(parts, ", ")
}

func portList(ports []uint16) string {
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = fmt.Sprint(p)
	}
	return strings.Join(s, ",")
}

// plural is "1 connection", "2 connections".
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
