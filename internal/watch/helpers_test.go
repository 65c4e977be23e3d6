package watch

import (
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/join"
	"github.com/gapscope/gapscope/internal/txn"
)

// testMiss is the outlier note the tests' tallies give.
var testMiss = newTargets(true, true, newCursorRef(nil)).missNote()

// testTally is a tally of n statements handing them to out, with a ledger
// of its own and nothing known of lost rows.
func testTally(n int, out *outputStage, serverOnly bool) *tally {
	return newTally(tallyOptions{windowSize: n, serverOnly: serverOnly, outlierMiss: testMiss}, out, txn.New(txn.Options{}),
		func(*event.Statement) event.Reason { return event.ReasonNone })
}

// testEngine is the part of a run's pipeline from the loop to the sinks:
// the wire stage, the joiner, the tally (with what the sample and the
// losses know of lost rows) and out.
func testEngine(sample *joinSample, out *outputStage, readsRows bool) *engine {
	losses := &lossLog{}
	k := newTally(tallyOptions{windowSize: 100, outlierMiss: testMiss}, out, txn.New(txn.Options{}), lostRows{sample: sample, losses: losses}.reason)
	return &engine{txns: &txnTally{}, sample: sample, losses: losses, tally: k, readsRows: readsRows, side: &serverSide{},
		wire:   newWireStage(newOwnAddrs(), 8, true, txn.New(txn.Options{}), make(chan struct{}, 1), make(chan struct{}, 1)),
		joiner: join.New(join.Options{}, k.fromJoin)}
}

// testWire is a wire stage of its own, its hand-offs unread.
func testWire() *wireStage {
	return newWireStage(newOwnAddrs(), 8, true, txn.New(txn.Options{}), make(chan struct{}, 1), make(chan struct{}, 1))
}
