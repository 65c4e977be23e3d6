package watch

import (
	"context"
	"database/sql"
	"time"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/join"
)

// connReader reads the processlist, on the poller's goroutine: it tells
// the joiner the connection ids of connections opened before the capture
// started (their handshake is not on the wire), the join sample the
// connections it chooses from, and the lock reader the statements running
// long (the processlist's time is all there is with performance_schema's
// current statements off).
type connReader struct {
	db     *sql.DB
	procs  collect.ProcesslistReader
	own    *ownAddrs
	joiner *join.Joiner
	sample *joinSample
	notes  *noteList
	locks  *lockReader
}

func newConnReader(db *sql.DB, own *ownAddrs, joiner *join.Joiner, sample *joinSample, notes *noteList, locks *lockReader) *connReader {
	return &connReader{db: db, own: own, joiner: joiner, sample: sample, notes: notes, locks: locks}
}

// read reads the processlist once.
func (r *connReader) read(ctx context.Context) {
	procs, err := r.procs.Read(ctx, r.db)
	if err != nil {
		if ctx.Err() != nil {
			return // stopping: nothing is missed
		}
		r.notes.add("processlist unreadable (%v): connections opened before watch started stay unjoined", err)
		return
	}
	var long []longStatement
	now := time.Now().UnixMicro()
	for _, pr := range procs {
		if _, ok := hostPort(pr.Host); ok {
			r.joiner.MapConn(pr.Host, pr.ID)
		}
		if pr.Command == "Query" && pr.TimeMS >= lockReadAfter.Milliseconds() && !r.own.isOwnHost(pr.Host) {
			long = append(long, longStatement{connID: pr.ID, startUS: now - pr.TimeMS*1000})
		}
	}
	r.sample.learn(procs)
	if len(long) > 0 {
		r.locks.read(ctx, long)
	}
}
