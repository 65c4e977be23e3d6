package event

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// TxnEnd says how a transaction ended; its text is its stable name.
type TxnEnd uint8

const (
	TxnEndNone TxnEnd = iota
	// TxnEndCommit, TxnEndRollback: the statement that ended the
	// transaction was a COMMIT or a ROLLBACK (read from its text).
	TxnEndCommit
	TxnEndRollback
	// TxnEndImplicit: it ended with a statement that commits implicitly
	// (DDL, SET autocommit=1, LOCK TABLES, BEGIN inside a transaction) or
	// whose text was not a COMMIT's or a ROLLBACK's.
	TxnEndImplicit
	// TxnEndOpen: still open when its connection closed or the run ended.
	TxnEndOpen
)

var txnEndNames = [...]string{"", "commit", "rollback", "implicit", "open"}

func (e TxnEnd) String() string {
	if int(e) < len(txnEndNames) {
		return txnEndNames[e]
	}
	return "unknown"
}

// MarshalText writes the name.
func (e TxnEnd) MarshalText() ([]byte, error) { return []byte(e.String()), nil }

// UnmarshalText reads a name; an unknown one is an error.
func (e *TxnEnd) UnmarshalText(b []byte) error {
	for i, n := range txnEndNames {
		if n == string(b) {
			*e = TxnEnd(i)
			return nil
		}
	}
	return fmt.Errorf("unknown transaction end %q", b)
}

// TxnInfo places a statement in its connection's transactions, read from
// the server status flags of the responses (SERVER_STATUS_IN_TRANS of the
// final OK or EOF): the wire alone tells, without parsing SQL.
type TxnInfo struct {
	// TxnSeq numbers the connection's transactions from 1, in the order
	// the capture saw them begin; 0: the statement ran outside one.
	TxnSeq uint32 `json:"txn,omitempty"`
	// TxnEnd is set on the statement that ended its transaction.
	TxnEnd TxnEnd `json:"txn_end,omitempty"`
	// TxnIdleBeforeUS is the time the application held the statement's
	// transaction open before sending it: from the last byte of the
	// response to the transaction's previous statement to this request's
	// first byte (0 for the statement that began it).
	TxnIdleBeforeUS int64 `json:"txn_idle_before_us,omitempty"`
	// TxnStartUS is when the transaction began: the first byte of its
	// first statement's request (Unix microseconds).
	TxnStartUS int64 `json:"txn_start,omitempty"`
}

// LockWait is a lock wait inside a statement's server time.
type LockWait struct {
	// LockWaitUS is the part of the statement's exec_us spent waiting for
	// the lock (never more than exec_us).
	LockWaitUS int64 `json:"lock_wait_us"`
	// BlockedBy is the connection it waited for.
	BlockedBy *Blocker `json:"blocked_by,omitempty"`
}

// LockWaitTime is the statement's known lock wait, 0 when none is known.
func (s *Statement) LockWaitTime() int64 {
	if s.LockWait == nil {
		return 0
	}
	return s.LockWaitUS
}

// Lock kinds a statement may have waited for.
const (
	LockRow      = "row"      // an InnoDB record or gap lock
	LockMetadata = "metadata" // a metadata lock (DDL against open transactions)
	LockTable    = "table"    // a table lock (LOCK TABLES, MyISAM)
)

// A blocker's state when the wait was seen.
const (
	// BlockerRunning: the blocker's connection had a statement running.
	BlockerRunning = "running"
	// BlockerIdleInTxn: the blocker's application held its transaction
	// open and sent nothing: the server waited on the application.
	BlockerIdleInTxn = "idle_in_transaction"
)

// How a lock wait was learnt, and how sure it is.
const (
	// LockSourceWire: attributed after the fact from the wire (the
	// waiter's end followed another connection's release), never certain.
	LockSourceWire = "wire"
	// Confidence levels of an attribution.
	ConfidenceCertain = "certain" // read from the server's lock tables while it waited
	ConfidenceHigh    = "high"    // the wire and the server's counters agree
	ConfidenceLow     = "low"     // the wire's coincidence alone
)

// Blocker is the connection a statement waited for, as gapscope saw it.
type Blocker struct {
	Conn   string `json:"conn,omitempty"`
	ConnID uint64 `json:"conn_id,omitempty"`
	User   string `json:"user,omitempty"`
	// Kind is the lock's kind (Lock*).
	Kind string `json:"kind"`
	// State is the blocker's state (Blocker*), "" when unknown.
	State string `json:"state,omitempty"`
	// Digest and SQL are the blocker's statement that held (or last ran
	// in the transaction that held) the lock, redacted as every statement.
	Digest string `json:"digest,omitempty"`
	SQL    string `json:"sql,omitempty"`
	// HeldUS is how long the blocker's transaction had been open when the
	// wait ended (or was read); IdleUS how much of the last stretch of it
	// its application sat idle, sending nothing.
	HeldUS int64 `json:"held_us,omitempty"`
	IdleUS int64 `json:"idle_us,omitempty"`
	// Source names where the attribution came from (a server table, or
	// LockSourceWire); Confidence how sure it is (Confidence*).
	Source     string `json:"source"`
	Confidence string `json:"confidence"`
	// Evidence is a short sentence of what was seen.
	Evidence string `json:"evidence,omitempty"`
	// Root, when the blocker itself waited for another (a lock chain: an
	// ALTER waiting for an idle transaction, selects waiting for the
	// ALTER), is the connection at the head of the chain.
	Root *Blocker `json:"root,omitempty"`
}

// RootOrSelf is the head of the chain b belongs to.
func (b *Blocker) RootOrSelf() *Blocker {
	for b.Root != nil {
		b = b.Root
	}
	return b
}

// Transaction is one transaction of one connection, as the wire saw it
// (docs/events.md, "Transactions").
type Transaction struct {
	Conn   string `json:"conn"`
	ConnID uint64 `json:"conn_id,omitempty"`
	User   string `json:"user,omitempty"`
	DB     string `json:"db,omitempty"`
	Seq    uint32 `json:"txn"`
	// Start is the first byte of its first statement's request; End the
	// last byte of its last statement's response (Unix microseconds).
	Start int64 `json:"t_start"`
	End   int64 `json:"t_end"`
	// EndKind is how it ended (TxnEnd*).
	EndKind    string `json:"end"`
	Statements int    `json:"statements"`
	// OpenUS is End - Start; ServerUS the sum of its statements' server
	// time (exec and send stall) where joined; InAppUS the sum of the gaps between a
	// response and the next request, the time its application held it
	// open without a statement running; MaxIdleUS the longest such gap.
	OpenUS int64 `json:"open_us"`
	// Joined counts its statements whose server half is known; ServerUS
	// covers those only (0 of them on a capture alone).
	Joined    int   `json:"joined"`
	ServerUS  int64 `json:"server_us"`
	InAppUS   int64 `json:"in_app_us"`
	MaxIdleUS int64 `json:"max_idle_us"`
	// LockWaitUS is the lock wait of its statements where known.
	LockWaitUS int64 `json:"lock_wait_us"`
	// FirstDigest and FirstSQL are its first statement's (BEGIN's when it
	// began with one, else the statement that opened it); Lead the first
	// statement after a BEGIN, which names what the transaction does.
	FirstDigest string `json:"first_digest,omitempty"`
	FirstSQL    string `json:"first_sql,omitempty"`
	LeadDigest  string `json:"lead_digest,omitempty"`
	LeadSQL     string `json:"lead_sql,omitempty"`
	// Tags are the sqlcommenter tags of its statements (route, ...), the
	// first statement's that had any.
	Tags map[string]string `json:"tags,omitempty"`
	// Blocked counts the other connections' statements whose lock wait was
	// attributed to it (as the blocker or the root of a chain) by the time
	// it was written, which is at least two seconds after it ended.
	Blocked int `json:"blocked"`
}

// AppendLine appends the transaction as one JSON line (without newline).
func (t *Transaction) AppendLine(b []byte) []byte {
	j, _ := json.Marshal(t) // small and rare beside statements: encoding/json is enough
	return append(b, j...)
}

// appendBlocker appends b's JSON form, HTML unescaped as the rest.
func appendBlocker(out []byte, b *Blocker) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(b) != nil { // a Blocker holds strings and integers only
		return append(out, "null"...)
	}
	return append(out, bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})...)
}

// appendTxn appends the statement's transaction and lock wait fields.
func (s *Statement) appendTxn(b []byte) []byte {
	if s.TxnSeq != 0 {
		b = strconv.AppendUint(append(b, `,"txn":`...), uint64(s.TxnSeq), 10)
	}
	if s.TxnEnd != TxnEndNone {
		b = appendStr(append(b, `,"txn_end":`...), s.TxnEnd.String())
	}
	b = optInt(b, `,"txn_idle_before_us":`, s.TxnIdleBeforeUS)
	b = optInt(b, `,"txn_start":`, s.TxnStartUS)
	if s.LockWait != nil {
		b = appendInt(b, `,"lock_wait_us":`, s.LockWaitUS)
		if s.BlockedBy != nil {
			b = appendBlocker(append(b, `,"blocked_by":`...), s.BlockedBy)
		}
	}
	return b
}
