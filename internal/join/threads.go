package join

import "github.com/gapscope/gapscope/internal/collect"

// maxThreadMap bounds the learned THREAD_ID -> connection map.
const maxThreadMap = 65_536

// connOfThread finds the connection of a server row whose thread had ended
// before the row was read, so that performance_schema no longer says which
// connection it served: a short-lived connection (connect, query, quit)
// often ends within one poll. The wire knows the connection from its
// handshake; the row is attributed to the one connection with a pending
// wire statement it fits, and the thread is remembered for its other rows.
// Background threads and ambiguous rows return 0.
func (j *Joiner) connOfThread(r *collect.ServerStatement) uint64 {
	if r.ThreadID == 0 || r.StartUS == 0 {
		return 0
	}
	if id, ok := j.threads[r.ThreadID]; ok {
		return id
	}
	var found uint64
	for id, c := range j.conns {
		if c.wires.len() == 0 {
			continue
		}
		k, fit := j.bestWire(c, r)
		if k >= 0 && answerStart(c, k) >= noEnd {
			// Nothing bounds that wire statement yet: a command without a
			// response, last on its connection (a COM_QUIT always is),
			// which bestWire fits to any later row. The server starts such
			// a command as it reads it: the later the row starts after the
			// request, the weaker the evidence that the thread was this
			// connection's. Unpenalised, the COM_QUIT of a connection that
			// had closed claimed the thread of a later short-lived
			// connection, and with it that connection's rows.
			fit += max(r.StartUS-c.wires.at(k).s.TReqLast, 0)
		}
		if k < 0 || fit > j.fitTolUS {
			continue
		}
		if found != 0 {
			return 0 // two connections fit: do not guess
		}
		found = id
	}
	if found != 0 {
		if len(j.threads) >= maxThreadMap {
			clear(j.threads)
		}
		j.threads[r.ThreadID] = found
		j.stats.ThreadsLearned++
	}
	return found
}

// anonRow is a server row of an ended thread waiting for its wire statement.
type anonRow struct {
	r     collect.ServerStatement
	added int64
}

// maxAnon bounds the rows held for attribution; past it they are counted
// as background at once.
const maxAnon = 4096

func (j *Joiner) holdAnon(r *collect.ServerStatement, nowUS int64) {
	if r.ThreadID == 0 || r.StartUS == 0 || len(j.anon) >= maxAnon {
		j.stats.Background++
		return
	}
	j.anon = append(j.anon, anonRow{r: *r, added: nowUS})
}

// retryAnon attributes held rows now that another wire statement came.
func (j *Joiner) retryAnon() {
	kept := j.anon[:0]
	for i := range j.anon {
		a := &j.anon[i]
		base, shift := j.clockOf(&a.r)
		row := a.r
		row.StartUS, row.EndUS = row.StartUS-shift, row.EndUS-shift
		id := j.connOfThread(&row)
		if id == 0 {
			kept = append(kept, *a)
			continue
		}
		c := j.conn(id)
		j.pushRow(c, &a.r, id, base, shift, a.added)
		j.settle(c, false)
	}
	clear(j.anon[len(kept):])
	j.anon = kept
}

// expireAnon gives up held rows older than cutoff: background threads, or
// connections whose statements never reached the wire.
func (j *Joiner) expireAnon(cutoff int64) {
	kept := j.anon[:0]
	for _, a := range j.anon {
		if a.added <= cutoff {
			j.stats.Background++
			continue
		}
		kept = append(kept, a)
	}
	clear(j.anon[len(kept):])
	j.anon = kept
}
