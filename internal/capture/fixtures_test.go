package capture

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gapscope/gapscope/internal/event"
)

// fixtureExpect is the part of testdata/captures/NAME.expect.json (counted
// by tshark, written by testdata/gen/captures) that these tests check.
type fixtureExpect struct {
	File              string         `json:"file"`
	Scenario          string         `json:"scenario"`
	ServerPort        int            `json:"server_port"`
	Packets           int64          `json:"packets"`
	TCPConnections    int64          `json:"tcp_connections"`
	ConnectionsOpened int64          `json:"connections_opened"`
	Commands          map[string]int `json:"commands"`
	ZeroWindows       int            `json:"zero_windows"`
	Caveat            string         `json:"caveat"`
}

// TestFixtureCaptures reads every real capture under testdata/captures and
// compares with what tshark counted in it.
func TestFixtureCaptures(t *testing.T) {
	sidecars, _ := filepath.Glob("../../testdata/captures/*.expect.json")
	if len(sidecars) == 0 {
		t.Skip("no fixture captures under testdata/captures (make them with testdata/gen/captures)")
	}
	for _, sc := range sidecars {
		var exp fixtureExpect
		raw, err := os.ReadFile(sc)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &exp); err != nil {
			t.Fatalf("%s: %v", sc, err)
		}
		t.Run(exp.Scenario, func(t *testing.T) { checkFixture(t, filepath.Join(filepath.Dir(sc), exp.File), &exp) })
	}
}

func checkFixture(t *testing.T, path string, exp *fixtureExpect) {
	var got []*event.Statement
	st, err := ReadFile(context.Background(), path, Options{Ports: []uint16{uint16(exp.ServerPort)}},
		func(s *event.Statement) { got = append(got, s) })
	if err != nil {
		t.Fatal(err)
	}
	if st.Packets != exp.Packets {
		t.Errorf("read %d packets, tshark %d", st.Packets, exp.Packets)
	}
	if st.Flows != exp.TCPConnections {
		t.Errorf("%d MySQL connections, tshark %d TCP streams", st.Flows, exp.TCPConnections)
	}
	if want := exp.TCPConnections - exp.ConnectionsOpened; st.MidStreamFlows != want {
		t.Errorf("%d mid-stream connections, want %d", st.MidStreamFlows, want)
	}
	cmds := map[string]int{}
	for _, s := range got {
		cmds[s.Cmd]++
		if s.HasResponse() && s.ClientUS != s.TRespLast-s.TReqFirst {
			t.Errorf("inconsistent times %+v", s)
		}
		if s.Cmd == "COM_STMT_EXECUTE" && s.SQL == "" && st.MidStreamFlows == 0 {
			t.Errorf("COM_STMT_EXECUTE without text: %+v", s)
		}
	}
	switch {
	case strings.Contains(exp.Scenario, "tls"):
		if cmds["TLS"] == 0 || st.TLSFlows == 0 {
			t.Errorf("no TLS flights: %v", cmds)
		}
	case exp.Caveat == "" && st.MidStreamFlows == 0:
		for cmd, n := range exp.Commands {
			if cmds[cmd] != n {
				t.Errorf("%s: %d decoded, tshark %d", cmd, cmds[cmd], n)
			}
		}
	}
	if exp.ZeroWindows > 0 {
		var zw int64
		for _, s := range got {
			zw += s.ZeroWindowUS
		}
		if zw == 0 {
			t.Errorf("tshark saw %d zero windows, no statement has a stall", exp.ZeroWindows)
		}
	}
}

// BenchmarkReadFixture reads the real sysbench capture (prepared statements)
// end to end: gzip, pcap, decode, tracking, MySQL decoding, statements.
func BenchmarkReadFixture(b *testing.B) {
	path := "../../testdata/captures/sysbench-ps.pcap.gz"
	if _, err := os.Stat(path); err != nil {
		b.Skip("no sysbench-ps fixture")
	}
	var packets, stmts int64
	b.ReportAllocs()
	for b.Loop() {
		st, err := ReadFile(context.Background(), path, Options{Ports: []uint16{fixturePort(b, path)}}, func(*event.Statement) {})
		if err != nil {
			b.Fatal(err)
		}
		packets, stmts = packets+st.Packets, stmts+st.Statements
	}
	b.ReportMetric(float64(packets)/b.Elapsed().Seconds(), "packets/s")
	b.ReportMetric(float64(stmts)/b.Elapsed().Seconds(), "statements/s")
}

func fixturePort(b *testing.B, path string) uint16 {
	var exp fixtureExpect
	raw, err := os.ReadFile(strings.TrimSuffix(strings.TrimSuffix(path, ".gz"), ".pcap") + ".expect.json")
	if err != nil || json.Unmarshal(raw, &exp) != nil {
		b.Fatalf("sidecar of %s: %v", path, err)
	}
	return uint16(exp.ServerPort)
}
