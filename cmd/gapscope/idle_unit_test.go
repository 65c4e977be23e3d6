package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/sandbox"
	"github.com/gapscope/gapscope/internal/watch"
)

// Idle at the service's settings (issue 43): watch started as
// gapscope.service starts it, beside a fresh server with performance_schema
// and its statement consumers on (history_long at its default 1,000 rows)
// and no client. Over the minute from 40 s to 100 s after its start it must
// keep its idle pace (docs/design.md): the status each second, and
// history_long, the thread-pool groups and the processlist every 30 s,
// with no running scan. Its statements are counted where the server
// recorded them, in events_statements_history_long, after it stopped, so
// that counting them is not a client it would wake for. At the busy pace
// each of those reads comes every second (60 in the minute).
const (
	idleUnitFrom  = 40 * time.Second
	idleUnitUntil = 100 * time.Second
	// idleUnitReads bounds each of the reads an idle server gets every
	// idleEvery (30 s): two in the minute, three when one falls on its
	// edge.
	idleUnitReads = 3
	// idleUnitChildArgs: the child's environment variable, the unit's
	// command line (JSON).
	idleUnitChildArgs = "GAPSCOPE_IDLE_UNIT_ARGS"
)

func TestIdleAtTheUnitsFlags(t *testing.T) {
	if args := os.Getenv(idleUnitChildArgs); args != "" {
		runIdleUnitChild(t, args)
		return
	}
	inst := sandbox.ForTest(t, sandbox.Options{ServerArgs: []string{"--performance-schema=ON",
		"--performance-schema-consumer-events-statements-current=ON",
		"--performance-schema-consumer-events-statements-history=ON",
		"--performance-schema-consumer-events-statements-history-long=ON"}})
	dir := t.TempDir()
	cnf := filepath.Join(dir, "my.cnf")
	if err := os.WriteFile(cnf, []byte(fmt.Sprintf("[client]\nhost = 127.0.0.1\nport = %d\nuser = root\n", inst.Port)), 0o600); err != nil {
		t.Fatal(err)
	}
	args := unitCommandLine(t, map[string]string{"GAPSCOPE_DEFAULTS_FILE": cnf,
		"GAPSCOPE_HTTP": fmt.Sprintf("127.0.0.1:%d", freePort(t))}, dir)
	t.Logf("watch %s", strings.Join(args, " "))
	db, err := inst.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	start := serverNowPS(t, db)
	db.SetMaxIdleConns(0) // no connection of the test's stays open beside watch
	enc, _ := json.Marshal(args)
	began := time.Now()
	child := sandbox.StartChild(t, "TestIdleAtTheUnitsFlags", []string{idleUnitChildArgs + "=" + string(enc)}, watch.ReadyLine)
	pid := child.Cmd.Process.Pid
	time.Sleep(time.Until(began.Add(idleUnitFrom)))
	t0 := childTicks(t, pid)
	time.Sleep(time.Until(began.Add(idleUnitUntil)))
	ticks, rssKB := childTicks(t, pid)-t0, sandbox.StatusKB(pid, "VmRSS:")
	_ = child.Cmd.Process.Kill()
	_ = child.Cmd.Wait()
	span := idleUnitUntil - idleUnitFrom
	t.Logf("watch from %s to %s: %d ticks (%.2f%% of a core), RSS %d kB at the end (the test binary's, not gapscope's)",
		idleUnitFrom, idleUnitUntil, ticks, float64(ticks)/span.Seconds(), rssKB)

	kinds := ownStatementsByKind(t, db, start+uint64(idleUnitFrom.Nanoseconds())*1000, start+uint64(idleUnitUntil.Nanoseconds())*1000)
	t.Logf("watch's own statements from %s to %s, by kind: %s", idleUnitFrom, idleUnitUntil, formatKinds(kinds))
	for _, k := range []string{"history_long", "processlist", "pool groups"} {
		if kinds[k] > idleUnitReads {
			t.Errorf("%d reads of the %s in the minute, want at most %d: watch kept its busy pace beside an idle server", kinds[k], k, idleUnitReads)
		}
	}
	if kinds["running scans"] > 0 {
		t.Errorf("%d running scans in the minute, want none beside an idle server", kinds["running scans"])
	}
	if kinds["status"] == 0 {
		t.Error("no status read in the minute: the window did not see watch at all")
	}
}

// runIdleUnitChild runs the command line given (JSON) as gapscope does,
// its output on stdout (the parent waits for the ready line), until the
// parent kills it.
func runIdleUnitChild(t *testing.T, enc string) {
	var args []string
	if err := json.Unmarshal([]byte(enc), &args); err != nil {
		t.Fatal(err)
	}
	root := newRootCmd(collect.NewSecrets())
	root.SetOut(os.Stdout)
	root.SetErr(os.Stdout)
	root.SetArgs(args)
	if err := root.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// unitCommandLine is packaging/gapscope.service's ExecStart after the
// binary, with packaging/default's settings put in as systemd puts them
// (${VAR} one word, $VAR split on spaces), env's values over the file's,
// and the service's state directory (/var/lib/gapscope) replaced by dir.
func unitCommandLine(t *testing.T, env map[string]string, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("../../packaging/gapscope.service")
	if err != nil {
		t.Fatal(err)
	}
	_, line, ok := strings.Cut(string(b), "\nExecStart=")
	if !ok {
		t.Fatal("the unit has no ExecStart")
	}
	line, _, _ = strings.Cut(line, "\n")
	def, err := os.ReadFile("../../packaging/default")
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, l := range strings.Split(string(def), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(l, "#") {
			vars[k] = strings.Trim(v, `"`)
		}
	}
	for k, v := range env {
		vars[k] = v
	}
	var out []string
	for _, w := range strings.Fields(line)[1:] {
		switch {
		case strings.Contains(w, "${"):
			out = append(out, os.Expand(w, func(k string) string { return vars[k] }))
		case strings.HasPrefix(w, "$"):
			out = append(out, strings.Fields(vars[w[1:]])...)
		default:
			out = append(out, w)
		}
	}
	for i, w := range out {
		out[i] = strings.ReplaceAll(w, "/var/lib/gapscope", dir)
	}
	return out
}

// serverNowPS is the server's statement timer now (picoseconds since its
// start): the TIMER_START of a statement run on a connection of the
// test's, read back from that thread's history, the connection then
// closed.
func serverNowPS(t *testing.T, db *sql.DB) uint64 {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const marker = "SELECT 'gapscope idle test start'"
	if _, err := conn.ExecContext(ctx, marker); err != nil {
		t.Fatal(err)
	}
	var ps uint64
	err = conn.QueryRowContext(ctx, `SELECT TIMER_START FROM performance_schema.events_statements_history
		WHERE THREAD_ID = (SELECT THREAD_ID FROM performance_schema.threads WHERE PROCESSLIST_ID = CONNECTION_ID())
		AND SQL_TEXT = ?`, marker).Scan(&ps)
	if err != nil {
		t.Fatalf("reading the start marker's timer: %v", err)
	}
	return ps
}

// ownStatementsByKind counts, by kind, the statements of watch's threads
// (those that ran a marked statement) that started between from and to
// (the server's timer, picoseconds), as events_statements_history_long
// recorded them. The ring must still hold the window whole.
func ownStatementsByKind(t *testing.T, db *sql.DB, from, to uint64) map[string]int {
	t.Helper()
	rows, err := db.Query(`SELECT THREAD_ID, EVENT_NAME, COALESCE(SQL_TEXT, ''), TIMER_START
		FROM performance_schema.events_statements_history_long ORDER BY TIMER_START`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	type row struct {
		thread      uint64
		event, text string
		start       uint64
	}
	var all []row
	own := map[uint64]bool{}
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.thread, &r.event, &r.text, &r.start); err != nil {
			t.Fatal(err)
		}
		all = append(all, r)
		if strings.Contains(r.text, "/* gapscope */") {
			own[r.thread] = true
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(all) == 0 || all[0].start > from {
		t.Fatalf("events_statements_history_long no longer holds the window's start (%d rows): watch's statements turned the ring over", len(all))
	}
	kinds := map[string]int{}
	for _, r := range all {
		if own[r.thread] && r.start >= from && r.start < to {
			kinds[statementKind(r.event, r.text)]++
		}
	}
	return kinds
}

// statementKind names what one of watch's statements reads.
func statementKind(event, text string) string {
	switch {
	case strings.HasSuffix(event, "/Ping"):
		return "ping"
	case strings.Contains(text, "gapscope_calibration"):
		return "calibration"
	case strings.Contains(text, "SHOW GLOBAL STATUS"):
		return "status"
	case strings.Contains(text, "FROM performance_schema.events_statements_history_long h"):
		return "history_long"
	case strings.Contains(text, "FROM performance_schema.events_statements_current"):
		return "running scans"
	case strings.Contains(text, "FROM information_schema.PROCESSLIST"):
		return "processlist"
	case strings.Contains(text, "THREAD_POOL_GROUPS"):
		return "pool groups"
	case strings.Contains(text, "FROM performance_schema.threads"):
		return "threads"
	}
	return "other " + strings.TrimPrefix(event, "statement/")
}

func formatKinds(kinds map[string]int) string {
	names := make([]string, 0, len(kinds))
	for k := range kinds {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	for i, k := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(k + " " + strconv.Itoa(kinds[k]))
	}
	return b.String()
}

// childTicks is a process's user + system clock ticks (/proc/PID/stat).
func childTicks(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}
