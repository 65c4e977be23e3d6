package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// tcpdump is a running capture of one server port on lo.
type tcpdump struct {
	cmd    *exec.Cmd
	stderr strings.Builder
	done   chan struct{}
}

// startTcpdump starts `tcpdump -U --immediate-mode` and returns once it
// prints "listening on": traffic sent before that would be missing from the
// file. -U flushes per packet so a SIGINT stop loses nothing; -Z root keeps
// the file ours instead of user tcpdump's.
func startTcpdump(ctx context.Context, file string, port int) (*tcpdump, error) {
	// On a busy machine a starved tcpdump loses packets (its ring fills with
	// 64 KB loopback segments, each seen twice on lo): real-time priority
	// and a 128 MB ring.
	cmd := exec.CommandContext(ctx, "chrt", "--fifo", "10", "tcpdump", "-U", "--immediate-mode", "-Z", "root", "-n",
		"-i", "lo", "-s", "0", "-B", "131072", "-w", file, fmt.Sprintf("tcp port %d", port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pipe, err := cmd.StderrPipe()
	if err != nil {
		return nil, fmt.Errorf("tcpdump: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting tcpdump: %w", err)
	}
	td := &tcpdump{cmd: cmd, done: make(chan struct{})}
	listening := make(chan struct{})
	go td.drain(pipe, listening)
	select {
	case <-listening:
		return td, nil
	case <-td.done:
		_ = cmd.Wait()
		return nil, fmt.Errorf("tcpdump exited before listening: %s", td.stderr.String())
	case <-time.After(10 * time.Second):
		_ = td.stop()
		return nil, fmt.Errorf("tcpdump not listening after 10 s: %s", td.stderr.String())
	}
}

// drain keeps tcpdump's stderr (its final counters) and signals the
// "listening on" line.
func (td *tcpdump) drain(r io.Reader, listening chan struct{}) {
	defer close(td.done)
	sc := bufio.NewScanner(r)
	signalled := false
	for sc.Scan() {
		line := sc.Text()
		td.stderr.WriteString(line + "\n")
		if !signalled && strings.Contains(line, "listening on") {
			close(listening)
			signalled = true
		}
	}
}

// errDropped marks a capture the kernel dropped packets from; worth a retry.
var errDropped = errors.New("tcpdump dropped packets")

var droppedRE = regexp.MustCompile(`(\d+) packets? dropped by kernel`)

// stop sends SIGINT, waits, and fails when the kernel dropped packets: a
// fixture with holes nobody planned would make tests compare against noise.
func (td *tcpdump) stop() error {
	_ = td.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-td.done:
	case <-time.After(15 * time.Second):
		_ = td.cmd.Process.Kill()
		<-td.done
	}
	err := td.cmd.Wait()
	out := td.stderr.String()
	if err != nil && !strings.Contains(out, "packets captured") {
		return fmt.Errorf("tcpdump: %v: %s", err, out)
	}
	if m := droppedRE.FindStringSubmatch(out); m != nil {
		if n, _ := strconv.Atoi(m[1]); n > 0 {
			return fmt.Errorf("%w: %d: %s", errDropped, n, out)
		}
	}
	return nil
}
