package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// expect is the sidecar NAME.expect.json: what tshark (independent of
// gapscope) counts in the capture, plus what the generator knows it sent.
type expect struct {
	File        string `json:"file"`
	Scenario    string `json:"scenario"`
	Description string `json:"description"`
	CountedBy   string `json:"counted_by"`
	ServerPort  int    `json:"server_port"`
	Packets     int    `json:"packets"`
	// TCPConnections is the number of TCP streams (tshark tcp.stream);
	// ConnectionsOpened those whose client SYN is in the file.
	TCPConnections    int `json:"tcp_connections"`
	ConnectionsOpened int `json:"connections_opened"`
	// Commands counts client requests by command as tshark's MySQL dissector
	// decodes them (mysql.command).
	Commands map[string]int `json:"commands"`
	// UnknownCommands are request packets whose first byte is no command:
	// tshark's reading of LOAD DATA file contents and similar.
	UnknownCommands map[string]int `json:"unknown_commands,omitempty"`
	// ErrorCodes counts ERR packets by code (mysql.error_code), without
	// MariaDB progress reports: ERR-shaped packets with code 0xFFFF that the
	// server sends to clients with CLIENT_PROGRESS during long statements.
	ErrorCodes      map[string]int `json:"error_codes"`
	ProgressReports int            `json:"progress_reports"`
	// InvalidCommands are packets tshark took for a command it could not
	// name (LOAD DATA file contents, >16 MB continuations, compressed data).
	InvalidCommands int `json:"invalid_commands"`
	ZeroWindows     int `json:"zero_windows"`
	// Loopback under load does reorder and retransmit (SACK) now and then;
	// these say how often tshark saw it in this file.
	Retransmissions int `json:"retransmissions"`
	OutOfOrder      int `json:"out_of_order"`
	LostSegments    int `json:"lost_segments"`
	TLSRecords      int `json:"tls_records"`
	// Caveat says where tshark's view differs from the protocol's truth.
	Caveat string `json:"caveat,omitempty"`
	// Generator holds ground truth from the generator itself (what it sent
	// and what the server told the client), where tshark cannot count it.
	Generator map[string]any `json:"generator,omitempty"`
}

// commandNames are the COM_* codes of the MySQL/MariaDB client protocol.
var commandNames = map[int]string{
	0x00: "COM_SLEEP", 0x01: "COM_QUIT", 0x02: "COM_INIT_DB", 0x03: "COM_QUERY", 0x04: "COM_FIELD_LIST",
	0x05: "COM_CREATE_DB", 0x06: "COM_DROP_DB", 0x07: "COM_REFRESH", 0x08: "COM_SHUTDOWN",
	0x09: "COM_STATISTICS", 0x0a: "COM_PROCESS_INFO", 0x0b: "COM_CONNECT", 0x0c: "COM_PROCESS_KILL",
	0x0d: "COM_DEBUG", 0x0e: "COM_PING", 0x0f: "COM_TIME", 0x10: "COM_DELAYED_INSERT",
	0x11: "COM_CHANGE_USER", 0x12: "COM_BINLOG_DUMP", 0x13: "COM_TABLE_DUMP", 0x14: "COM_CONNECT_OUT",
	0x15: "COM_REGISTER_SLAVE", 0x16: "COM_STMT_PREPARE", 0x17: "COM_STMT_EXECUTE",
	0x18: "COM_STMT_SEND_LONG_DATA", 0x19: "COM_STMT_CLOSE", 0x1a: "COM_STMT_RESET",
	0x1b: "COM_SET_OPTION", 0x1c: "COM_STMT_FETCH", 0x1d: "COM_DAEMON", 0x1e: "COM_BINLOG_DUMP_GTID",
	0x1f: "COM_RESET_CONNECTION", 0xfa: "COM_STMT_BULK_EXECUTE",
}

// expectFor counts file with tshark, decoding port as MySQL.
func expectFor(ctx context.Context, file string, port int) (*expect, error) {
	version, err := tsharkVersion(ctx)
	if err != nil {
		return nil, err
	}
	exp := &expect{CountedBy: version, ServerPort: port, Commands: map[string]int{}, ErrorCodes: map[string]int{}}
	out, err := tshark(ctx, file, port, "", "tcp.stream", "tcp.flags.syn", "tcp.flags.ack",
		"mysql.command", "mysql.error_code", "tls.record.content_type")
	if err != nil {
		return nil, err
	}
	if err := exp.countFields(out); err != nil {
		return nil, err
	}
	for filter, dst := range map[string]*int{
		"tcp.analysis.zero_window":    &exp.ZeroWindows,
		"tcp.analysis.retransmission": &exp.Retransmissions,
		"tcp.analysis.out_of_order":   &exp.OutOfOrder,
		"tcp.analysis.lost_segment":   &exp.LostSegments,
		"mysql.command.invalid":       &exp.InvalidCommands,
	} {
		if *dst, err = tsharkCount(ctx, file, port, filter); err != nil {
			return nil, err
		}
	}
	return exp, nil
}

// countFields reads one line per frame: stream, syn, ack, commands,
// error codes, TLS record types (multiple values comma-separated).
func (exp *expect) countFields(out []byte) error {
	streams, opened := map[string]bool{}, map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) < 6 {
			return fmt.Errorf("tshark: unexpected line %q", sc.Text())
		}
		exp.Packets++
		streams[f[0]] = true
		if isTrue(f[1]) && !isTrue(f[2]) {
			opened[f[0]] = true
		}
		for _, c := range values(f[3]) {
			code, err := strconv.ParseInt(c, 0, 32)
			if err != nil {
				return fmt.Errorf("tshark: command %q: %w", c, err)
			}
			exp.countCommand(int(code))
		}
		for _, c := range values(f[4]) {
			if c == "65535" {
				exp.ProgressReports++
				continue
			}
			exp.ErrorCodes[c]++
		}
		exp.TLSRecords += len(values(f[5]))
	}
	exp.TCPConnections, exp.ConnectionsOpened = len(streams), len(opened)
	return sc.Err()
}

func (exp *expect) countCommand(code int) {
	if n, ok := commandNames[code]; ok {
		exp.Commands[n]++
		return
	}
	if exp.UnknownCommands == nil {
		exp.UnknownCommands = map[string]int{}
	}
	exp.UnknownCommands[fmt.Sprintf("0x%02x", code)]++
}

func values(field string) []string {
	if field == "" {
		return nil
	}
	return strings.Split(field, ",")
}

func isTrue(v string) bool { return v == "1" || strings.EqualFold(v, "true") }

func tshark(ctx context.Context, file string, port int, filter string, fields ...string) ([]byte, error) {
	args := []string{"-n", "-r", file, "-d", fmt.Sprintf("tcp.port==%d,mysql", port), "-T", "fields",
		"-E", "occurrence=a", "-E", "aggregator=,", "-E", "separator=/t"}
	if filter != "" {
		args = append(args, "-Y", filter)
	}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	cmd := exec.CommandContext(ctx, "tshark", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("tshark on %s: %w: %s", file, err, stderr.String())
	}
	return out, nil
}

func tsharkCount(ctx context.Context, file string, port int, filter string) (int, error) {
	out, err := tshark(ctx, file, port, filter, "frame.number")
	if err != nil {
		return 0, err
	}
	return bytes.Count(out, []byte("\n")), nil
}

func tsharkVersion(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "tshark", "--version").Output()
	if err != nil {
		return "", fmt.Errorf("tshark --version: %w", err)
	}
	m := regexp.MustCompile(`TShark \(Wireshark\) (\S+)`).FindSubmatch(out)
	if m == nil {
		return "tshark", nil
	}
	return "tshark " + string(m[1]), nil
}

// writeExpect writes the sidecar with sorted keys (encoding/json sorts map
// keys) so that regenerating shows real changes only.
func writeExpect(path string, exp *expect) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // keep '<17 MiB>' readable
	enc.SetIndent("", "  ")
	if err := enc.Encode(exp); err != nil {
		return err
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// sortedKeys is for messages.
func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
