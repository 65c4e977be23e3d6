package main

import (
	"bytes"
	"compress/gzip"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"golang.org/x/sys/unix"
)

const capturesDir = "../../testdata/captures"

// inputFiles writes the odd inputs users hand to digest and analyze.
func inputFiles(t *testing.T) map[string]string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{"dir": dir}
	write := func(name string, data []byte) {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		files[name] = p
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte("just some notes\nnothing else\n"))
	zw.Close()
	write("notes.txt.gz", gz.Bytes())
	write("empty.log", nil)
	write("random.bin", []byte{0x00, 0x13, 0x37, 0xff, 0xfe, 0x00, 0x42, 0x99, 0x01})
	write("notes.txt", []byte("line one\nline two\n"))
	write("events.jsonl", []byte(`{"digest":"abc","sql":"SELECT ?"}`+"\n"))
	write("banner.log", []byte("/usr/sbin/mariadbd, Version: 10.11.6-MariaDB-log (Debian 12). started with:\n"+
		"Tcp port: 3306  Unix socket: /run/mysqld/mysqld.sock\nTime\t\t    Id Command\tArgument\n"))
	write("header-only.pcap", pcapWith(t, nil))
	write("http.pcap", pcapWith(t, [][]byte{[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), []byte("HTTP/1.1 200 OK\r\n\r\n")}))
	return files
}

// pcapWith is an Ethernet pcap of one TCP connection between port 50123
// and port 80 carrying payloads, alternately from each side.
func pcapWith(t *testing.T, payloads [][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := pcapgo.NewWriter(&buf)
	if err := w.WriteFileHeader(65535, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	cli, srv := net.IPv4(10, 0, 0, 1), net.IPv4(10, 0, 0, 2)
	seq := [2]uint32{1000, 9000}
	for i, p := range payloads {
		side := i % 2
		ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: cli, DstIP: srv}
		tcp := &layers.TCP{SrcPort: 50123, DstPort: 80, Seq: seq[0], Ack: seq[1], ACK: true, PSH: true, Window: 65535}
		if side == 1 {
			ip.SrcIP, ip.DstIP = srv, cli
			tcp.SrcPort, tcp.DstPort, tcp.Seq, tcp.Ack = 80, 50123, seq[1], seq[0]
		}
		seq[side] += uint32(len(p))
		tcp.SetNetworkLayerForChecksum(ip)
		eth := &layers.Ethernet{SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2}, EthernetType: layers.EthernetTypeIPv4}
		sb := gopacket.NewSerializeBuffer()
		if err := gopacket.SerializeLayers(sb, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, tcp, gopacket.Payload(p)); err != nil {
			t.Fatal(err)
		}
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(1700000000, int64(i)*1000), CaptureLength: len(sb.Bytes()), Length: len(sb.Bytes())}
		if err := w.WritePacket(ci, sb.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

// TestDigestSaysWhatItGot: digest exits 1 on input with no slow-log event
// that is something else, saying what and which command reads it; an empty
// slow log is a note on stderr.
func TestDigestSaysWhatItGot(t *testing.T) {
	in := inputFiles(t)
	cases := []struct {
		file     string
		code     int
		stderr   []string
		noStdout bool
	}{
		{capturesDir + "/errors.pcap.gz", exitFailure, []string{"gzip of a pcap capture", "read it with gapscope analyze"}, true},
		{capturesDir + "/errors-ng.pcapng.gz", exitFailure, []string{"gzip of a pcapng capture"}, true},
		{in["http.pcap"], exitFailure, []string{"it is a pcap capture"}, true},
		{in["random.bin"], exitFailure, []string{"it is binary data"}, true},
		{in["notes.txt"], exitFailure, []string{"it is text (2 lines)"}, true},
		{in["notes.txt.gz"], exitFailure, []string{"gzip of text"}, true},
		{in["events.jsonl"], exitFailure, []string{"JSON text", "gapscope report --events"}, true},
		{in["dir"], exitFailure, []string{"is a directory"}, true},
		{in["empty.log"], exitOK, []string{"empty.log is empty"}, false},
		{in["banner.log"], exitOK, []string{"banner.log is a slow log with no complete event in its 3 lines"}, false},
	}
	for _, c := range cases {
		code, out, errOut := runLine(t, "digest", c.file)
		if code != c.code {
			t.Errorf("digest %s: exit %d, want %d; stderr %q", c.file, code, c.code, errOut)
		}
		for _, want := range c.stderr {
			if !strings.Contains(errOut, want) {
				t.Errorf("digest %s: stderr %q lacks %q", c.file, errOut, want)
			}
		}
		if c.noStdout && out != "" {
			t.Errorf("digest %s: an empty profile printed:\n%s", c.file, out)
		}
	}
	// A wrong file among slow logs: the others' profile, then exit 1.
	code, out, errOut := runLine(t, "digest", slowlogDir+"/mysql-5.7.log", in["random.bin"])
	if code != exitFailure || !strings.Contains(out, "slow log: 5 events") || !strings.Contains(errOut, "random.bin holds no slow-log event") {
		t.Errorf("mixed inputs: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
}

// TestAnalyzeSaysWhatItGot: analyze refuses what is not a capture before
// reading it, says what it is, reads stdin, notes a header-only capture and
// a --port absent from the capture, and exits 1 on a capture with no MySQL.
func TestAnalyzeSaysWhatItGot(t *testing.T) {
	in := inputFiles(t)
	cases := []struct {
		args   []string
		code   int
		stderr []string
	}{
		{[]string{in["dir"]}, exitFailure, []string{"is a directory"}},
		{[]string{slowlogDir + "/mysql-5.7.log"}, exitFailure, []string{"is a MySQL/MariaDB slow query log", "read it with gapscope digest"}},
		{[]string{in["notes.txt.gz"]}, exitFailure, []string{"is gzip of text (2 lines)"}},
		{[]string{in["empty.log"]}, exitFailure, []string{"is empty (0 bytes)"}},
		{[]string{in["header-only.pcap"]}, exitOK, []string{"no packet (a header only)"}},
		{[]string{in["http.pcap"]}, exitFailure, []string{"no MySQL connection in 2 packets on port 3306", "ports 80 (1 connection)"}},
		{[]string{"--port", "3307", capturesDir + "/errors.pcap.gz"}, exitOK, []string{"--port 3307: no connection on that port in the capture; its TCP connections are on ports "}},
	}
	for _, c := range cases {
		code, _, errOut := runLine(t, append([]string{"analyze"}, c.args...)...)
		if code != c.code {
			t.Errorf("analyze %v: exit %d, want %d; stderr %q", c.args, code, c.code, errOut)
		}
		for _, want := range c.stderr {
			if !strings.Contains(errOut, want) {
				t.Errorf("analyze %v: stderr %q lacks %q", c.args, errOut, want)
			}
		}
	}
}

// TestAnalyzeReadsStdin: "tcpdump -w - | gapscope analyze -".
func TestAnalyzeReadsStdin(t *testing.T) {
	gz, err := os.ReadFile(capturesDir + "/errors.pcap.gz")
	if err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	go func() { w.Write(gz); w.Close() }()
	old := os.Stdin
	os.Stdin = r
	defer func() { os.Stdin = old; r.Close() }()
	code, fromStdin, errOut := runLine(t, "analyze", "--format", "json", "-")
	_, fromFile, _ := runLine(t, "analyze", "--format", "json", capturesDir+"/errors.pcap.gz")
	if code != exitOK || fromStdin != fromFile || !strings.Contains(fromStdin, `"statements"`) {
		t.Errorf("analyze -: exit %d, stderr %q; stdout differs from the file's: %v", code, errOut, fromStdin != fromFile)
	}
}

// TestDigestInterruptedFIFO runs the built binary on a FIFO and stops it
// with SIGINT, as Ctrl-C does: the report counts every event written.
func TestDigestInterruptedFIFO(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "gapscope")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	fifo := filepath.Join(t.TempDir(), "slow.fifo")
	if err := exec.Command("mkfifo", fifo).Run(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "digest", "--format", "json", fifo)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	log, err := os.ReadFile(slowlogDir + "/mysql-5.7.log")
	if err != nil {
		t.Fatal(err)
	}
	const copies = 70 // 350 events: more than one of the reader's batches
	for range copies {
		w.Write(log)
	}
	waitPipeEmpty(t, w)
	cmd.Process.Signal(os.Interrupt)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("digest after Ctrl-C: %v\n%s", err, errOut.String())
	}
	if !strings.Contains(out.String(), `"events": 350`) || !strings.Contains(out.String(), "interrupted") {
		t.Errorf("after Ctrl-C the report does not count the 350 events read:\n%s", out.String())
	}
}

// waitPipeEmpty waits until the reader has taken every byte written to w.
func waitPipeEmpty(t *testing.T, w *os.File) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if n, err := unix.IoctlGetInt(int(w.Fd()), unix.TIOCINQ); err == nil && n == 0 {
			return
		}
	}
	t.Fatal("the reader never emptied the pipe")
}
