package offline

import (
	"github.com/gapscope/gapscope/internal/diagnose"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/report"
	"github.com/gapscope/gapscope/internal/txn"
)

// lockPass runs a capture's statements through a transaction ledger
// before the profile sees them: each statement is placed on the wire at
// once (txn.Ledger.Wire), and finished (its lock wait attributed) once the
// capture has gone lockHold past its response, so that a release the
// capture decoded just after it (a COMMIT whose answer left after the
// waiter's, say) is known when it is judged.
type lockPass struct {
	ledger *txn.Ledger
	next   func(*event.Statement)
	held   []*event.Statement // in the order the capture gave them
	newest int64              // the latest response seen (Unix µs)
}

// lockHold is how long past a statement's response the capture must have
// gone before it is finished: the ledger's slack and then some.
const lockHold = 50_000

func newLockPass(emit func(*event.Transaction), next func(*event.Statement)) *lockPass {
	return &lockPass{ledger: txn.New(txn.Options{Emit: emit}), next: next}
}

// add is the capture's callback.
func (p *lockPass) add(s *event.Statement) {
	p.ledger.Wire(s)
	p.newest = max(p.newest, s.TRespLast, s.TReqLast)
	p.held = append(p.held, s)
	n := 0
	for n < len(p.held) && max(p.held[n].TRespLast, p.held[n].TReqLast) < p.newest-lockHold {
		n++
	}
	p.release(n)
}

// flush finishes every statement held, then the transactions still open.
func (p *lockPass) flush() {
	p.release(len(p.held))
	p.ledger.Close()
}

func (p *lockPass) release(n int) {
	for _, s := range p.held[:n] {
		p.ledger.Finished(s, false, p.next) // already held lockHold behind the wire
	}
	m := copy(p.held, p.held[n:])
	clear(p.held[m:])
	p.held = p.held[:m]
}

// txnKeep keeps the transactions for the result (the most recent,
// bounded) and writes each to the --txns file.
type txnKeep struct {
	file  *report.EventsFile
	wire  *diagnose.WireWindow
	txns  []event.Transaction
	count int64
}

const maxKeptTxns = 4096

func newTxnKeep(file *report.EventsFile, wire *diagnose.WireWindow) *txnKeep {
	return &txnKeep{file: file, wire: wire}
}

func (k *txnKeep) add(t *event.Transaction) {
	k.count++
	k.file.WriteTxn(t)
	k.wire.AddTransaction(t)
	if len(k.txns) >= maxKeptTxns {
		k.txns = append(k.txns[:0], k.txns[maxKeptTxns/2:]...)
	}
	k.txns = append(k.txns, *t)
}
