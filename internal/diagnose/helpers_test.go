package diagnose

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
)

// stmt builds a joined statement whose five parts sum to client_us, as the
// join guarantees. t is its start in µs after an arbitrary origin.
func stmt(conn string, connID uint64, sql string, t, request, queue, exec, stall, delivery int64) event.Statement {
	const origin = 1_795_304_997_000_000
	client := request + queue + exec + stall + delivery
	return event.Statement{
		Conn: conn, ConnID: connID, User: "app", DB: "shop", Cmd: "COM_QUERY", SQL: sql,
		Digest: digestOf(sql), DigestText: sql,
		TReqFirst: origin + t, TReqLast: origin + t + request, TRespFirst: origin + t + client - delivery, TRespLast: origin + t + client,
		Parts:    event.Parts{ClientUS: client, RequestUS: request, QueueUS: queue, ExecUS: exec, SendStallUS: stall, DeliveryUS: delivery},
		ServerUS: exec + stall, Rows: 1, ReqBytes: int64(len(sql) + 5), RespBytes: 61, Joined: true,
	}
}

func digestOf(sql string) string {
	var h uint64 = 14695981039346656037
	for _, c := range []byte(sql) {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return fmt.Sprintf("%016x", h)
}

// healthy returns a window of 200 small exec-dominated statements on four
// connections: what a well-configured OLTP server looks like.
func healthy() []event.Statement {
	var out []event.Statement
	sqls := []string{"SELECT c FROM sbtest1 WHERE id=?", "UPDATE sbtest1 SET k=k+? WHERE id=?", "COMMIT", "BEGIN"}
	for i := range 200 {
		conn := []string{"10.0.0.5:40001>10.0.0.9:3306", "10.0.0.5:40002>10.0.0.9:3306", "10.0.0.6:40003>10.0.0.9:3306", "10.0.0.6:40004>10.0.0.9:3306"}[i%4]
		out = append(out, stmt(conn, uint64(100+i%4), sqls[i%len(sqls)], int64(i)*1000, 8, 40+int64(i%7)*10, 250+int64(i%13)*40, 0, 30))
	}
	return out
}

// fixture is one testdata/vars file.
type fixture struct {
	Flavor      string                         `json:"flavor"`
	Version     string                         `json:"version"`
	Source      string                         `json:"source"`
	Vars        map[string]string              `json:"vars"`
	Consumers   map[string]bool                `json:"consumers"`
	Instruments map[string]collect.Instruments `json:"instruments"`
}

// fixtures loads every variable set by glob so none goes unused.
func fixtures(t *testing.T) map[string]fixture {
	t.Helper()
	paths, err := filepath.Glob("testdata/vars/*.json")
	if err != nil || len(paths) < 7 {
		t.Fatalf("want at least 7 variable fixtures, got %d (%v)", len(paths), err)
	}
	out := map[string]fixture{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var f fixture
		if err := json.Unmarshal(data, &f); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out[strings.TrimSuffix(filepath.Base(p), ".json")] = f
	}
	return out
}

// window turns a fixture into a fresh Window the test may mutate.
func (f fixture) window() *Window {
	return &Window{
		Vars: maps.Clone(f.Vars), Status: map[string]string{"Threads_running": "2", "Threads_connected": "10", "Max_used_connections": "12"},
		Flavor: f.Flavor, Version: f.Version, Cores: 4, Consumers: maps.Clone(f.Consumers),
		Instruments: maps.Clone(f.Instruments), SettingsSource: "fixture",
	}
}

// codes returns the codes of findings, in order.
func codes(fs []event.Finding) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Code
	}
	return out
}

// only returns the findings with code, failing unless there are want of them.
func only(t *testing.T, fs []event.Finding, code string, want int) []event.Finding {
	t.Helper()
	var out []event.Finding
	for _, f := range fs {
		if f.Code == code {
			out = append(out, f)
		}
	}
	if len(out) != want {
		t.Fatalf("want %d %s finding(s), got %d: %s", want, code, len(out), dump(fs))
	}
	return out
}

func dump(fs []event.Finding) string {
	b, _ := json.MarshalIndent(fs, "", "  ")
	return string(b)
}

// checkFinding asserts what every finding must have.
func checkFinding(t *testing.T, f event.Finding) {
	t.Helper()
	if f.Code == "" || f.Summary == "" || f.Fix == "" || len(f.Evidence) == 0 {
		t.Errorf("finding lacks code, summary, fix or evidence: %s", dump([]event.Finding{f}))
	}
	if _, err := json.Marshal(f); err != nil {
		t.Errorf("finding does not marshal: %v", err)
	}
}
