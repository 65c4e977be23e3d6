package diagnose

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/gapscope/gapscope/internal/event"
)

// maxExamples and maxListed bound evidence so a finding stays readable.
const (
	maxExamples = 3
	maxListed   = 10
)

// Example is one statement cited as evidence. SQL is whatever the statement
// carried, which is already redacted unless the user kept literals.
type Example struct {
	Conn      string `json:"conn"`
	ConnID    uint64 `json:"conn_id,omitempty"`
	PoolGroup *int   `json:"pool_group,omitempty"`
	SQL       string `json:"sql"`
	Digest    string `json:"digest,omitempty"`
	TReqFirst int64  `json:"t_req_first"`
	event.Parts
	ServerUS  int64 `json:"server_us,omitempty"`
	RespBytes int64 `json:"resp_bytes"`
	// LockWaitUS is the part of exec_us the statement waited for a lock,
	// when known.
	LockWaitUS int64 `json:"lock_wait_us,omitempty"`
}

func exampleOf(s *event.Statement) Example {
	sql := s.SQL
	if sql == "" {
		sql = s.DigestText
	}
	return Example{
		Conn: s.Conn, ConnID: s.ConnID, PoolGroup: s.PoolGroup, SQL: sql, Digest: s.Digest,
		TReqFirst: s.TReqFirst, Parts: s.Parts, ServerUS: s.ServerUS,
		RespBytes: s.RespBytes, LockWaitUS: s.LockWaitTime(),
	}
}

// topExamples returns up to maxExamples statements with the largest key.
func topExamples(stmts []*event.Statement, key func(*event.Statement) int64) []Example {
	sorted := slices.Clone(stmts)
	slices.SortStableFunc(sorted, func(a, b *event.Statement) int { return cmp.Compare(key(b), key(a)) })
	out := make([]Example, 0, maxExamples)
	for _, s := range sorted[:min(len(sorted), maxExamples)] {
		out = append(out, exampleOf(s))
	}
	return out
}

// parts sums the five parts of a statement's time (docs/design.md) over statements.
type parts struct {
	N                                                    int
	Client, Request, Queue, Exec, Stall, Delivery        int64
	ReqBytes, RespBytes, ZeroWindowUS, Retransmits, Rows int64
	// RowsUnknown counts the statements whose rows the capture could not
	// count (event.Statement.RowsUnknown), left out of Rows.
	RowsUnknown int64
}

func (p *parts) add(s *event.Statement) {
	p.N++
	p.Client += s.ClientUS
	p.Request += s.RequestUS
	p.Queue += s.QueueUS
	p.Exec += s.ExecUS
	p.Stall += s.SendStallUS
	p.Delivery += s.DeliveryUS
	p.ReqBytes += s.ReqBytes
	p.RespBytes += s.RespBytes
	p.ZeroWindowUS += s.ZeroWindowUS
	p.Retransmits += int64(s.Retransmits)
	if s.RowsUnknown() {
		p.RowsUnknown++
	} else {
		p.Rows += s.Rows
	}
}

// share returns part/whole, 0 when whole is 0.
func share(part, whole int64) float64 {
	if whole <= 0 {
		return 0
	}
	return float64(part) / float64(whole)
}

// round3 keeps ratios readable in JSON.
func round3(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }

// dur renders microseconds for summaries.
func dur(us int64) string {
	switch {
	case us >= 1_000_000:
		return fmt.Sprintf("%.2f s", float64(us)/1e6)
	case us >= 1_000:
		return fmt.Sprintf("%.1f ms", float64(us)/1e3)
	}
	return fmt.Sprintf("%d µs", us)
}

// size renders a byte count for summaries.
func size(b int64) string {
	switch {
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}

func pct(f float64) string { return fmt.Sprintf("%.0f%%", f*100) }

// joined returns pointers to the joined statements: only they carry the
// server-side split.
func joined(w *Window) []*event.Statement {
	var out []*event.Statement
	for i := range w.Statements {
		if w.Statements[i].Joined {
			out = append(out, &w.Statements[i])
		}
	}
	return out
}

// connTally sums statements per connection.
type connTally struct {
	Conn       string `json:"conn"`
	ConnID     uint64 `json:"conn_id,omitempty"`
	User       string `json:"user,omitempty"`
	PoolGroup  *int   `json:"pool_group,omitempty"`
	Statements int    `json:"statements"`
	Affected   int    `json:"affected"`
	TimeUS     int64  `json:"time_us"`
	MaxUS      int64  `json:"max_us"`
	RespBytes  int64  `json:"resp_bytes"`
	ZeroWindow int64  `json:"zero_window_us"`
}

// connTallies counts every statement per connection and, for the affected
// ones, the time key(s) — so "slow connections are always slow" shows as
// Affected == Statements.
func connTallies(stmts []*event.Statement, affected func(*event.Statement) bool, key func(*event.Statement) int64) []connTally {
	by := map[string]*connTally{}
	for _, s := range stmts {
		t := by[s.Conn]
		if t == nil {
			t = &connTally{Conn: s.Conn, ConnID: s.ConnID, User: s.User, PoolGroup: s.PoolGroup}
			by[s.Conn] = t
		}
		t.Statements++
		if !affected(s) {
			continue
		}
		t.Affected++
		t.TimeUS += key(s)
		t.MaxUS = max(t.MaxUS, key(s))
		t.RespBytes += s.RespBytes
		t.ZeroWindow += s.ZeroWindowUS
	}
	var out []connTally
	for _, t := range by {
		if t.Affected > 0 {
			out = append(out, *t)
		}
	}
	slices.SortFunc(out, func(a, b connTally) int { return cmp.Or(cmp.Compare(b.TimeUS, a.TimeUS), cmp.Compare(a.Conn, b.Conn)) })
	return out[:min(len(out), maxListed)]
}

// digestTally sums one part per digest.
type digestTally struct {
	Digest     string `json:"digest"`
	DigestText string `json:"digest_text"`
	Calls      int    `json:"calls"`
	TimeUS     int64  `json:"time_us"`
	MaxUS      int64  `json:"max_us"`
	Rows       int64  `json:"rows"`
	// RowsUnknown: calls whose rows the capture could not count, left
	// out of Rows.
	RowsUnknown int    `json:"rows_unknown,omitempty"`
	Example     string `json:"example"`
}

func digestTallies(stmts []*event.Statement, key func(*event.Statement) int64) []digestTally {
	by := map[string]*digestTally{}
	for _, s := range stmts {
		id := cmp.Or(s.Digest, s.DigestText, s.SQL, s.Cmd)
		t := by[id]
		if t == nil {
			t = &digestTally{Digest: s.Digest, DigestText: cmp.Or(s.DigestText, s.SQL), Example: cmp.Or(s.SQL, s.DigestText)}
			by[id] = t
		}
		t.Calls++
		t.TimeUS += key(s)
		if s.RowsUnknown() {
			t.RowsUnknown++
		} else {
			t.Rows += s.Rows
		}
		if key(s) > t.MaxUS {
			t.MaxUS, t.Example = key(s), cmp.Or(s.SQL, s.DigestText)
		}
	}
	out := make([]digestTally, 0, len(by))
	for _, t := range by {
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b digestTally) int {
		return cmp.Or(cmp.Compare(b.TimeUS, a.TimeUS), cmp.Compare(a.DigestText, b.DigestText))
	})
	return out[:min(len(out), 5)]
}
