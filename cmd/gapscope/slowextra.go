package main

import (
	"context"
	"errors"

	"github.com/gapscope/gapscope/internal/collect/slowlog"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/report"
	"github.com/gapscope/gapscope/internal/sqltext"
)

// maxHosts bounds slowExtra's host cache: it saves work, never changes a
// result.
const maxHosts = 10_000

// slowExtra turns what a slow-log event says beyond event.Statement into a
// report.Extra, reusing one Extra and one Plan: the profile keeps nothing
// of them but values and interned strings.
type slowExtra struct {
	fingerprint bool
	x           report.Extra
	plan        report.Plan
	hosts       map[string]string
	fper        sqltext.Fingerprinter // caches classes by the text's shape
	// text fills the current statement's text when the reader left it
	// out; fill is its FillText, bound once.
	text *slowlog.Converter
	fill func()
	st   *event.Statement
	ev   *slowlog.Event
}

func newSlowExtra(fingerprint bool) slowExtra {
	return slowExtra{fingerprint: fingerprint, hosts: map[string]string{}}
}

func (e *slowExtra) of(st *event.Statement, ev *slowlog.Event) *report.Extra {
	e.x = report.Extra{Host: e.host(ev), RowsAffected: ev.RowsAffected, FillText: e.fill}
	e.st, e.ev = st, ev
	if ev.HasPlan {
		e.plan = planOf(ev)
		e.x.Plan = &e.plan
	}
	if e.fingerprint {
		e.x.ClassID, e.x.ClassText = e.class(ev)
	}
	return &e.x
}

// fillText fills the current statement's SQL, digest text and digest.
func (e *slowExtra) fillText() {
	if e.st.DigestText == "" && e.st.SQL == "" {
		e.text.Text(e.ev, e.st)
	}
}

// host is the client's host name, or its IP when the log has no name
// (pt-query-digest does the same), interned.
func (e *slowExtra) host(ev *slowlog.Event) string {
	h := ev.Host
	if len(h) == 0 {
		h = ev.IP
	}
	if len(h) == 0 {
		return ""
	}
	if s, ok := e.hosts[string(h)]; ok {
		return s
	}
	s := string(h)
	if len(e.hosts) < maxHosts {
		e.hosts[s] = s
	}
	return s
}

// class is the event's pt-query-digest class: its Query ID and
// fingerprint ("administrator command: Quit" for those events, as
// pt-query-digest reads them).
func (e *slowExtra) class(ev *slowlog.Event) (id, text string) {
	if ev.Admin {
		fp := "administrator command: " + string(ev.AdminCommand)
		return sqltext.QueryID(fp), fp
	}
	c := e.fper.Class(ev.Query)
	return c.ID, c.Fingerprint
}

func planOf(ev *slowlog.Event) report.Plan {
	return report.Plan{
		Statements: 1, FullScan: yes(ev.FullScan), FullJoin: yes(ev.FullJoin), TmpTable: yes(ev.TmpTable),
		TmpTableOnDisk: yes(ev.TmpTableOnDisk), Filesort: yes(ev.Filesort), FilesortOnDisk: yes(ev.FilesortOnDisk),
		QCHit: yes(ev.QCHit), TmpTables: ev.TmpTables, TmpDiskTables: ev.TmpDiskTables, MergePasses: ev.MergePasses,
		InnoDBIOReadOps: ev.InnoDBIOReadOps, InnoDBIOReadWaitUS: ev.InnoDBIOReadWaitUS,
		InnoDBRecLockWaitUS: ev.InnoDBRecLockWaitUS, InnoDBQueueWaitUS: ev.InnoDBQueueWaitUS,
		InnoDBPagesDistinct: ev.InnoDBPagesDistinct, PagesAccessed: ev.PagesAccessed, PagesRead: ev.PagesRead,
		PagesUpdated: ev.PagesUpdated, OldRowsRead: ev.OldRowsRead, PagesReadTimeUS: ev.PagesReadTimeUS,
		EngineTimeUS: ev.EngineTimeUS,
	}
}

func yes(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// slowLogEnd reads the logs once to find their last statement's start,
// which relative --since/--until count back from.
func slowLogEnd(ctx context.Context, files []string, opts slowlog.ReadOptions) (int64, error) {
	var end int64
	for _, path := range files {
		_, err := slowlog.ReadFile(ctx, path, opts, func(s *event.Statement, _ *slowlog.Event) {
			end = max(end, s.TReqFirst)
		})
		if err != nil && !errors.Is(err, context.Canceled) {
			return 0, err
		}
	}
	return end, nil
}
