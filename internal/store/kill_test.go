package store

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// childEnv names the store a re-executed test binary writes to until killed.
const childEnv = "GAPSCOPE_STORE_KILL_CHILD"

func TestMain(m *testing.M) {
	if path := os.Getenv(childEnv); path != "" {
		os.Exit(writeUntilKilled(path))
	}
	os.Exit(m.Run())
}

// writeUntilKilled writes statements forever in small batches, a
// transaction after every fourth (its start the statement's), and prints
// "committed N" after each commit, so the parent knows what must survive.
func writeUntilKilled(path string) int {
	ctx := context.Background()
	s, err := Open(ctx, path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	run, err := s.StartRun(ctx, "watch", "root@tcp(127.0.0.1:3306)/", time.Now().UnixMicro())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var total int
	w := s.NewWriter(run, WriterOptions{BatchRows: 200, FlushEvery: 5 * time.Millisecond, OnFlush: func(n int, err error) {
		if err == nil {
			total += n // OnFlush runs under the writer's lock: no race
			fmt.Printf("committed %d\n", total)
		}
	}})
	for i := 0; ; i++ {
		st := statement(i)
		st.TReqFirst = int64(i) // order = commit order
		if err := w.Add(&st); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if i%4 == 0 {
			tx := transaction(i)
			tx.Start, tx.Seq = int64(i), uint32(i)
			if err := w.AddTransaction(&tx); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
	}
}

// TestKilledWriterLeavesReadableStore: kill -9 a process in the middle of
// writing; the store must open, pass the integrity check and hold every
// committed row — a gapless prefix, since each batch is one transaction.
func TestKilledWriterLeavesReadableStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "killed.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	committed := 0
	sc := bufio.NewScanner(out)
	for committed < 20_000 && sc.Scan() {
		committed, _ = strconv.Atoi(strings.TrimPrefix(sc.Text(), "committed "))
	}
	cmd.Process.Kill() // SIGKILL while the child keeps writing
	cmd.Wait()
	if committed < 20_000 {
		t.Fatalf("child stopped after %d committed rows", committed)
	}

	ctx := context.Background()
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("reopening a killed writer's store: %v", err)
	}
	defer s.Close()
	if err := s.Check(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := s.Statements(ctx, Query{})
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range got {
		if st.TReqFirst != int64(i) || st.ConnID != uint64(i) {
			t.Fatalf("row %d is statement %d: a batch was torn", i, st.TReqFirst)
		}
	}
	// The transactions committed with the statements: each one's
	// statement is there, and every one whose statement is not the last
	// row (a commit may fall between the two) too.
	txns, err := s.Transactions(ctx, Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got)+len(txns) < committed {
		t.Fatalf("%d rows survived (%d statements, %d transactions), %d were committed", len(got)+len(txns), len(got), len(txns), committed)
	}
	for i, tx := range txns {
		if tx.Start != int64(4*i) || tx.Start >= int64(len(got)) {
			t.Fatalf("transaction %d started at %d, %d statements: torn", i, tx.Start, len(got))
		}
	}
	if want := (len(got) - 2 + 4) / 4; len(txns) < want {
		t.Fatalf("%d transactions survived beside %d statements, want %d", len(txns), len(got), want)
	}
	runs, _ := s.Runs(ctx)
	if len(runs) != 1 || runs[0].EndUS != 0 {
		t.Errorf("runs %+v: the killed run should be there, unended", runs)
	}
	t.Logf("killed after %d committed rows; %d statements and %d transactions readable", committed, len(got), len(txns))
}
