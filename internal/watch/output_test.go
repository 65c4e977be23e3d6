package watch

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/capture"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/join"
)

// testOutput is a tally whose statements reach sinks through a running
// output stage.
type testOutput struct {
	k   *tally
	src *snapshotSource
	// end delivers what is queued and closes the sinks with the final
	// snapshot (once: later calls return the same errors).
	end func() []error
}

func startTestOutput(window int, every time.Duration, sinks ...Sink) *testOutput {
	q := newOutputQueue(sinks)
	k := testTally(window, q, false)
	src := testSource(k)
	o := startOutput(q, sinks, src, every)
	return &testOutput{k: k, src: src, end: sync.OnceValue(func() []error {
		q.close()
		return o.close(&Result{Findings: []event.Finding{{Code: "TEST"}}, Notes: []string{"the run's note"}})
	})}
}

// testSource is a snapshot source over k with nothing else to read.
func testSource(k *tally) *snapshotSource {
	return &snapshotSource{tally: k, txns: &txnTally{out: k.out}, side: &serverSide{}, sample: newJoinSample(capture.All, noBudget{}, newOwnAddrs()),
		joiner: join.New(join.Options{}, func(*event.Statement) {}), queueDrops: new(atomic.Int64)}
}

// recordingSink records the calls it gets (on the output stage's
// goroutine; read once the stage ended).
type recordingSink struct {
	takes        Takes
	stmts, txns  int
	snaps        []*Snapshot
	closes       []*Snapshot
	stmtsAtClose int
	err          error
}

func (r *recordingSink) Takes() Takes                   { return r.takes }
func (r *recordingSink) Statement(*event.Statement)     { r.stmts++ }
func (r *recordingSink) Transaction(*event.Transaction) { r.txns++ }
func (r *recordingSink) Snapshot(s *Snapshot)           { r.snaps = append(r.snaps, s) }
func (r *recordingSink) Close(final *Snapshot) error {
	r.closes = append(r.closes, final)
	r.stmtsAtClose = r.stmts
	return r.err
}

// Every sink is closed exactly once, with the run's final snapshot, after
// every statement and transaction it takes reached it; it gets only what
// it takes: a sink taking no snapshots never receives one, one taking no
// statements none of them. What Close returns is collected.
func TestSinksLifecycle(t *testing.T) {
	stmts := &recordingSink{takes: TakesStatements | TakesTransactions, err: errors.New("disk full")}
	snaps := &recordingSink{takes: TakesSnapshots}
	out := startTestOutput(10, time.Millisecond, stmts, snaps)
	const n = 1000
	for i := range n {
		out.k.add(&event.Statement{Joined: true, TRespLast: int64(i + 1)})
	}
	out.k.out.putTxn(&event.Transaction{})
	time.Sleep(10 * time.Millisecond) // snapshots meanwhile
	errs := out.end()
	out.end() // a second end closes nothing again
	for name, r := range map[string]*recordingSink{"statements": stmts, "snapshots": snaps} {
		if len(r.closes) != 1 || !r.closes[0].Final || len(r.closes[0].Findings) != 1 || len(r.closes[0].Health.Notes) != 1 {
			t.Errorf("%s sink: closed %d times, final %+v", name, len(r.closes), r.closes)
		}
	}
	if stmts.stmtsAtClose != n || stmts.txns != 1 || len(stmts.snaps) != 0 {
		t.Errorf("statement sink: %d of %d statements before its Close, %d transactions, %d snapshots", stmts.stmtsAtClose, n, stmts.txns, len(stmts.snaps))
	}
	if snaps.stmts != 0 || snaps.txns != 0 || len(snaps.snaps) == 0 || snaps.snaps[0].Final {
		t.Errorf("snapshot sink: %d statements, %d transactions, snapshots %v", snaps.stmts, snaps.txns, snaps.snaps)
	}
	if len(errs) != 1 || errs[0] != stmts.err {
		t.Errorf("close errors %v, want the statement sink's", errs)
	}
}

// A run that cannot start closes its sinks all the same, once.
func TestSinksClosedWhenRunFails(t *testing.T) {
	r := &recordingSink{takes: TakesStatements, err: errors.New("closing")}
	_, err := Run(context.Background(), Options{DSN: "nobody@tcp(127.0.0.1:1)/", Sinks: []Sink{r}})
	if err == nil || !errors.Is(err, r.err) || len(r.closes) != 1 || !r.closes[0].Final {
		t.Errorf("run error %v; sink closed %d times", err, len(r.closes))
	}
}
