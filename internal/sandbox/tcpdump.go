package sandbox

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Tcpdump captures lo to path and returns a function that stops it
// cleanly (SIGINT, as a user would).
func Tcpdump(t testing.TB, path string, port int) func() {
	t.Helper()
	cmd := exec.Command("tcpdump", "-U", "--immediate-mode", "-B", "16384", "-Z", "root", "-i", "lo", "-w", path,
		fmt.Sprintf("tcp port %d or udp port %d", port, sentinelPort))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	listening := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			if strings.Contains(sc.Text(), "listening") {
				once.Do(func() { close(listening) })
			}
		}
	}()
	select {
	case <-listening:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatal("tcpdump did not start listening")
	}
	awaitCapturing(t, cmd, path)
	return func() { // call after the client closed its connections
		waitQuiet(path)
		cmd.Process.Signal(syscall.SIGINT)
		cmd.Wait()
	}
}

// waitQuiet waits until tcpdump has written the connection's end (two
// FINs, read back by tcpdump itself): on a busy machine tcpdump can lag
// far behind the traffic, and SIGINT drops what it has not written.
func waitQuiet(path string) {
	for range 100 {
		out, _ := exec.Command("tcpdump", "-nn", "-r", path, "tcp[tcpflags] & tcp-fin != 0").Output()
		if bytes.Count(out, []byte("\n")) >= 2 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// sentinelPort receives UDP datagrams that prove the capture runs: tcpdump
// says "listening" before the kernel hands it packets on a busy machine, and
// traffic sent in between is lost (seen here: 8 of 11 queries missing).
const sentinelPort = 9

// awaitCapturing sends sentinel datagrams until one is in the file.
func awaitCapturing(t testing.TB, cmd *exec.Cmd, path string) {
	t.Helper()
	conn, err := net.Dial("udp", fmt.Sprintf("127.0.0.1:%d", sentinelPort))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for range 200 {
		conn.Write([]byte("gapscope-sentinel"))
		time.Sleep(50 * time.Millisecond)
		out, _ := exec.Command("tcpdump", "-nn", "-r", path, "udp").Output()
		if len(bytes.TrimSpace(out)) > 0 {
			return
		}
	}
	cmd.Process.Kill()
	t.Fatal("tcpdump wrote no packet after 10 s")
}
