package watch

import (
	"sync"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/join"
	"github.com/gapscope/gapscope/internal/txn"
)

// testMiss is the outlier note the tests' tallies give.
var testMiss = newTargets(true, true, newCursorRef(nil)).missNote()

// testTally is a tally of n statements queueing them on out, with a
// ledger of its own and nothing known of lost rows.
func testTally(n int, out *outputQueue, serverOnly bool) *tally {
	return newTally(tallyOptions{windowSize: n, serverOnly: serverOnly, outlierMiss: testMiss}, out, txn.New(txn.Options{}),
		func(*event.Statement) event.Reason { return event.ReasonNone })
}

// testEngine is the part of a run's pipeline from the loop to sinks: the
// wire stage, the joiner, the tally (with what the sample and the losses
// know of lost rows) and a running output stage, which end stops.
func testEngine(sample *joinSample, readsRows bool, sinks ...Sink) (*engine, func() []error) {
	losses, q := &lossLog{}, newOutputQueue(sinks)
	k := newTally(tallyOptions{windowSize: 100, outlierMiss: testMiss}, q, txn.New(txn.Options{}), lostRows{sample: sample, losses: losses}.reason)
	e := &engine{txns: &txnTally{out: q}, sample: sample, losses: losses, tally: k, readsRows: readsRows, side: &serverSide{},
		wire: testWire(), joiner: join.New(join.Options{}, k.fromJoin)}
	o := startOutput(q, sinks, testSource(k), time.Hour)
	return e, sync.OnceValue(func() []error {
		q.close()
		return o.close(&Result{})
	})
}

// testWire is a wire stage of its own, its hand-offs unread.
func testWire() *wireStage {
	return newWireStage(newOwnAddrs(), 8, true, txn.New(txn.Options{}), make(chan struct{}, 1), make(chan struct{}, 1))
}
