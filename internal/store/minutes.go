package store

import (
	"context"
	"database/sql"

	"github.com/gapscope/gapscope/internal/event"
)

// maxMinuteDigests bounds the digests counted apart in one minute; the
// statements of further digests that minute are counted as "(other)". At
// the bound a week of minutes is 10M rows (about 1 GB): real servers
// run hundreds of digests a minute, not thousands.
const maxMinuteDigests = 1000

const otherDigest = "(other)"

// minuteKey names one digest's minute.
type minuteKey struct {
	minute int64 // Unix µs, a multiple of a minute
	digest string
}

// minuteRow is one digest's totals in one minute.
type minuteRow struct {
	text                                            string
	calls, kept, errors, joined                     int64
	clientUS, maxClientUS, queueUS, execUS, stallUS int64
	serverUS, rows                                  int64
	lockWaits, lockWaitUS                           int64
}

// minutes counts every statement a Writer sees per digest and minute,
// kept or not, until the minute is written.
type minutes struct {
	rows   map[minuteKey]*minuteRow
	perMin map[int64]int // digests counted apart in each pending minute
	latest int64         // the newest minute seen
}

const minuteUS = 60_000_000

func (m *minutes) add(s *event.Statement, kept bool) {
	if m.rows == nil {
		m.rows, m.perMin = map[minuteKey]*minuteRow{}, map[int64]int{}
	}
	minute := s.TReqFirst - s.TReqFirst%minuteUS
	m.latest = max(m.latest, minute)
	k := minuteKey{minute, statementDigest(s)}
	r := m.rows[k]
	if r == nil {
		if m.perMin[minute] >= maxMinuteDigests {
			k.digest = otherDigest
			r = m.rows[k]
		}
		if r == nil {
			r = &minuteRow{text: s.DigestText}
			if k.digest == otherDigest {
				r.text = otherDigest
			}
			m.rows[k] = r
			m.perMin[minute]++
		}
	}
	r.count(s, kept)
}

func (r *minuteRow) count(s *event.Statement, kept bool) {
	r.calls++
	if kept {
		r.kept++
	}
	if s.Error != nil {
		r.errors++
	}
	if s.Joined {
		r.joined++
	}
	r.clientUS += s.ClientUS
	r.maxClientUS = max(r.maxClientUS, s.ClientUS)
	r.queueUS += s.QueueUS
	r.execUS += s.ExecUS
	r.stallUS += s.SendStallUS
	r.serverUS += s.ServerUS
	if !s.RowsUnknown() { // a cut answer's rows: not 0, unknown
		r.rows += s.Rows
	}
	if w := s.LockWaitTime(); w > 0 { // as the profile counts them (report's lock_waits)
		r.lockWaits++
		r.lockWaitUS += w
	}
}

// statementDigest is the key a statement is counted under: its digest,
// else its text, else its command.
func statementDigest(s *event.Statement) string {
	switch {
	case s.Digest != "":
		return s.Digest
	case s.DigestText != "":
		return s.DigestText
	}
	return "(" + s.Cmd + ")"
}

// done reports whether some pending minute is complete (all: every one).
func (m *minutes) done(all bool) bool {
	for minute := range m.perMin {
		if all || minute < m.latest {
			return true
		}
	}
	return false
}

// write upserts the complete minutes (all: every pending one) and forgets
// them. Statements of a minute already written add to its row.
func (m *minutes) write(ctx context.Context, tx *sql.Tx, run int64, all bool) error {
	if !m.done(all) {
		return nil
	}
	ps, err := tx.PrepareContext(ctx, `INSERT INTO digest_minutes (run_id, minute_us, digest, digest_text, calls, kept,
 errors, joined, client_us, max_client_us, queue_us, exec_us, send_stall_us, server_us, "rows", lock_waits, lock_wait_us)
 VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
 ON CONFLICT (run_id, minute_us, digest) DO UPDATE SET calls = calls + excluded.calls, kept = kept + excluded.kept,
 errors = errors + excluded.errors, joined = joined + excluded.joined, client_us = client_us + excluded.client_us,
 max_client_us = MAX(max_client_us, excluded.max_client_us), queue_us = queue_us + excluded.queue_us,
 exec_us = exec_us + excluded.exec_us, send_stall_us = send_stall_us + excluded.send_stall_us,
 server_us = server_us + excluded.server_us, "rows" = "rows" + excluded."rows",
 lock_waits = lock_waits + excluded.lock_waits, lock_wait_us = lock_wait_us + excluded.lock_wait_us`)
	if err != nil {
		return err
	}
	defer ps.Close()
	for k, r := range m.rows {
		if !all && k.minute >= m.latest {
			continue
		}
		if _, err := ps.ExecContext(ctx, run, k.minute, k.digest, r.text, r.calls, r.kept, r.errors, r.joined,
			r.clientUS, r.maxClientUS, r.queueUS, r.execUS, r.stallUS, r.serverUS, r.rows, r.lockWaits, r.lockWaitUS); err != nil {
			return err
		}
	}
	return nil
}

// forget drops what write wrote, once its transaction committed.
func (m *minutes) forget(all bool) {
	for k := range m.rows {
		if all || k.minute < m.latest {
			delete(m.rows, k)
			delete(m.perMin, k.minute)
		}
	}
}
