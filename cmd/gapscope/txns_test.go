package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/gapscope/gapscope/internal/event"
)

// analyze --txns writes one line per transaction of the capture: sysbench
// runs every oltp_read_write transaction as BEGIN ... COMMIT, so each line
// ends in a commit (or is still open at the capture's end) and holds
// statements whose count and times agree with the events.
func TestAnalyzeTxnsFile(t *testing.T) {
	dir := t.TempDir()
	txns, events := filepath.Join(dir, "txns.jsonl"), filepath.Join(dir, "events.jsonl")
	if _, err := runCmd(t, "analyze", "--txns", txns, "--events", events, "--format", "json",
		filepath.Join("..", "..", "testdata", "captures", "sysbench-text.pcap.gz")); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(txns)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	inTxn := map[string]int{} // statements the events place in a transaction, by conn and number
	for _, s := range readEvents(t, events) {
		if s.TxnSeq != 0 && s.Cmd != "COM_QUIT" {
			inTxn[fmt.Sprint(s.Conn, "#", s.TxnSeq)]++
		}
	}
	sc := bufio.NewScanner(f)
	n, commits := 0, 0
	for sc.Scan() {
		var x event.Transaction
		if err := json.Unmarshal(sc.Bytes(), &x); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		n++
		if x.EndKind == "commit" {
			commits++
		}
		if x.Statements < 2 || x.OpenUS != x.End-x.Start || x.InAppUS > x.OpenUS || x.MaxIdleUS > x.InAppUS || x.FirstSQL == "" {
			t.Errorf("transaction %+v", x)
		}
		if got := inTxn[fmt.Sprint(x.Conn, "#", x.Seq)]; got != x.Statements {
			t.Errorf("transaction %s #%d: %d statements, the events place %d in it", x.Conn, x.Seq, x.Statements, got)
		}
	}
	if n == 0 || commits < n*9/10 {
		t.Errorf("%d transactions, %d ending in a commit", n, commits)
	}
}
