package capture

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/sandbox"
)

// End-to-end: a private MariaDB, real clients (go-sql-driver, text and
// server-side prepared statements), captured by tcpdump and by our own
// AF_PACKET ring on lo.

var (
	srvOnce sync.Once
	srvInst *sandbox.Instance
)

// server returns one sandbox shared by this package's tests.
func server(t *testing.T) *sandbox.Instance {
	t.Helper()
	if testing.Short() {
		t.Skip("sandbox test: skipped with -short")
	}
	srvOnce.Do(func() {
		inst, err := sandbox.Start(context.Background(), sandbox.Options{})
		if err != nil {
			t.Fatalf("starting sandbox: %v", err)
		}
		srvInst = inst
	})
	if srvInst == nil {
		t.Fatal("sandbox failed to start earlier")
	}
	return srvInst
}

func TestMain(m *testing.M) {
	code := m.Run()
	if srvInst != nil {
		srvInst.Stop()
	}
	os.Exit(code)
}

// workload runs statements we can recognise afterwards and returns what the
// capture must contain: SQL text (with literals) per command.
type expected struct {
	queries  []string // COM_QUERY texts
	executes []string // COM_STMT_EXECUTE texts with parameters interpolated
	errors   int
}

func runWorkload(t *testing.T, inst *sandbox.Instance, tag string) expected {
	t.Helper()
	db, err := sql.Open("mysql", inst.DSN(""))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	var exp expected
	exec := func(q string) {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		exp.queries = append(exp.queries, q)
	}
	exec("CREATE DATABASE IF NOT EXISTS cap_" + tag)
	exec("CREATE TABLE IF NOT EXISTS cap_" + tag + ".t (id INT PRIMARY KEY, v VARCHAR(20))")
	exec("DELETE FROM cap_" + tag + ".t")
	for i := range 5 {
		exec(fmt.Sprintf("INSERT INTO cap_%s.t VALUES (%d, 'row%d')", tag, i, i))
	}
	var n int
	q := "SELECT COUNT(*) FROM cap_" + tag + ".t WHERE v LIKE 'row%'"
	if err := db.QueryRow(q).Scan(&n); err != nil || n != 5 {
		t.Fatalf("count %d %v", n, err)
	}
	exp.queries = append(exp.queries, q)
	// Arguments without interpolateParams: server-side prepared statements.
	stmt, err := db.Prepare("SELECT v FROM cap_" + tag + ".t WHERE id = ?")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		var v string
		if err := stmt.QueryRow(i).Scan(&v); err != nil {
			t.Fatal(err)
		}
		exp.executes = append(exp.executes, fmt.Sprintf("SELECT v FROM cap_%s.t WHERE id = %d", tag, i))
	}
	stmt.Close()
	if _, err := db.Exec("SELECT * FROM cap_" + tag + ".no_such_table"); err == nil {
		t.Fatal("error query succeeded")
	}
	exp.errors = 1
	return exp
}

// checkCaptured asserts every expected statement was decoded with its text
// and a latency.
func checkCaptured(t *testing.T, got []*event.Statement, exp expected) {
	t.Helper()
	byText := map[string][]*event.Statement{}
	errs := 0
	for _, s := range got {
		byText[s.Cmd+" "+s.SQL] = append(byText[s.Cmd+" "+s.SQL], s)
		if s.Error != nil && s.Error.Code == 1146 {
			errs++
		}
	}
	check := func(cmd, text string) {
		ss := byText[cmd+" "+text]
		if len(ss) == 0 {
			t.Errorf("%s %q not captured", cmd, text)
			return
		}
		s := ss[0]
		if s.ClientUS <= 0 || s.TRespLast < s.TReqLast || s.User != "root" || s.ConnID == 0 || s.Retransmits != 0 {
			t.Errorf("%s %q: client_us %d user %q conn_id %d retransmits %d", cmd, text, s.ClientUS, s.User, s.ConnID, s.Retransmits)
		}
	}
	for _, q := range exp.queries {
		check("COM_QUERY", q)
	}
	for _, q := range exp.executes {
		check("COM_STMT_EXECUTE", q)
	}
	if errs != exp.errors {
		t.Errorf("%d statements with error 1146, want %d", errs, exp.errors)
	}
}

func TestEndToEndTcpdumpFile(t *testing.T) {
	inst := server(t)
	if _, err := exec.LookPath("tcpdump"); err != nil {
		t.Fatal("tcpdump not installed")
	}
	path := filepath.Join(t.TempDir(), "lo.pcap")
	stop := sandbox.Tcpdump(t, path, inst.Port)
	exp := runWorkload(t, inst, "file")
	stop()
	var got []*event.Statement
	st, err := ReadFile(context.Background(), path, Options{Ports: []uint16{uint16(inst.Port)}, KeepLiterals: true},
		func(s *event.Statement) { got = append(got, s) })
	if err != nil {
		t.Fatal(err)
	}
	checkCaptured(t, got, exp)
	if st.Retransmits != 0 || st.Gaps != 0 || st.Flows == 0 {
		t.Errorf("stats %+v", st)
	}
	// Redacted by default: same statements, no literals.
	var redacted []*event.Statement
	if _, err := ReadFile(context.Background(), path, Options{Ports: []uint16{uint16(inst.Port)}},
		func(s *event.Statement) { redacted = append(redacted, s) }); err != nil {
		t.Fatal(err)
	}
	if len(redacted) != len(got) {
		t.Fatalf("%d statements redacted, %d with literals", len(redacted), len(got))
	}
	for _, s := range redacted {
		if strings.Contains(s.SQL, "row3") || strings.Contains(s.SQL, "'row%'") {
			t.Errorf("literal leaked: %q", s.SQL)
		}
	}
}

func TestEndToEndLive(t *testing.T) {
	inst := server(t)
	if os.Geteuid() != 0 {
		t.Skip("live capture needs root")
	}
	live, err := OpenLive("lo", LiveOptions{Options: Options{Ports: []uint16{uint16(inst.Port)}, KeepLiterals: true}})
	if err != nil {
		t.Fatal(err)
	}
	tally := newFrameTally(uint16(inst.Port))
	live.tap = tally.add
	ctx, cancel := context.WithCancel(context.Background())
	var got []*event.Statement
	var st Stats
	done := make(chan error)
	quit := make(chan struct{}, 1)
	go func() {
		var err error
		st, err = live.Run(ctx, func(s *event.Statement) {
			got = append(got, s)
			if s.Cmd == "COM_QUIT" {
				select { // emit must never block
				case quit <- struct{}{}:
				default:
				}
			}
		})
		done <- err
	}()
	exp := runWorkload(t, inst, "live") // ends with the client's COM_QUIT
	select {
	case <-quit:
	case <-time.After(10 * time.Second):
		t.Error("COM_QUIT not seen within 10 s")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	checkCaptured(t, got, exp)
	// lo hands every packet to packet sockets twice; the filter keeps one,
	// and nothing of other ports, from the first frame on (the workload's
	// single connection opens after OpenLive). A loaded loopback does
	// retransmit now and then (tail-loss probes): those frames differ from
	// the original (IP id, TCP timestamp) and are the only retransmits allowed.
	if tally.dups != 0 || tally.foreign != 0 {
		t.Errorf("%d of %d frames are loopback duplicates, %d on other ports", tally.dups, tally.frames, tally.foreign)
	}
	if st.Retransmits > int64(tally.resent) || st.KernelDrops != 0 || st.Flows != 1 || st.MidStreamFlows != 0 || st.NonMySQLFlows != 0 {
		t.Errorf("stats %+v; %d real retransmissions in the frames", st, tally.resent)
	}
}
