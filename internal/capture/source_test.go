//go:build linux

package capture

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// OpenSource opens what --capture or GAPSCOPE_CAPTURE names, packet by
// default, auto as eBPF where it opens; a name it does not know is an
// error, not a silent default.
func TestOpenSourcePicks(t *testing.T) {
	_, port := liveListener(t)
	opts := LiveOptions{Options: Options{Ports: []uint16{port}}, RingMB: 2}
	for _, c := range []struct{ flag, env, want string }{
		{"", "", "AF_PACKET"},
		{"", "packet", "AF_PACKET"},
		{"", "ebpf", "eBPF"},
		{"packet", "ebpf", "AF_PACKET"},
		{"ebpf", "", "eBPF"},
		{"auto", "", "eBPF"},
	} {
		t.Setenv(SourceEnv, c.env)
		opts.Source = c.flag
		src, err := OpenSource("lo", opts)
		if ebpfUnavailable(err) {
			t.Skipf("no eBPF capture here: %v", err)
		}
		if err != nil {
			t.Fatalf("flag %q env %q: %v", c.flag, c.env, err)
		}
		if d := src.Describe(); !strings.HasPrefix(d, c.want) {
			t.Errorf("flag %q env %q: opened %q, want %s", c.flag, c.env, d, c.want)
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
		src, err := OpenSource("lo", LiveOptions{Options: Options{Ports: []uint16{port}}, RingMB: 2, Source: SourceAuto})
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
	if !strings.Contains(string(out), "DESCRIBE: AF_PACKET ring on lo (eBPF capture unavailable: ") {
		t.Errorf("auto without the capabilities:\n%s", out)
	}
	t.Logf("%s", bytes.TrimSpace(out))
}
