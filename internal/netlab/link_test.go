package netlab

import (
	"context"
	"errors"
	"io"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

func needLink(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("network namespaces: not in -short")
	}
	if err := Available(); err != nil {
		t.Skip(err)
	}
}

// echoServer listens on ServerAddr inside the server namespace and echoes.
func echoServer(t *testing.T, l *Link) net.Listener {
	t.Helper()
	var ln net.Listener
	err := RunIn(l.ServerNS(), func() (err error) {
		ln, err = net.Listen("tcp", ServerAddr+":0")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return ln
}

// bestRoundTrip returns the fastest of n echo round trips across the link.
func bestRoundTrip(t *testing.T, l *Link, addr string, n int) time.Duration {
	t.Helper()
	c, err := DialerIn(l.ClientNS())(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	best := time.Hour
	buf := make([]byte, 1)
	for i := 0; i < n; i++ {
		start := time.Now()
		if _, err := c.Write([]byte{'x'}); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
		best = min(best, time.Since(start))
	}
	return best
}

func TestLinkDelaysBothWays(t *testing.T) {
	needLink(t)
	l, err := New(Options{Delay: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ln := echoServer(t, l)
	defer ln.Close()
	rtt := bestRoundTrip(t, l, ln.Addr().String(), 20)
	// 5 ms each way: the round trip cannot be shorter than 10 ms; the upper
	// bound only catches a forwarder that holds packets far too long.
	if rtt < 10*time.Millisecond || rtt > 30*time.Millisecond {
		t.Errorf("best round trip %s across a 5 ms link, want 10 ms and a little", rtt)
	}
	t.Logf("best round trip %s; forwarder real-time: %v", rtt, l.Realtime())
	if up, down := l.Forwarded(); up == 0 || down == 0 {
		t.Errorf("forwarded %d/%d packets", up, down)
	}
}

func TestLinkRemovesEverything(t *testing.T) {
	needLink(t)
	l, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv, cli := l.ServerNS(), l.ClientNS()
	if !nsExists(srv) || !nsExists(cli) {
		t.Fatalf("namespaces %s/%s not created", srv, cli)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if nsExists(srv) || nsExists(cli) {
		t.Errorf("namespaces left after Close")
	}
	out, _ := exec.Command("ip", "link", "show").Output()
	if strings.Contains(string(out), l.tunServer) || strings.Contains(string(out), l.tunClient) {
		t.Errorf("TUN devices left in the root namespace:\n%s", out)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestRemoveStaleDeletesDeadOwnersOnly(t *testing.T) {
	needLink(t)
	// A pid that cannot be alive: above the kernel's pid_max default range.
	dead := NamePrefix + "-4194999-1-srv"
	if err := ipRun("netns", "add", dead); err != nil {
		t.Fatal(err)
	}
	defer ipRun("netns", "del", dead)
	l, err := New(Options{}) // cleans stale ones first
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if nsExists(dead) {
		t.Errorf("stale namespace %s not removed", dead)
	}
	if _, err := RemoveStale(); err != nil {
		t.Fatal(err)
	}
	if !nsExists(l.ServerNS()) {
		t.Errorf("RemoveStale removed a live link's namespace")
	}
}

func TestOwnerPID(t *testing.T) {
	for name, want := range map[string]int{"gsl-123-1-srv": 123, "gsl-9-20-cli": 9, "other-1-2-srv": 0, "gsl-x-1-srv": 0, "gslfoo": 0} {
		if got := ownerPID(name); got != want {
			t.Errorf("ownerPID(%q) = %d, want %d", name, got, want)
		}
	}
}

func TestAvailableExplains(t *testing.T) {
	if err := Available(); err != nil && !errors.Is(err, ErrUnavailable) {
		t.Errorf("Available() = %v, want ErrUnavailable", err)
	}
}

// RunIn must leave its thread alive: a child started with Pdeathsig from
// a thread (as sandboxes start their servers) dies when that thread ends.
func TestRunInKeepsThreadsAlive(t *testing.T) {
	needLink(t)
	l, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	child := exec.Command("sleep", "60")
	child.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()
	exited := make(chan struct{})
	go func() { child.Wait(); close(exited) }()
	for i := 0; i < 200; i++ {
		if err := RunIn(l.ClientNS(), func() error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-exited:
		t.Fatal("a child started with Pdeathsig died: RunIn ended the thread that started it")
	case <-time.After(200 * time.Millisecond):
	}
}
