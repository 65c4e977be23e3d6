//go:build linux

package capture

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/gapscope/gapscope/internal/event"
)

// OpenSource opens what --capture or GAPSCOPE_CAPTURE names, auto by
// default, auto as eBPF where it opens and the server's rows are read; a
// name it does not know is an error, not a silent default.
func TestOpenSourcePicks(t *testing.T) {
	_, port := liveListener(t)
	opts := LiveOptions{Options: Options{Ports: []uint16{port}}, RingMB: 2}
	for _, c := range []struct {
		flag, env  string
		serverRows bool
		want       string
	}{
		{"", "", true, "eBPF"},
		{"", "", false, "AF_PACKET ring on lo (auto: eBPF only where the server's statement rows are read"},
		{"", "packet", true, "AF_PACKET"},
		{"", "ebpf", false, "eBPF"},
		{"packet", "ebpf", true, "AF_PACKET"},
		{"ebpf", "", false, "eBPF"},
		{"auto", "", true, "eBPF"},
		{"auto", "packet", false, "AF_PACKET ring on lo (auto: "},
	} {
		t.Setenv(SourceEnv, c.env)
		opts.Source, opts.ServerRows = c.flag, c.serverRows
		src, err := OpenSource("lo", opts)
		if ebpfUnavailable(err) {
			t.Skipf("no eBPF capture here: %v", err)
		}
		if err != nil {
			t.Fatalf("flag %q env %q server rows %v: %v", c.flag, c.env, c.serverRows, err)
		}
		if d := src.Describe(); !strings.HasPrefix(d, c.want) {
			t.Errorf("flag %q env %q server rows %v: opened %q, want %s", c.flag, c.env, c.serverRows, d, c.want)
		}
		src.Close()
	}
	opts.Source = "pcap"
	if _, err := OpenSource("lo", opts); err == nil || !strings.Contains(err.Error(), "want auto, ebpf or packet") {
		t.Errorf("an unknown source: %v", err)
	}
}

// TestOpenSourceAutoFallsBack: without CAP_BPF and CAP_NET_ADMIN (this
// test binary run again under setpriv with them out of its bounding set),
// auto opens the AF_PACKET ring and says why.
func TestOpenSourceAutoFallsBack(t *testing.T) {
	_, port := liveListener(t)
	if os.Getenv("GAPSCOPE_TEST_NO_BPF") == "1" {
		src, err := OpenSource("lo", LiveOptions{Options: Options{Ports: []uint16{port}}, RingMB: 2, Source: SourceAuto, ServerRows: true})
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		fmt.Println("DESCRIBE:", src.Describe())
		return
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv (util-linux) is not installed: cannot drop capabilities")
	}
	cmd := exec.Command(setpriv, "--bounding-set", "-bpf,-sys_admin,-net_admin,-perfmon", "--",
		os.Args[0], "-test.run", "^TestOpenSourceAutoFallsBack$", "-test.count", "1")
	cmd.Env = append(os.Environ(), "GAPSCOPE_TEST_NO_BPF=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(string(out), "DESCRIBE: AF_PACKET ring on lo (auto: the eBPF capture is unavailable: ") {
		t.Errorf("auto without the capabilities:\n%s", out)
	}
	t.Logf("%s", bytes.TrimSpace(out))
}

// On an interface other than loopback eBPF stamps a leaving packet at
// tc's egress hook, before the interface's queue: auto keeps the ring
// there and says why, and an explicit eBPF capture carries the warning
// in its notes.
func TestOpenSourceAutoKeepsTheRingOffLoopback(t *testing.T) {
	if !stampsAsTheRing("lo") || stampsAsTheRing("no-such-interface") || isLoopback(0) {
		t.Fatal("loopback not told from other interfaces")
	}
	const a, b = "gsauto0", "gsauto1"
	if out, err := exec.Command("ip", "link", "add", a, "type", "veth", "peer", "name", b).CombinedOutput(); err != nil {
		t.Fatalf("creating a veth pair (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", a).Run() })
	if out, err := exec.Command("ip", "link", "set", a, "up").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if stampsAsTheRing(a) {
		t.Fatalf("%s taken for loopback", a)
	}
	opts := LiveOptions{Options: Options{Ports: []uint16{3306}}, RingMB: 2, Source: SourceAuto, ServerRows: true}
	src, err := OpenSource(a, opts)
	if err != nil {
		t.Fatal(err)
	}
	if d := src.Describe(); !strings.HasPrefix(d, "AF_PACKET") || !strings.Contains(d, "before the interface's queue") {
		t.Errorf("auto on %s opened %q, want the ring and why", a, d)
	}
	src.Close()
	opts.Source = SourceEBPF
	e, err := OpenSource(a, opts)
	if ebpfUnavailable(err) {
		return // the ring's half above is what auto does here
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	st, err := e.Run(ctx, func(*event.Statement) {})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(st.Notes, func(n string) bool { return strings.Contains(n, "before the interface's queue") }) {
		t.Errorf("an explicit eBPF capture on %s: notes %q, want the egress warning", a, st.Notes)
	}
}
