package lab

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/report"
	"github.com/gapscope/gapscope/internal/sandbox"
	"github.com/gapscope/gapscope/internal/watch"
)

// FieldOptions tune the field lab.
type FieldOptions struct {
	Options
	// Churn is the number of connect → 3 point selects → close
	// connections of the churn condition (default 300), Parallel of them
	// at a time (default 3).
	Churn, Parallel int
	// CPUBudget overrides watch's default budget (a fraction of the host;
	// 0: the default, negative: no bound); a small one makes the governor
	// cut the join sample early, as it does when the lab's process is busy.
	CPUBudget float64
	// Only runs the named conditions (all when empty).
	Only []string
	// DefaultRing runs the server with its own default
	// events_statements_history_long size (1,000 rows on MariaDB 10.11)
	// instead of lab up's 10,000: the churn's ~1,500 statements a second
	// turn it over in well under a second, so watch must read it faster.
	DefaultRing bool
}

// FieldReport is the field lab's outcome: per condition, what the client
// measured beside what watch reported, and a verdict.
type FieldReport struct {
	Conditions []FieldCondition `json:"conditions"`
	// Missing are the clients not installed (their conditions do not hold).
	Missing []string `json:"missing_clients,omitempty"`
}

// FieldCondition is one condition of the field lab.
type FieldCondition struct {
	Name   string `json:"name"`
	Client string `json:"client"`
	// Expect is what watch must report, in a sentence.
	Expect string `json:"expect"`
	// Holds: every expectation met; Problems say which were not.
	Holds    bool     `json:"holds"`
	Problems []string `json:"problems,omitempty"`
	// Notes are figures about the condition as a whole (the churn's rate
	// and join share).
	Notes      []string         `json:"notes,omitempty"`
	Statements []FieldStatement `json:"statements"`
	// Others are the events on the condition's connections that no
	// client statement took and that did not join (a login, a COM_QUIT).
	Others []event.Statement `json:"other_unjoined,omitempty"`
}

// FieldStatement is a client's statement beside watch's event for it (nil
// when watch reported none).
type FieldStatement struct {
	Client ClientRecord     `json:"client"`
	Watch  *event.Statement `json:"watch"`
	// ConnEvents, when watch reported none, are the events it reported on
	// the connection (evidence for a fix).
	ConnEvents []string `json:"conn_events,omitempty"`
}

// connEvents describes the events of rec's connection, for a statement
// watch reported nothing for.
func connEvents(events []event.Statement, rec ClientRecord) []string {
	var out []string
	for _, s := range events {
		if s.ConnID == rec.ConnID && rec.ConnID != 0 {
			out = append(out, fmt.Sprintf("%s at %+dµs of the client's call, %d B request, joined %v, reason %q, client %s, server %s",
				s.Cmd, s.TReqFirst-rec.StartUS, s.ReqBytes, s.Joined, watch.UnjoinedReason(&s), report.Micros(s.ClientUS), report.Micros(s.ServerUS)))
		}
	}
	return out
}

// fieldCase is a condition to run and judge.
type fieldCase struct {
	name, client, expect string
	run                  func(ctx context.Context, env *fieldEnv, o FieldOptions) ([]ClientRecord, error)
	judge                func(c *FieldCondition, j *fieldJudge)
}

// fieldJudge is what the judges read beyond a condition's statements.
type fieldJudge struct {
	res    *watch.Result
	events []event.Statement
	// stoppedUS is when watch was stopped; maxWait its --max-wait.
	stoppedUS int64
	maxWait   time.Duration
}

// fieldCases are the conditions of issue 26, in the order they run: the
// nine that held when the issue was filed, then the four it asks for.
func fieldCases() []fieldCase {
	return []fieldCase{
		{name: "tls_pymysql", client: "python3-pymysql",
			expect: "3 x SELECT SLEEP(0.1) over TLS (CA verified): joined through the handshake's connection id, exec within 5% of 100 ms, parts summing to client_us",
			run:    pythonCond("tls_pymysql", nil),
			judge:  joinedSleeps(100_000)},
		{name: "tls_cli", client: "mariadb CLI",
			expect: "5 short TLS connections (--ssl-verify-server-cert), each SELECT SLEEP(0.1): every one joined, exec within 5% of 100 ms",
			run:    cliCond("tls_cli", 5, "SELECT SLEEP(0.1)", "--ssl", "-h", "127.0.0.1", "--ssl-verify-server-cert"),
			judge:  joinedSleeps(100_000)},
		{name: "call", client: "python3-mysqldb",
			expect: "3 x CALL of a procedure running SELECT SLEEP(0.1): joined, exec within 5% of 100 ms",
			run:    pythonCond("call", nil),
			judge:  joinedSleeps(100_000)},
		{name: "compressed", client: "python3-mysqldb",
			expect: "compressed protocol: 3 x SELECT SLEEP(0.1) joined with exec within 5% of 100 ms, and a 20,000-row SELECT joined",
			run:    pythonCond("compressed", nil),
			judge:  joinedSleeps(100_000)},
		{name: "prepared", client: "libdbd-mysql-perl",
			expect: "server-side prepare (mysql_server_prepare=1): 3 x COM_STMT_EXECUTE of SELECT SLEEP(?) with 0.1, joined, exec within 5% of 100 ms",
			run: func(ctx context.Context, env *fieldEnv, _ FieldOptions) ([]ClientRecord, error) {
				return env.runPerl(ctx)
			},
			judge: joinedSleeps(100_000)},
		{name: "timeout", client: "python3-pymysql",
			expect: "SET STATEMENT max_statement_time=0.1 FOR SELECT SLEEP(1): error 1969 at the client, joined with the error and exec within 5% of 100 ms",
			run:    pythonCond("timeout", nil),
			judge:  judgeTimeout},
		{name: "ipv6", client: "python3-pymysql",
			expect: "3 x SELECT SLEEP(0.1) to [::1]: joined, exec within 5% of 100 ms",
			run:    pythonCond("ipv6", nil),
			judge:  judgeIPv6},
		{name: "load_data", client: "python3-pymysql",
			expect: "LOAD DATA LOCAL INFILE of 50,000 rows: joined, parts summing to client_us",
			run:    pythonCond("load_data", nil),
			judge:  joinedSleeps(0)},
		{name: "change_user", client: "python3-mysqldb",
			expect: "SELECT SLEEP(0.1), COM_CHANGE_USER to another account, SELECT SLEEP(0.1): both selects joined, exec within 5% of 100 ms",
			run:    pythonCond("change_user", nil),
			judge:  judgeChangeUser},
		{name: "unix_socket", client: "mariadb CLI",
			expect: "3 connections over the server's unix socket, each SELECT SLEEP(0.15): a server-only event each (joined false, reason unix_socket) with the server's 150 ms",
			run:    cliCond("unix_socket", 3, "SELECT SLEEP(0.15)", "--protocol=socket"),
			judge:  judgeUnixSocket},
		{name: "multi_statement", client: "python3-pymysql",
			expect: "3 x one COM_QUERY 'SELECT 1; SELECT SLEEP(0.1)' (CLIENT_MULTI_STATEMENTS): joined, exec within 5% of 100 ms, delivery < 1 ms",
			run:    pythonCond("multi_statement", nil),
			judge:  judgeMulti},
		{name: "churn", client: "python3-pymysql",
			expect: "connection per request: connect, 3 point selects, close, 3 connections at a time: >= 99.5% joined, every unjoined one with a true reason, coverage's counts by reason equal to the events'",
			run: func(ctx context.Context, env *fieldEnv, o FieldOptions) ([]ClientRecord, error) {
				return env.runPython(ctx, "churn", map[string]any{"conns": o.Churn, "parallel": o.Parallel})
			},
			judge: judgeChurn},
		{name: "big_insert", client: "python3-pymysql",
			expect: "one 20 MB INSERT (a multi-packet request): joined, parts summing to client_us, request bytes >= 20 MB",
			run:    pythonCond("big_insert", nil),
			judge:  judgeBigInsert},
	}
}

// FieldConditionNames lists the field lab's conditions, in run order.
func FieldConditionNames() []string {
	var names []string
	for _, c := range fieldCases() {
		names = append(names, c.name)
	}
	return names
}

func pythonCond(cond string, extra map[string]any) func(context.Context, *fieldEnv, FieldOptions) ([]ClientRecord, error) {
	return func(ctx context.Context, env *fieldEnv, _ FieldOptions) ([]ClientRecord, error) {
		return env.runPython(ctx, cond, extra)
	}
}

// cliCond runs n short mariadb CLI connections, each sql after SELECT
// CONNECTION_ID(); args say how they connect (the socket when they name
// --protocol=socket, else TCP to the port).
func cliCond(cond string, n int, sql string, args ...string) func(context.Context, *fieldEnv, FieldOptions) ([]ClientRecord, error) {
	return func(ctx context.Context, env *fieldEnv, _ FieldOptions) ([]ClientRecord, error) {
		conn := slices.Clone(args)
		if slices.Contains(args, "--protocol=socket") {
			conn = append(conn, "--socket="+env.socket)
		} else {
			conn = append(conn, "-P", fmt.Sprint(env.port), "--ssl-ca="+env.ca)
		}
		var recs []ClientRecord
		for range n {
			rec, err := env.runCLI(ctx, cond, conn, sql, "SLEEP")
			if err != nil {
				return recs, err
			}
			recs = append(recs, rec)
		}
		return recs, nil
	}
}

// Field runs the field lab: one sandbox with TLS and IPv6, watch at its
// default flags, and real clients from Debian doing what production
// applications do, condition after condition; each is judged from what
// the client measured and what watch reported.
func Field(ctx context.Context, o FieldOptions) (*Result, *FieldReport, error) {
	if o.Churn <= 0 {
		o.Churn = 300
	}
	if o.Parallel <= 0 {
		o.Parallel = 3
	}
	cases := fieldCases()
	if len(o.Only) > 0 {
		cases = slices.DeleteFunc(cases, func(c fieldCase) bool { return !slices.Contains(o.Only, c.name) })
		if len(cases) == 0 {
			return nil, nil, fmt.Errorf("lab field: no condition named %v (conditions: %s)", o.Only, strings.Join(FieldConditionNames(), ", "))
		}
	}
	started := time.Now()
	dir, err := os.MkdirTemp("", "gapscope-field-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	env := &fieldEnv{dir: dir, host: "127.0.0.1", ca: filepath.Join(dir, "ca.pem"),
		user: "app", password: "app-pw", user2: "app2", password2: "app2-pw"}
	rep := &FieldReport{Missing: findFieldClients(ctx, env)}
	if err := env.writeScripts(); err != nil {
		return nil, nil, err
	}
	if err := makeFieldCerts(ctx, dir); err != nil {
		return nil, nil, err
	}
	bind := "127.0.0.1"
	ipv6 := hasIPv6Loopback()
	if ipv6 {
		bind = "127.0.0.1,::1"
	}
	ring, ringArgs := "events_statements_history_long_size=10000 (as lab up)", []string{"--performance-schema-events-statements-history-long-size=10000"}
	if o.DefaultRing {
		ring, ringArgs = "events_statements_history_long_size: the server's default", nil
	}
	r := &Result{Scenario: "field", Settings: []string{"performance_schema=ON", "statement consumers current, history, history_long ON",
		ring, "TLS (certificates made for this run)", "bind-address=" + bind, "local_infile=ON", "max_allowed_packet=64M"}}
	args := append(append(slices.Clone(psArgs), ringArgs...),
		"--ssl-ca="+env.ca, "--ssl-cert="+filepath.Join(dir, "server-cert.pem"), "--ssl-key="+filepath.Join(dir, "server-key.pem"),
		"--bind-address="+bind, "--local-infile=1", "--max-allowed-packet=64M")
	inst, err := startSandbox(ctx, o.Options, r, sandbox.Options{ServerArgs: args})
	if err != nil {
		return nil, nil, err
	}
	defer inst.Stop()
	if o.DefaultRing {
		if size, err := historyLongSize(ctx, inst); err == nil {
			r.Settings[2] = fmt.Sprintf("events_statements_history_long_size=%d (the server's default)", size)
		}
	}
	env.port, env.socket = inst.Port, inst.Socket
	if err := prepareField(ctx, inst, env); err != nil {
		return nil, nil, err
	}
	monitor, err := createMonitor(ctx, inst, false)
	if err != nil {
		return nil, nil, err
	}
	sink := &fieldSink{}
	wopts := watch.DefaultOptions() // the user's defaults: budget included
	if o.CPUBudget != 0 {
		wopts.CPUBudget = max(o.CPUBudget, 0)
	}
	wopts.DSN, wopts.Ports, wopts.Iface, wopts.KeepLiterals = monitor, []uint16{uint16(inst.Port)}, "lo", o.KeepLiterals
	wopts.Sinks = []watch.Sink{watch.StatementFunc(sink.add)}
	o.step(r, "watching port %d on lo at watch's default flags (--cpu-budget %g%%)", inst.Port, 100*wopts.CPUBudget)
	s, err := startWatch(ctx, wopts)
	if err != nil {
		return nil, nil, err
	}
	records := make([][]ClientRecord, len(cases))
	runErrs := make([]error, len(cases))
	for i, c := range cases {
		if c.name == "ipv6" && !ipv6 {
			runErrs[i] = errors.New("this host has no IPv6 loopback (::1)")
			continue
		}
		t0, cpu0 := time.Now(), watch.ProcessCPU()
		records[i], runErrs[i] = c.run(ctx, env, o)
		o.step(r, "%s (%s): %d statements in %s (this process, watch's CPU included: %s)", c.name, c.client,
			len(statementRecords(records[i])), time.Since(t0).Round(time.Millisecond), (watch.ProcessCPU() - cpu0).Round(time.Millisecond))
		if ctx.Err() != nil {
			s.stop()
			return nil, nil, ctx.Err()
		}
	}
	// The last rows reach history_long, and watch reads them (its poll is
	// at most a second apart).
	time.Sleep(2500 * time.Millisecond)
	stopped := time.Now()
	res, err := s.stop()
	if err != nil {
		return nil, nil, err
	}
	events := sink.all()
	j := &fieldJudge{res: res, events: events, stoppedUS: stopped.UnixMicro(), maxWait: wopts.MaxWait}
	used := map[int]bool{}
	for i, c := range cases {
		fc := FieldCondition{Name: c.name, Client: c.client, Expect: c.expect}
		for _, rec := range records[i] {
			if rec.Summary != "" {
				fc.Notes = append(fc.Notes, rec.Summary)
				continue
			}
			fs := FieldStatement{Client: rec}
			if k := matchEvent(events, rec, used); k >= 0 {
				ev := events[k]
				fs.Watch = &ev
			} else {
				fs.ConnEvents = connEvents(events, rec)
			}
			fc.Statements = append(fc.Statements, fs)
		}
		rep.Conditions = append(rep.Conditions, fc)
	}
	for i, c := range cases {
		fc := &rep.Conditions[i]
		fc.Others = extraEvents(events, records[i], used)
		if runErrs[i] != nil {
			fc.problem("not run: %v", runErrs[i])
		} else {
			c.judge(fc, j)
			fc.othersTrue()
		}
		fc.Holds = len(fc.Problems) == 0
	}
	r.Watch, r.Findings = res, res.Findings
	r.Marked = map[string]event.Statement{}
	for _, fc := range rep.Conditions {
		if fc.Name == "churn" {
			continue
		}
		for k, st := range fc.Statements {
			if st.Watch != nil {
				r.Statements = append(r.Statements, *st.Watch)
				r.Marked[fmt.Sprintf("%s %d", fc.Name, k+1)] = *st.Watch
			}
		}
	}
	r.Seen = append(r.Seen, rep.Lines()...)
	cs := res.Capture
	r.Seen = append(r.Seen, fmt.Sprintf("capture: %d packets, %d connections (%d TLS), %d statements; kernel drops %d, gaps %d, retransmits %d, out of order %d",
		cs.Packets, cs.Flows, cs.TLSFlows, cs.Statements, cs.KernelDrops, cs.Gaps, cs.Retransmits, cs.OutOfOrder))
	r.Seen = append(r.Seen, res.Coverage.Summary())
	r.Seen = append(r.Seen, ownLine(res.Own))
	r.Elapsed = time.Since(started)
	return r, rep, nil
}

func statementRecords(recs []ClientRecord) []ClientRecord {
	return slices.DeleteFunc(slices.Clone(recs), func(r ClientRecord) bool { return r.Summary != "" })
}

// hasIPv6Loopback reports whether ::1 can be listened on.
func hasIPv6Loopback() bool {
	l, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// historyLongSize is the server's events_statements_history_long size.
func historyLongSize(ctx context.Context, inst *sandbox.Instance) (int, error) {
	db, err := inst.Open("")
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var size int
	err = db.QueryRowContext(ctx, "SELECT @@performance_schema_events_statements_history_long_size").Scan(&size)
	return size, err
}

// prepareField makes the lab's schema and the applications' accounts.
func prepareField(ctx context.Context, inst *sandbox.Instance, env *fieldEnv) error {
	db, err := inst.Open("")
	if err != nil {
		return err
	}
	defer db.Close()
	var qs []string
	for _, u := range [][2]string{{env.user, env.password}, {env.user2, env.password2}} {
		for _, h := range []string{"%", "localhost"} {
			qs = append(qs, fmt.Sprintf("CREATE USER IF NOT EXISTS '%s'@'%s' IDENTIFIED BY '%s'", u[0], h, u[1]),
				fmt.Sprintf("GRANT ALL ON field.* TO '%s'@'%s'", u[0], h),
				fmt.Sprintf("GRANT FILE ON *.* TO '%s'@'%s'", u[0], h))
		}
	}
	qs = append(qs,
		"CREATE DATABASE IF NOT EXISTS field",
		"CREATE TABLE IF NOT EXISTS field.t (id INT PRIMARY KEY, v INT)",
		"INSERT IGNORE INTO field.t SELECT seq, seq FROM field.seq_1_to_1000",
		"CREATE TABLE IF NOT EXISTS field.ld (id INT PRIMARY KEY, s VARCHAR(100))",
		"CREATE TABLE IF NOT EXISTS field.big (id INT PRIMARY KEY, b LONGBLOB)",
		"CREATE PROCEDURE IF NOT EXISTS field.slow_proc() BEGIN SELECT SLEEP(0.1); END",
	)
	for _, q := range qs {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("preparing the field lab: %s: %w", q, err)
		}
	}
	return nil
}

// fieldSink keeps every statement watch reports.
type fieldSink struct {
	mu     sync.Mutex
	events []event.Statement
}

func (f *fieldSink) add(s *event.Statement) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, *s)
}

func (f *fieldSink) all() []event.Statement {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.events)
}

// matchEvent finds the event of rec: same connection, its request (or,
// server-only, the server's start) within the client's call, and the same
// command with its text holding rec.Match; the first one not taken yet.
// An encrypted statement (command "TLS") has no text unless it joined (the
// server's digest text): among those in the window with none, the longest
// is taken, the statement a condition times being its connection's
// slowest (a SLEEP beside SELECT CONNECTION_ID()).
func matchEvent(events []event.Statement, rec ClientRecord, used map[int]bool) int {
	const slackUS = 2000
	best, nearest := -1, -1
	for k, s := range events {
		// A server-only event without its connection's id is still the
		// client's statement by time and text (the judge says the id is
		// missing).
		anyConn := s.ConnID == 0 && s.Why.ServerOnly() && rec.Match != ""
		if used[k] || (s.ConnID != rec.ConnID && !anyConn) || (s.Cmd != rec.Cmd && s.Cmd != tlsCmd) {
			continue
		}
		if s.TReqFirst < rec.StartUS-slackUS || s.TReqFirst > rec.EndUS+slackUS {
			continue
		}
		text := strings.ToUpper(s.SQL + " " + s.DigestText)
		if rec.Match == "" || strings.Contains(text, rec.Match) {
			// The nearest to the client's start: a connection's statements
			// of one text are emitted in the order they were given up or
			// joined, and a client stalled between two of them puts the
			// next one inside its window's slack.
			if nearest < 0 || abs(s.TReqFirst-rec.StartUS) < abs(events[nearest].TReqFirst-rec.StartUS) {
				nearest = k
			}
			continue
		}
		if s.Cmd == tlsCmd && strings.TrimSpace(text) == "" && s.HasResponse() &&
			(best < 0 || s.ClientUS > events[best].ClientUS) {
			best = k
		}
	}
	if nearest >= 0 {
		best = nearest
	}
	if best >= 0 {
		used[best] = true
	}
	return best
}

func abs(x int64) int64 { return max(x, -x) }

// tlsCmd is the command of an encrypted statement (capture cannot read it).
const tlsCmd = "TLS"

// extraEvents lists, for the text and the judges, the events on the
// condition's connections that no client statement took (logins,
// COM_QUIT, the CLI's CONNECTION_ID()) and are not joined.
func extraEvents(events []event.Statement, recs []ClientRecord, used map[int]bool) []event.Statement {
	conns := map[uint64]bool{}
	for _, r := range recs {
		if r.Summary == "" {
			conns[r.ConnID] = true
		}
	}
	var out []event.Statement
	for k, s := range events {
		if !used[k] && conns[s.ConnID] && !s.Joined {
			out = append(out, s)
		}
	}
	return out
}

// Lines render the report for the text output: per condition its verdict,
// then each statement, the client's time beside watch's.
func (rep *FieldReport) Lines() []string {
	var out []string
	if len(rep.Missing) > 0 {
		out = append(out, "clients missing (scripts/install-deps.sh installs them): "+strings.Join(rep.Missing, "; "))
	}
	for _, c := range rep.Conditions {
		verdict := "holds"
		if !c.Holds {
			verdict = "DOES NOT HOLD: " + strings.Join(c.Problems, "; ")
		}
		out = append(out, fmt.Sprintf("%s (%s): %s", c.Name, c.Client, verdict))
		for _, n := range c.Notes {
			out = append(out, "    "+n)
		}
		shown := c.Statements
		if len(shown) > 6 {
			shown = shown[:3]
		}
		for _, st := range shown {
			out = append(out, "    "+st.Line())
		}
		if len(shown) < len(c.Statements) {
			out = append(out, fmt.Sprintf("    ... and %d more (--format json lists them)", len(c.Statements)-len(shown)))
		}
		if len(c.Others) > 0 {
			byReason := map[string]int{}
			for _, s := range c.Others {
				byReason[watch.UnjoinedReason(&s).String()]++
			}
			out = append(out, fmt.Sprintf("    other unjoined events on these connections, by reason: %v", byReason))
		}
	}
	return out
}

// Line is the client's time beside watch's parts.
func (st FieldStatement) Line() string {
	c := st.Client
	client := "client " + report.Micros(c.ClientUS)
	if c.Error != 0 {
		client += fmt.Sprintf(" (error %d)", c.Error)
	}
	if st.Watch == nil {
		return fmt.Sprintf("conn %d %s %s | watch: nothing reported", c.ConnID, c.Cmd, client)
	}
	s := st.Watch
	var w string
	switch {
	case s.Joined:
		w = fmt.Sprintf("joined: client %s = request %s + queue %s + exec %s + stall %s + delivery %s (server %s)",
			report.Micros(s.ClientUS), report.Micros(s.RequestUS), report.Micros(s.QueueUS), report.Micros(s.ExecUS), report.Micros(s.SendStallUS), report.Micros(s.DeliveryUS), report.Micros(s.ServerUS))
	case s.Why.ServerOnly():
		w = fmt.Sprintf("server only (%s): server %s", s.Why, report.Micros(s.ServerUS))
	default:
		w = fmt.Sprintf("not joined (%s): client %s", watch.UnjoinedReason(s), report.Micros(s.ClientUS))
	}
	if s.Error != nil {
		w += fmt.Sprintf(" error %d", s.Error.Code)
	}
	return fmt.Sprintf("conn %d %s %s | watch %s", c.ConnID, c.Cmd, client, w)
}

// The judges: each adds a problem per expectation not met.

func (c *FieldCondition) problem(format string, a ...any) {
	c.Problems = append(c.Problems, fmt.Sprintf(format, a...))
}

// joinedSleeps: every statement reported and joined, parts summing to
// client_us, watch's client time within the client's; with wantUS, those
// matching SLEEP have exec within 5% of it (or of the server's own time
// when the sleeping thread woke late).
func joinedSleeps(wantUS int64) func(*FieldCondition, *fieldJudge) {
	return func(c *FieldCondition, _ *fieldJudge) {
		for i, st := range c.Statements {
			if !c.joined(i, st) {
				continue
			}
			if wantUS > 0 && st.Client.Cmd != "COM_CHANGE_USER" && !strings.HasPrefix(st.Client.Match, "SEQ") {
				c.execNear(i, st.Watch, wantUS)
			}
		}
		if len(c.Statements) == 0 {
			c.problem("the client ran no statement")
		}
	}
}

// joined checks statement i is reported, joined, its parts exact and its
// client time inside the client's.
func (c *FieldCondition) joined(i int, st FieldStatement) bool {
	s := st.Watch
	if s == nil {
		c.problem("statement %d (conn %d): not reported by watch (its connection's events: %v)", i+1, st.Client.ConnID, st.ConnEvents)
		return false
	}
	if !s.Joined {
		c.problem("statement %d (conn %d): not joined (reason %s)", i+1, st.Client.ConnID, watch.UnjoinedReason(s))
		return false
	}
	if sum := s.RequestUS + s.QueueUS + s.ExecUS + s.SendStallUS + s.DeliveryUS; sum != s.ClientUS {
		c.problem("statement %d: parts sum to %d µs, client_us %d", i+1, sum, s.ClientUS)
	}
	// Two clocks (the kernel's packet stamps, the client's timer): 1 ms,
	// twice the client's resolution or 2% of its figure, the most.
	if slack := max(1000, 2*st.Client.ClientResolutionUS, st.Client.ClientUS/50); s.ClientUS > st.Client.ClientUS+slack {
		c.problem("statement %d: watch's client time %d µs exceeds what the client measured, %d µs", i+1, s.ClientUS, st.Client.ClientUS)
	}
	return true
}

// execNear checks exec within 5% of wantUS; when the server recorded more
// (a sleeping thread woken late on a loaded host, whose end the server
// also records only after sending the response), exec may run up to the
// server's time.
func (c *FieldCondition) execNear(i int, s *event.Statement, wantUS int64) {
	hi := wantUS * 105 / 100
	if s.ServerUS > hi {
		hi = s.ServerUS * 105 / 100
	}
	if s.ExecUS < wantUS*95/100 || s.ExecUS > hi {
		c.problem("statement %d: exec %d µs, want %d µs within 5%% (server recorded %d µs)", i+1, s.ExecUS, wantUS, s.ServerUS)
	}
}

// othersTrue: an unjoined event on a condition's connections that is not
// one of its statements must be one with no response to join (COM_QUIT),
// or a statement of a unix-socket client reported as such (the CLI's own
// SELECT CONNECTION_ID() and its quit); any other is a statement the
// client did not send, or one reported with a reason that does not say
// what it is.
func (c *FieldCondition) othersTrue() {
	for _, s := range c.Others {
		if r := watch.UnjoinedReason(&s); r != event.NoResponse && r != event.UnixSocket {
			c.problem("conn %d: an event the client did not send as a statement (%s, %d B request, %d B response, client %s), unjoined with reason %s",
				s.ConnID, s.Cmd, s.ReqBytes, s.RespBytes, report.Micros(s.ClientUS), r)
		}
	}
}

func judgeTimeout(c *FieldCondition, j *fieldJudge) {
	joinedSleeps(100_000)(c, j)
	for i, st := range c.Statements {
		if st.Client.Error != 1969 {
			c.problem("statement %d: the client got error %d, want 1969 (max_statement_time exceeded)", i+1, st.Client.Error)
		}
		if st.Watch != nil && (st.Watch.Error == nil || st.Watch.Error.Code != 1969) {
			c.problem("statement %d: watch reported error %v, want 1969", i+1, st.Watch.Error)
		}
	}
}

func judgeIPv6(c *FieldCondition, j *fieldJudge) {
	joinedSleeps(100_000)(c, j)
	for i, st := range c.Statements {
		if st.Watch != nil && !strings.Contains(st.Watch.Conn, "::1") {
			c.problem("statement %d: connection %q is not over ::1", i+1, st.Watch.Conn)
		}
	}
}

func judgeChangeUser(c *FieldCondition, j *fieldJudge) {
	var selects []FieldStatement
	for _, st := range c.Statements {
		if st.Client.Cmd != "COM_CHANGE_USER" {
			selects = append(selects, st)
		}
	}
	sub := FieldCondition{Statements: selects}
	joinedSleeps(100_000)(&sub, j)
	c.Problems = append(c.Problems, sub.Problems...)
	if len(selects) != 2 {
		c.problem("%d selects around the change of user, want 2", len(selects))
	}
}

func judgeUnixSocket(c *FieldCondition, _ *fieldJudge) {
	for i, st := range c.Statements {
		s := st.Watch
		switch {
		case s == nil:
			c.problem("statement %d (conn %d): not reported by watch (want a server-only event, reason %s)", i+1, st.Client.ConnID, event.UnixSocket)
		case s.Joined || s.Why != event.UnixSocket || s.ConnID != st.Client.ConnID:
			c.problem("statement %d: joined %v, reason %q, conn_id %d, want a server-only event with reason %s on conn %d",
				i+1, s.Joined, s.Why, s.ConnID, event.UnixSocket, st.Client.ConnID)
		case s.ServerUS < 150_000*95/100 || s.ServerUS > st.Client.ClientUS*105/100+2*st.Client.ClientResolutionUS:
			// The server's timer and the CLI's are two clocks: on a loaded
			// host TIMER_WAIT came out 153 ms for a call the CLI timed at
			// 150 ms; within 5% of the client's is agreement.
			c.problem("statement %d: server time %d µs, want 150 ms (within 5%%) and within 5%% of the client's %d µs", i+1, s.ServerUS, st.Client.ClientUS)
		}
	}
	if len(c.Statements) == 0 {
		c.problem("the client ran no statement")
	}
}

func judgeMulti(c *FieldCondition, j *fieldJudge) {
	joinedSleeps(100_000)(c, j)
	for i, st := range c.Statements {
		if s := st.Watch; s != nil && s.Joined && s.DeliveryUS >= 1000 {
			c.problem("statement %d: delivery %d µs, want < 1 ms (the answer is a few hundred bytes on loopback)", i+1, s.DeliveryUS)
		}
	}
}

func judgeBigInsert(c *FieldCondition, j *fieldJudge) {
	joinedSleeps(0)(c, j)
	for i, st := range c.Statements {
		if st.Watch != nil && st.Watch.ReqBytes < 20_000_000 {
			c.problem("statement %d: request of %d bytes, want >= 20 MB", i+1, st.Watch.ReqBytes)
		}
	}
}

// judgeChurn: >= 99.5% of the churn's statements joined; each unjoined one
// reported with a reason, and the reason true: no ring loss beyond what
// the poller counted, no unknown thread (every connection began under the
// capture, its handshake seen); and the coverage's unjoined counts by
// reason equal the events', reason by reason.
func judgeChurn(c *FieldCondition, j *fieldJudge) {
	var joined, missing int
	reasons := map[event.Reason]int{}
	// position: of the unjoined, how many were their connection's 1st,
	// 2nd, 3rd statement (the last one's thread may end before a poll).
	position := map[int]int{}
	nth := map[uint64]int{}
	for _, st := range c.Statements {
		nth[st.Client.ConnID]++
		switch {
		case st.Watch == nil:
			missing++
		case st.Watch.Joined:
			joined++
		default:
			reasons[watch.UnjoinedReason(st.Watch)]++
			position[nth[st.Client.ConnID]]++
		}
	}
	shown := 0
	for _, st := range c.Statements {
		if st.Watch != nil && !st.Watch.Joined && shown < 5 {
			shown++
			c.Notes = append(c.Notes, fmt.Sprintf("unjoined: %s (request at %s, %s into the run)", st.Line(),
				time.UnixMicro(st.Watch.TReqFirst).Format("15:04:05.000000"), time.Duration(st.Watch.TReqFirst-c.Statements[0].Client.StartUS)*time.Microsecond))
		}
	}
	n := len(c.Statements)
	c.Notes = append(c.Notes, fmt.Sprintf("%d statements: %d joined (%.2f%%), %d not reported, unjoined by reason %v, by position in their connection %v",
		n, joined, 100*float64(joined)/float64(max(n, 1)), missing, reasonNames(reasons), position))
	if n == 0 {
		c.problem("the client ran no statement")
		return
	}
	// The CPU budget may cut the join sample (the lab's process holds its
	// harness beside watch, and every condition before this one spent
	// from the same budget): the connections it left out are seen,
	// counted and timed, their statements' reason true when the governor
	// recorded the cut. The 99.5% is of the statements the sample held.
	sampled := reasons[event.SampledOut]
	if sampled > 0 {
		if cut := budgetCut(j.res.Own); cut == "" {
			c.problem("%d unjoined with reason %s, untrue: the join sample was never cut", sampled, event.SampledOut)
		} else {
			c.Notes = append(c.Notes, fmt.Sprintf("%d statements left out of the join sample by the CPU budget (%s): judged on the %d it held", sampled, cut, n-sampled))
		}
	}
	if held := n - sampled; joined*1000 < held*995 {
		c.problem("%d of %d statements joined (%.2f%%), want >= 99.5%%", joined, held, 100*float64(joined)/float64(max(held, 1)))
	}
	if missing > 0 {
		c.problem("%d statements not reported by watch", missing)
	}
	for r, k := range reasons {
		switch r {
		case event.NoReason:
			c.problem("%d unjoined with no reason", k)
		case event.NoConn, event.MidStream, event.TLS:
			c.problem("%d unjoined with reason %s, untrue: every connection began under the capture, its handshake seen", k, r)
		}
	}
	// run_end is true of a statement sent within --max-wait of the end.
	var early int
	for _, st := range c.Statements {
		if s := st.Watch; s != nil && !s.Joined && watch.UnjoinedReason(s) == event.RunEnd &&
			s.TReqFirst < j.stoppedUS-j.maxWait.Microseconds() {
			early++
		}
	}
	if early > 0 {
		c.problem("%d unjoined with reason %s, untrue: sent more than --max-wait (%s) before the run ended", early, event.RunEnd, j.maxWait)
	}
	var ringLost int64
	all := map[string]int64{}
	serverOnly := map[string]int64{}
	for k := range j.events {
		s := &j.events[k]
		if s.Joined {
			continue
		}
		r := watch.UnjoinedReason(s)
		if r.ServerOnly() { // counted apart from the wire's statements
			serverOnly[r.String()]++
			continue
		}
		all[r.String()]++
		if r == event.RingLost {
			ringLost++
		}
	}
	if ringLost > j.res.ServerSide.RingLost {
		c.problem("%d statements say the ring lost their row, the poller counted %d rows lost", ringLost, j.res.ServerSide.RingLost)
	}
	cov := maps.Clone(j.res.Coverage.Unjoined)
	maps.DeleteFunc(cov, func(_ string, v int64) bool { return v == 0 })
	if !maps.Equal(cov, all) {
		c.problem("coverage's unjoined by reason %v, the wire statements' %v", cov, all)
	}
	if len(serverOnly) > 0 {
		c.Notes = append(c.Notes, fmt.Sprintf("server-only events of the whole run, by reason: %v", serverOnly))
	}
}

func reasonNames(m map[event.Reason]int) map[string]int {
	out := map[string]int{}
	for r, n := range m {
		out[r.String()] = n
	}
	return out
}

// ownLine says what watch cost and every change of its join sample: a
// condition joined less than whole because the CPU budget cut the sample
// shows here, with the share that led to it.
func ownLine(o watch.OwnCost) string {
	line := fmt.Sprintf("watch's own CPU: %.2fs, %.2f%% of %d CPUs (budget %.2f%%)", o.CPUSeconds, 100*o.Share, o.CPUs, 100*o.Budget)
	for _, st := range o.Steps {
		line += fmt.Sprintf("; %s 1 in %d (window at %.2f%%)", time.UnixMicro(st.AtUS).Format("15:04:05.000"), st.Sample, 100*st.CPUShare)
	}
	return line
}

// budgetCut describes the join sample's cuts the governor recorded ("":
// none).
func budgetCut(o watch.OwnCost) string {
	var cuts []string
	for _, st := range o.Steps {
		if st.Sample > 1 {
			cuts = append(cuts, fmt.Sprintf("1 in %d at a window of %.2f%%", st.Sample, 100*st.CPUShare))
		}
	}
	return strings.Join(cuts, ", ")
}
