package diagnose

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/gapscope/gapscope/internal/event"
)

// txnGroup is where applications hold transactions open: one user, one
// lead statement (the first after BEGIN, else the first) and one
// sqlcommenter route, summed over its held transactions.
type txnGroup struct {
	User   string `json:"user,omitempty"`
	Route  string `json:"route,omitempty"`
	Digest string `json:"digest,omitempty"`
	SQL    string `json:"sql,omitempty"`
	// Transactions are the group's held transactions, on Connections
	// distinct connections.
	Transactions int   `json:"transactions"`
	Connections  int   `json:"connections"`
	InAppUS      int64 `json:"in_app_us"`
	MaxIdleUS    int64 `json:"max_idle_us"`
	OpenUS       int64 `json:"open_us"`
	ServerUS     int64 `json:"server_us"`
	LockWaitUS   int64 `json:"lock_wait_us,omitempty"`
	// Blocked counts the other connections' statements that waited for
	// their locks.
	Blocked int `json:"blocked"`
	// Ends counts how they ended (commit, rollback, implicit, open).
	Ends map[string]int `json:"ends"`

	conns map[string]bool
}

// longIdleUS: an application that sits this long inside a transaction
// holds it open whatever the rest of the load does.
const longIdleUS = 1_000_000

// txnSeen is how many transactions the window stands for.
func (w *Window) txnSeen() int64 { return max(w.TxnSeen, int64(len(w.Transactions))) }

// leadOf is what names a transaction: the first statement after BEGIN,
// else its first statement.
func leadOf(t *event.Transaction) (digest, sql string) {
	if t.LeadDigest != "" || t.LeadSQL != "" {
		return t.LeadDigest, t.LeadSQL
	}
	return t.FirstDigest, t.FirstSQL
}

// checkIdleInTransaction ranks where applications hold transactions open
// between their statements: time the server holds the transaction's locks
// while waiting on the application, which no server-side timer charges to
// anyone. It fires when it matters: a held transaction blocked others, an
// idle gap reached a second, or held transactions are not rare (1% of
// those seen).
func checkIdleInTransaction(w *Window) []event.Finding {
	l := w.limits()
	var held []*event.Transaction
	var inApp, maxIdle, open int64
	blocked := 0
	for i := range w.Transactions {
		t := &w.Transactions[i]
		if t.MaxIdleUS < l.TxnIdleUS {
			continue
		}
		held = append(held, t)
		inApp += max(t.InAppUS, 0)
		open += max(t.OpenUS, 0)
		maxIdle = max(maxIdle, t.MaxIdleUS)
		blocked += max(t.Blocked, 0)
	}
	seen := w.txnSeen()
	if len(held) == 0 || (blocked == 0 && maxIdle < longIdleUS && float64(len(held)) < minSlowShare*float64(seen)) {
		return nil
	}
	groups := txnGroups(held)
	f := event.Finding{
		Code:     CodeIdleInTransaction,
		Severity: event.SeverityInfo,
		Summary:  idleSummary(len(held), seen, inApp, maxIdle, open, blocked, groups),
		Evidence: map[string]any{
			"transactions":      seen,
			"held_transactions": len(held),
			"idle_limit_us":     l.TxnIdleUS,
			"in_app_us":         inApp,
			"max_idle_us":       maxIdle,
			"open_us":           open,
			"in_app_share":      round3(share(inApp, open)),
			"blocked":           blocked,
			"groups":            groups[:min(len(groups), maxListed)],
			"examples":          topTransactions(held),
		},
		Fix: idleFix(w, groups),
	}
	for _, v := range []string{"idle_transaction_timeout", "idle_write_transaction_timeout", "idle_readonly_transaction_timeout"} {
		if val, ok := w.Vars[v]; ok {
			f.Evidence[v] = val
		}
	}
	switch {
	case blocked > 0 && maxIdle >= longIdleUS:
		f.Severity = event.SeverityCritical
	case blocked > 0 || maxIdle >= longIdleUS:
		f.Severity = event.SeverityWarning
	}
	return []event.Finding{f}
}

func txnGroups(held []*event.Transaction) []txnGroup {
	type key struct{ user, lead, route string }
	by := map[key]*txnGroup{}
	for _, t := range held {
		digest, sql := leadOf(t)
		k := key{t.User, cmp.Or(digest, sql), t.Tags["route"]}
		g := by[k]
		if g == nil {
			g = &txnGroup{User: t.User, Route: k.route, Digest: digest, SQL: sql, Ends: map[string]int{}, conns: map[string]bool{}}
			by[k] = g
		}
		g.Transactions++
		g.conns[t.Conn] = true
		g.InAppUS += max(t.InAppUS, 0)
		g.MaxIdleUS = max(g.MaxIdleUS, t.MaxIdleUS)
		g.OpenUS += max(t.OpenUS, 0)
		g.ServerUS += max(t.ServerUS, 0)
		g.LockWaitUS += max(t.LockWaitUS, 0)
		g.Blocked += max(t.Blocked, 0)
		g.Ends[cmp.Or(t.EndKind, "unknown")]++
	}
	out := make([]txnGroup, 0, len(by))
	for _, g := range by {
		g.Connections = len(g.conns)
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b txnGroup) int {
		return cmp.Or(cmp.Compare(b.InAppUS, a.InAppUS), cmp.Compare(b.MaxIdleUS, a.MaxIdleUS),
			cmp.Compare(a.User, b.User), cmp.Compare(a.Route, b.Route), cmp.Compare(a.SQL, b.SQL))
	})
	return out
}

// topTransactions are the held transactions with the longest idle gaps.
func topTransactions(held []*event.Transaction) []event.Transaction {
	sorted := slices.Clone(held)
	slices.SortStableFunc(sorted, func(a, b *event.Transaction) int { return cmp.Compare(b.MaxIdleUS, a.MaxIdleUS) })
	out := make([]event.Transaction, 0, maxExamples)
	for _, t := range sorted[:min(len(sorted), maxExamples)] {
		out = append(out, *t)
	}
	return out
}

func idleSummary(held int, seen, inApp, maxIdle, open int64, blocked int, groups []txnGroup) string {
	out := fmt.Sprintf("%d of %d transaction(s) sat open in their application between statements for %s in all (%s of the time they were open; longest gap %s)",
		held, seen, dur(inApp), pct(share(inApp, open)), dur(maxIdle))
	if blocked > 0 {
		out += fmt.Sprintf(", holding locks that %d statement(s) of other connections waited for", blocked)
	}
	g := groups[0]
	var who []string
	if g.User != "" {
		who = append(who, "user "+g.User)
	}
	if g.Route != "" {
		who = append(who, "route "+g.Route)
	}
	if g.SQL != "" {
		who = append(who, fmt.Sprintf("%q", g.SQL))
	}
	if len(who) > 0 {
		out += fmt.Sprintf("; most under %s (%d transaction(s), %s idle, longest %s)", strings.Join(who, ", "), g.Transactions, dur(g.InAppUS), dur(g.MaxIdleUS))
	}
	return out
}

// idleFix: end the transaction before the application's slow work.
func idleFix(w *Window, groups []txnGroup) string {
	fix := "commit (or roll back) before slow application work — remote calls, file or user I/O, long computations, sleeps — and begin the transaction only when its statements are ready: while it stays open its row locks (and the metadata locks of every table it touched) make other connections' writes and DDL wait; check drivers and ORMs that turn autocommit off and keep a transaction open for a whole request"
	if slices.ContainsFunc(groups, func(g txnGroup) bool { return g.Route != "" }) {
		fix += "; the routes in the evidence name the application's handlers"
	}
	if v, ok := w.Vars["idle_write_transaction_timeout"]; ok || w.Flavor == "mariadb" {
		now := ""
		if ok {
			now = " (now " + v + ", 0 = off)"
		}
		fix += "; on MariaDB, idle_write_transaction_timeout" + now + " closes the connection of a write transaction idle longer than it: set it above the longest legitimate gap as a safety net"
	}
	return fix
}
