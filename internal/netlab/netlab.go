// Package netlab builds a real network path with a chosen one-way delay on
// one host, for labs and tests of a capture that does not run on the
// server's host: two network namespaces, each holding one end of a pair of
// TUN devices, and a forwarder in this process that holds every packet for
// the delay before handing it to the other end. Kernels without the netem
// queueing discipline cannot delay packets themselves, so the delay is
// made in user space.
//
// Everything it creates carries the name prefix NamePrefix and the creating
// process's id, so that a later run can remove what a killed one left.
// It needs root (CAP_NET_ADMIN) and /dev/net/tun.
package netlab

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// NamePrefix starts the name of every namespace and device netlab creates.
const NamePrefix = "gsl"

// Addresses of the two ends inside their namespaces (point to point; each
// link lives in its own pair of namespaces, so links never clash).
const (
	ServerAddr = "10.231.0.1"
	ClientAddr = "10.231.0.2"
)

// ErrUnavailable wraps the reason a host cannot build links (not root, no
// /dev/net/tun, no ip(8)); callers skip or explain.
var ErrUnavailable = errors.New("netlab unavailable")

// Available reports whether links can be built here, and why not.
func Available() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: needs root (network namespaces and TUN devices)", ErrUnavailable)
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return fmt.Errorf("%w: no /dev/net/tun", ErrUnavailable)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("%w: no ip(8) (iproute2)", ErrUnavailable)
	}
	return nil
}

// names are the namespaces and devices of one link, tagged with the pid
// and a sequence number (one process may hold several links).
type names struct {
	nsServer, nsClient   string
	tunServer, tunClient string
}

var linkSeq atomic.Int64

func namesFor(pid int, seq int64) names {
	id := strconv.Itoa(pid) + "-" + strconv.FormatInt(seq, 10)
	dev := NamePrefix + strconv.Itoa(pid) // interface names are at most 15 bytes
	return names{
		nsServer: NamePrefix + "-" + id + "-srv", nsClient: NamePrefix + "-" + id + "-cli",
		tunServer: dev + "s" + strconv.FormatInt(seq%1000, 10), tunClient: dev + "c" + strconv.FormatInt(seq%1000, 10),
	}
}

// ownerPID returns the pid encoded in a namespace name of ours (0 if the
// name is not one of ours).
func ownerPID(ns string) int {
	rest, ok := strings.CutPrefix(ns, NamePrefix+"-")
	if !ok {
		return 0
	}
	id, _, _ := strings.Cut(rest, "-")
	pid, err := strconv.Atoi(id)
	if err != nil {
		return 0
	}
	return pid
}

// alive reports whether process pid exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// RemoveStale deletes namespaces of ours whose creating process is gone
// (a lab killed before it could clean up). TUN devices die with their
// creator's file descriptors, so the namespaces are all that is left. It
// returns the names removed.
func RemoveStale() ([]string, error) {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return nil, fmt.Errorf("listing network namespaces: %w", err)
	}
	var removed []string
	for _, line := range strings.Split(string(out), "\n") {
		ns, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		pid := ownerPID(ns)
		if pid == 0 || alive(pid) {
			continue
		}
		if err := ipRun("netns", "del", ns); err == nil {
			removed = append(removed, ns)
		}
	}
	return removed, nil
}

// ipRun runs ip(8) with args and returns its error with its output.
func ipRun(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
