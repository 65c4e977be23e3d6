package overhead

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/sandbox"
	"github.com/gapscope/gapscope/internal/watch"
	"github.com/gapscope/gapscope/internal/workload"
	"github.com/go-sql-driver/mysql"
)

// Errors callers branch on (the CLI turns them into usage errors).
var (
	// ErrNeedsConsent: configurations would change a server that is not a
	// sandbox and the user did not agree.
	ErrNeedsConsent = errors.New("changing settings of a server that is not a gapscope sandbox needs --i-understand-this-changes-settings")
	// ErrNeedsRestart: a configuration needs a startup option changed on a
	// server gapscope may not restart.
	ErrNeedsRestart = errors.New("configuration needs a server restart")
)

// DefaultSchema is where the workload's tables go: never a user's sbtest.
const DefaultSchema = "gapscope_overhead"

// Options configure a run. Zero values pick the defaults in withDefaults.
type Options struct {
	// DSN of the server to measure (go-sql-driver form; the password may
	// come from MYSQL_PWD).
	DSN string
	// Secrets learns the password of DSN and masks the run's messages
	// with it: the command's own (nil: the run keeps a registry of its
	// own).
	Secrets *collect.Secrets
	// Sandbox, when set, is the instance behind DSN: gapscope owns it and
	// may restart it with SandboxArgs plus the performance_schema option a
	// configuration needs.
	Sandbox     *sandbox.Instance
	SandboxArgs []string
	// AllowChanges is the user's consent to change a server that is not a
	// sandbox (settings are restored afterwards, Ctrl-C included).
	AllowChanges bool
	// Configs in rotation order; the first is the baseline.
	Configs []Config
	// Rounds is the rotations every configuration runs (default 3).
	// Rotations are then added while a row is undecided (its interval
	// neither excludes 1.0 nor lies within Resolution of it), with the
	// decided rows left out, and those that could not be decided in the
	// time left (leaveOutHopeless), as long as the next rotation fits in
	// TimeLimit (measured from the first round; default 5 minutes,
	// negative: no rotations added). Duration of each measured round
	// (default 20 s); Warmup runs the workload unmeasured after each
	// change (default 3 s, negative: none).
	Rounds           int
	TimeLimit        time.Duration
	Duration, Warmup time.Duration
	// Workload shapes the OLTP load (Tables, TableSize, Threads; Schema
	// defaults to DefaultSchema). Duration and Events are set per round.
	Workload workload.OLTPOptions
	// Driver is "builtin" (internal/workload OLTP) or "sysbench".
	Driver string
	// SkipPrepare uses tables already prepared; KeepData leaves them after
	// the run (by default the schema is dropped if this run created it).
	SkipPrepare, KeepData bool
	// Resolution is the smallest ratio change worth telling (default 5%).
	Resolution float64
	// WatchIface is the capture interface of gapscope-watch ("" picks it).
	WatchIface string
	// Progress, when set, is told before and after every round.
	Progress func(Progress)
	// OnRound, when set, gets every completed round (e.g. to store it).
	OnRound func(Round) error
}

func (o Options) withDefaults() Options {
	if o.Secrets == nil {
		o.Secrets = collect.NewSecrets()
	}
	if o.Rounds <= 0 {
		o.Rounds = 3
	}
	if o.Duration <= 0 {
		o.Duration = 20 * time.Second
	}
	if o.TimeLimit == 0 {
		o.TimeLimit = DefaultTimeLimit
	}
	if o.Warmup == 0 {
		o.Warmup = 3 * time.Second
	}
	if o.Driver == "" {
		o.Driver = "builtin"
	}
	if o.Workload.Schema == "" {
		o.Workload.Schema = DefaultSchema
	}
	// The workload's own defaults, made explicit for the result.
	o.Workload.Tables, o.Workload.Threads = max(o.Workload.Tables, 1), max(o.Workload.Threads, 1)
	if o.Workload.TableSize <= 0 {
		o.Workload.TableSize = 10_000
	}
	if o.Resolution <= 0 {
		o.Resolution = DefaultResolution
	}
	return o
}

// DefaultTimeLimit bounds the rotations added to decide every row.
const DefaultTimeLimit = 5 * time.Minute

// Progress describes where a run is.
type Progress struct {
	Step  int // rounds done
	Round int // current rotation (1-based)
	// Rounds is the rotations every configuration runs; more are added
	// while a row is undecided, until Limit.
	Rounds        int
	Config        string
	Elapsed, Left time.Duration
	Limit         time.Duration
	// Last is the round just finished (nil when one is starting).
	Last *Round
	// Table, set after a rotation, is the table so far.
	Table []Row
}

// Result is a run's outcome: every round, the table, and what happened.
type Result struct {
	Server    string        `json:"server"`
	Sandbox   bool          `json:"sandbox"`
	Driver    string        `json:"driver"`
	Configs   []string      `json:"configs"`
	Baseline  string        `json:"baseline"`
	Threads   int           `json:"threads"`
	Tables    int           `json:"tables"`
	TableSize int           `json:"table_size"`
	Duration  time.Duration `json:"round_ns"`
	Warmup    time.Duration `json:"warmup_ns"`
	// MinRounds every configuration ran; rotations were added while a row
	// was undecided, up to TimeLimit.
	MinRounds  int           `json:"min_rounds"`
	TimeLimit  time.Duration `json:"time_limit_ns"`
	Rounds     []Round       `json:"rounds"`
	Table      []Row         `json:"table"`
	Method     string        `json:"method"`
	Resolution float64       `json:"resolution"`
	// Restored is true when the settings read after the run equal those
	// read before it.
	Restored bool `json:"restored"`
	// Watch* sum what gapscope watch saw in its rounds: statements on the
	// wire, joined with performance_schema, packets dropped. A watch that
	// saw nothing would have cost nothing.
	WatchStatements int64         `json:"watch_statements"`
	WatchJoined     int64         `json:"watch_joined"`
	WatchDropped    int64         `json:"watch_dropped"`
	Notes           []string      `json:"notes"`
	Elapsed         time.Duration `json:"elapsed_ns"`
}

// session is the state a run's configurations work on.
type session struct {
	opts Options
	cfg  *mysql.Config
	dsn  string
	db   *sql.DB
	orig Settings
	psOn bool
	// psUnsure: a restart was interrupted; the server may be in either
	// state, or down.
	psUnsure bool
	// extra are the startup options the sandbox runs with beyond its
	// own (a configuration's Startup).
	extra  []string
	watch  *watchRun
	active *Config
	notes  []string
	// What the watch engine saw over all gapscope-watch rounds.
	watchWire, watchJoined, watchDropped int64
}

func (s *session) note(format string, a ...any) { s.notes = append(s.notes, fmt.Sprintf(format, a...)) }

// Run measures every configuration in rotated rounds and returns the table.
// The server's settings are read first and restored at the end, also when
// ctx is cancelled (with a fresh context) or a round fails; Result.Restored
// says whether reading them back found them equal. A cancelled run returns
// the rounds completed so far together with ctx's error.
func Run(ctx context.Context, o Options) (*Result, error) {
	o = o.withDefaults()
	if err := validate(o); err != nil {
		return nil, err
	}
	s, err := openSession(ctx, o)
	if err != nil {
		return nil, err
	}
	defer func() { s.db.Close() }() // s.db changes on restarts
	if err := s.checkAllowed(); err != nil {
		return nil, err
	}
	started := time.Now()
	res := s.newResult()
	err = s.prepare(ctx)
	if err == nil {
		err = s.rotate(ctx, res, time.Now()) // time left counts rounds only
	}
	if cerr := s.cleanup(ctx, res); err == nil {
		err = cerr
	}
	res.Table = Summarize(res.Rounds, res.Configs, o.Resolution)
	s.notes = append(s.notes, driftNotes(res.Table)...)
	if s.watchWire > 0 {
		s.note("gapscope-watch: watch saw %d statements on the wire, joined %d with performance_schema, dropped %d packets",
			s.watchWire, s.watchJoined, s.watchDropped)
	}
	res.Notes, res.Elapsed = s.notes, time.Since(started)
	res.WatchStatements, res.WatchJoined, res.WatchDropped = s.watchWire, s.watchJoined, s.watchDropped
	return res, err
}

func validate(o Options) error {
	if len(o.Configs) < 2 {
		return fmt.Errorf("overhead: need a baseline and at least one configuration to compare, got %d", len(o.Configs))
	}
	if o.Driver != "builtin" && o.Driver != "sysbench" {
		return fmt.Errorf("overhead: driver %q: want builtin or sysbench", o.Driver)
	}
	if o.Driver == "sysbench" && !workload.SysbenchAvailable() {
		return errors.New("overhead: --driver sysbench: sysbench is not installed (apt-get install sysbench)")
	}
	return nil
}

func openSession(ctx context.Context, o Options) (*session, error) {
	cfg, err := o.Secrets.Config(o.DSN, "")
	if err != nil {
		return nil, err
	}
	db, err := o.Secrets.OpenConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	orig, err := ReadSettings(ctx, db)
	if err != nil {
		db.Close()
		return nil, err
	}
	return &session{opts: o, cfg: cfg, dsn: cfg.FormatDSN(), db: db, orig: orig, psOn: orig.PerfSchema}, nil
}

// checkAllowed refuses, before anything changes, what this server may not
// get: restarts of servers gapscope does not own, and changes without
// consent.
func (s *session) checkAllowed() error {
	if s.opts.Sandbox != nil {
		return nil
	}
	var changing []string
	for _, c := range s.opts.Configs {
		if len(c.Startup) > 0 {
			s.note("%s: applied at runtime, so this row understates: gapscope restarts only its own sandboxes, and settings enabled at runtime miss "+
				"the mutexes, rwlocks and other objects the server created at startup, where most of the cost is; a server started with %s pays more "+
				"(gapscope overhead --sandbox measures both)", c.Name, strings.Join(c.Startup, " "))
		}
		if c.NeedsRestart(s.psOn) {
			return fmt.Errorf("%w: %s needs performance_schema=%s, a startup option; gapscope restarts only its own sandboxes (use --sandbox), "+
				"or restart this server yourself and leave %s out", ErrNeedsRestart, c.Name, onOff(!s.psOn), c.Name)
		}
		if c.Changes {
			changing = append(changing, c.Name)
		}
	}
	if len(changing) > 0 && !s.opts.AllowChanges {
		return fmt.Errorf("%w: %s would change global settings for the whole server during the run (restored afterwards, Ctrl-C included)",
			ErrNeedsConsent, strings.Join(changing, ", "))
	}
	return nil
}

func onOff(b bool) string {
	if b {
		return "ON"
	}
	return "OFF"
}

func (s *session) newResult() *Result {
	o := s.opts
	w := o.Workload
	return &Result{Server: o.Secrets.RedactDSN(o.DSN), Sandbox: o.Sandbox != nil, Driver: o.Driver, Configs: Names(o.Configs),
		Baseline: o.Configs[0].Name, Threads: w.Threads, Tables: w.Tables, TableSize: w.TableSize,
		Duration: o.Duration, Warmup: max(o.Warmup, 0), Method: Method, Resolution: o.Resolution, MinRounds: o.Rounds, TimeLimit: max(o.TimeLimit, 0)}
}

// prepare fills the workload's tables once for all rounds.
func (s *session) prepare(ctx context.Context) error {
	if s.opts.SkipPrepare {
		return nil
	}
	w := s.opts.Workload
	if s.opts.Driver == "sysbench" {
		// sysbench prepare refuses existing tables.
		if err := workload.OLTPCleanup(ctx, s.dsn, w); err != nil {
			return err
		}
		_, err := workload.Sysbench(ctx, s.dsn, w, "prepare")
		return err
	}
	return workload.OLTPPrepare(ctx, s.dsn, w)
}

// rotate runs the rounds A B C, then C B A, A B C ...: each rotation
// compares the configurations under nearly the same conditions, which
// cancels drift (caches warming, other load on the machine) out of the
// paired ratios, and reversing the order every other rotation cancels the
// drift within one. After Rounds rotations, rows already decided are left
// out and rotations are added while any is undecided and the next fits in
// the time limit.
func (s *session) rotate(ctx context.Context, res *Result, started time.Time) error {
	names := Names(s.opts.Configs)
	active := make([]int, len(names))
	for i := range active {
		active[i] = i
	}
	took := make([]time.Duration, len(names)) // each configuration's last round, restart included
	step := 0
	for r := 0; ; r++ {
		if r >= s.opts.Rounds {
			table := Summarize(res.Rounds, names, s.opts.Resolution)
			active = undecided(table, active)
			if s.opts.TimeLimit > 0 {
				active = s.leaveOutHopeless(table, active, s.opts.TimeLimit-time.Since(started), took, r)
			}
			if len(active) < 2 || s.opts.TimeLimit < 0 || time.Since(started)+rotationTime(took, active) > s.opts.TimeLimit {
				return nil
			}
		}
		order := slices.Clone(active)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, i := range order {
			c := s.opts.Configs[i]
			p := Progress{Step: step, Round: r + 1, Rounds: s.opts.Rounds, Config: c.Name, Limit: s.opts.TimeLimit}
			s.report(p, started)
			t0 := time.Now()
			round, err := s.round(ctx, r, i, c)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", r+1, c.Name, err)
			}
			took[i] = time.Since(t0)
			res.Rounds = append(res.Rounds, round)
			if s.opts.OnRound != nil {
				if err := s.opts.OnRound(round); err != nil {
					return err
				}
			}
			step++
			p.Step, p.Last = step, &round
			s.report(p, started)
		}
		if r+1 >= 2 {
			s.report(Progress{Step: step, Round: r + 1, Rounds: s.opts.Rounds, Limit: s.opts.TimeLimit,
				Table: Summarize(res.Rounds, names, s.opts.Resolution)}, started)
		}
	}
}

// undecided keeps the baseline (index 0) and the rows of active whose
// verdict is still unknown.
func undecided(table []Row, active []int) []int {
	out := []int{0}
	for _, i := range active {
		if i > 0 && table[i].AboveNoise == VerdictUnknown {
			out = append(out, i)
		}
	}
	return out
}

// leaveOutHopeless drops from active the rows that could not be decided in
// the time left even if they ran alone with the baseline and their ratio
// and spread held (PairsToDecide), and notes each: rotations are then spent
// on the rows that can be decided. Undecided at the end, such a row says so
// with its interval as any other.
func (s *session) leaveOutHopeless(table []Row, active []int, left time.Duration, took []time.Duration, r int) []int {
	out := []int{0}
	for _, i := range active[1:] {
		per := took[0] + took[i]
		more := 0
		if per > 0 {
			more = int(left / per)
		}
		if need := PairsToDecide(table[i], s.opts.Resolution, more); need < 0 {
			_, lo, hi := table[i].Decided()
			s.note("%s: left out after rotation %d: at its spread (x%.3f–x%.3f over %d pairs) it would need more pairs than the %d the time left allows",
				table[i].Config, r, lo, hi, table[i].Pairs, table[i].Pairs+more)
			continue
		}
		out = append(out, i)
	}
	return out
}

// PairsToDecide is how many pairs row would need for a verdict if its
// ratio and the spread of its pairs stayed as they are, trying up to more
// pairs beyond those it has; -1 when that is not enough (or 0 with no
// spread to go by, or a drifting row whose ratio more pairs should undo:
// the row keeps its rotations). The spread is recovered from the row's 95%
// interval.
func PairsToDecide(row Row, resolution float64, more int) int {
	x, lo, hi := row.Decided()
	n := row.Pairs
	if n < 2 || lo <= 0 || hi <= lo || x <= 0 || row.Drift {
		return 0
	}
	m := math.Log(x)
	sd := (math.Log(hi) - math.Log(lo)) / 2 * math.Sqrt(float64(n)) / TQuantile975(n-1)
	for k := n + 1; k <= n+more; k++ {
		h := TQuantile975(k-1) * sd / math.Sqrt(float64(k))
		if Verdict(math.Exp(m-h), math.Exp(m+h), k, resolution) != VerdictUnknown {
			return k
		}
	}
	return -1
}

// rotationTime estimates a rotation of the active configurations from
// their last rounds.
func rotationTime(took []time.Duration, active []int) time.Duration {
	var d time.Duration
	for _, i := range active {
		d += took[i]
	}
	return d
}

// report fills the times: elapsed, and what is left of the time limit (of
// the rounds every configuration runs when those take longer).
func (s *session) report(p Progress, started time.Time) {
	if s.opts.Progress == nil {
		return
	}
	p.Elapsed = time.Since(started)
	per := s.opts.Duration + max(s.opts.Warmup, 0)
	if p.Step > 0 {
		per = p.Elapsed / time.Duration(p.Step)
	}
	p.Left = per * time.Duration(s.opts.Rounds*len(s.opts.Configs)-p.Step)
	if s.opts.TimeLimit > 0 {
		p.Left = max(p.Left, s.opts.TimeLimit-p.Elapsed)
	}
	s.opts.Progress(p)
}

// round applies c, warms up, measures, and restores.
func (s *session) round(ctx context.Context, index, pos int, c Config) (Round, error) {
	startup := len(c.Startup) > 0 && s.opts.Sandbox != nil
	var extra []string
	if startup {
		extra = c.Startup
	}
	if err := s.ensureServer(ctx, c, extra); err != nil {
		return Round{}, err
	}
	applied := AppliedRuntime
	if startup || c.PerfSchema != PSAny && !c.Changes {
		applied = AppliedStartup
	}
	if !startup {
		s.active = &c // before Apply: a half-applied config is restored too
		if err := c.Apply(ctx, s); err != nil {
			return Round{}, err
		}
	}
	if s.opts.Warmup > 0 {
		if _, err := s.workload(ctx, s.opts.Warmup); err != nil {
			return Round{}, fmt.Errorf("warming up: %w", err)
		}
	}
	start := time.Now()
	cpu0, cpuOK := s.cpu()
	m, err := s.workload(ctx, s.opts.Duration)
	if err != nil {
		return Round{}, err
	}
	cpu1, cpuOK1 := s.cpu()
	var perTx time.Duration
	if cpuOK && cpuOK1 && m.Transactions > 0 {
		perTx = (cpu1 - cpu0) / time.Duration(m.Transactions)
	}
	if !startup {
		if err := c.Restore(ctx, s); err != nil {
			return Round{}, err
		}
		s.active = nil
	}
	return Round{Config: c.Name, Position: pos, Index: index, StartUS: start.UnixMicro(), TPS: m.TPS, QPS: m.QPS,
		LatAvg: m.Latency.Avg, LatP95: m.Latency.P95, Errors: m.Errors,
		Applied: applied, Understates: len(c.Startup) > 0 && !startup, CPUPerTx: perTx}, nil
}

// cpu is the CPU time the sandbox's server and this process (gapscope and
// its watch: what runs on a database host) used so far; false on a server
// that is not a sandbox, whose CPU gapscope cannot read. sysbench, the
// application, is left out; the builtin workload runs in this process and
// is counted (it dilutes the ratios: the method says so).
func (s *session) cpu() (time.Duration, bool) {
	if s.opts.Sandbox == nil {
		return 0, false
	}
	server, err := s.opts.Sandbox.CPU()
	if err != nil {
		return 0, false
	}
	return server + watch.ProcessCPU(), true
}

// workload runs the OLTP load for d on fresh connections (settings such as
// optimizer_trace reach only sessions opened after them).
func (s *session) workload(ctx context.Context, d time.Duration) (workload.OLTPResult, error) {
	w := s.opts.Workload
	w.Duration, w.Events = d, 0
	if s.opts.Driver == "sysbench" {
		w.Duration = max(d.Round(time.Second), time.Second) // sysbench counts whole seconds
		return workload.Sysbench(ctx, s.dsn, w, "run")
	}
	return workload.OLTP(ctx, s.dsn, w)
}

// ensureServer restarts the sandbox when c needs the other
// performance_schema state or other startup options (extra) than it runs
// with; configs that do not care run in the server's original state, so
// they are compared on equal terms.
func (s *session) ensureServer(ctx context.Context, c Config, extra []string) error {
	want := s.orig.PerfSchema
	switch c.PerfSchema {
	case PSOn:
		want = true
	case PSOff:
		want = false
	}
	if want == s.psOn && slices.Equal(extra, s.extra) {
		return nil
	}
	if err := s.restart(ctx, want, extra); err != nil {
		return err
	}
	return s.preload(ctx)
}

// preload reads every page of the workload's tables into the buffer pool
// (clustered index, then the k index COUNT(*) scans): a restarted server
// otherwise starts its round with a cold cache, which would be charged to
// the configuration that needed the restart. Seen here without it: ps-off
// rounds, each right after a restart, ran at 341-811 TPS against 682-785
// for ps-default in the same rotations.
func (s *session) preload(ctx context.Context) error {
	w := s.opts.Workload
	for n := 1; n <= w.Tables; n++ {
		table := fmt.Sprintf("`%s`.sbtest%d", w.Schema, n)
		for _, q := range []string{"SELECT SUM(LENGTH(c) + LENGTH(pad)) FROM " + table, "SELECT COUNT(*) FROM " + table} {
			var v sql.NullInt64
			if err := s.db.QueryRowContext(ctx, collect.Mark+" "+q).Scan(&v); err != nil {
				return fmt.Errorf("preloading %s: %w", table, err)
			}
		}
	}
	return nil
}

// restart starts the sandbox again on the same data directory with its
// own options, performance_schema as psOn, and extra.
func (s *session) restart(ctx context.Context, psOn bool, extra []string) error {
	inst := s.opts.Sandbox
	if inst == nil {
		return fmt.Errorf("%w: performance_schema=%s", ErrNeedsRestart, onOff(psOn))
	}
	args := []string{}
	for _, a := range s.opts.SandboxArgs {
		if !isPSOption(a) {
			args = append(args, a)
		}
	}
	args = append(append(args, "--performance-schema="+onOff(psOn)), extra...)
	s.psUnsure = true
	if err := inst.Restart(ctx, sandbox.Options{ServerArgs: args}); err != nil {
		return fmt.Errorf("restarting the sandbox with performance_schema=%s %s: %w", onOff(psOn), strings.Join(extra, " "), err)
	}
	s.psOn, s.psUnsure, s.extra = psOn, false, extra
	if err := s.reconnect(ctx); err != nil {
		return err
	}
	return s.learnPSDefaults(ctx)
}

// reconnect replaces the pool after a restart: its idle connections are
// dead, and the driver would log each one it discards.
func (s *session) reconnect(ctx context.Context) error {
	db, err := s.opts.Secrets.OpenConfig(ctx, s.cfg)
	if err != nil {
		return err
	}
	s.db.Close()
	s.db = db
	return nil
}

// isPSOption matches the performance_schema on/off option (not the
// consumer and instrument options, which only matter when it is on).
func isPSOption(a string) bool {
	a = strings.ReplaceAll(a, "_", "-")
	return a == "--performance-schema" || strings.HasPrefix(a, "--performance-schema=") || a == "--skip-performance-schema"
}

// learnPSDefaults: a sandbox that started with performance_schema off has
// no original instrument settings; after its first restart with it on, the
// startup defaults are the state to restore to.
func (s *session) learnPSDefaults(ctx context.Context) error {
	if !s.psOn || s.orig.Instruments != nil || len(s.extra) > 0 {
		return nil
	}
	now, err := ReadSettings(ctx, s.db)
	if err != nil {
		return err
	}
	s.orig.Instruments, s.orig.Consumers, s.orig.Timers = now.Instruments, now.Consumers, now.Timers
	return nil
}

// cleanupTimeout bounds restoring after Ctrl-C.
const cleanupTimeout = time.Minute

// cleanup restores whatever is applied, puts a sandbox back in its original
// performance_schema state, drops the workload's schema when this run made
// it, and reads the settings back to prove they are restored. It uses a
// fresh context: a cancelled run must still clean up.
func (s *session) cleanup(ctx context.Context, res *Result) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	var errs []error
	if s.active != nil {
		errs = append(errs, s.active.Restore(cctx, s))
		s.active = nil
	}
	if s.psUnsure || s.psOn != s.orig.PerfSchema || len(s.extra) > 0 {
		errs = append(errs, s.restart(cctx, s.orig.PerfSchema, nil))
	}
	if !s.opts.SkipPrepare && !s.opts.KeepData {
		errs = append(errs, workload.OLTPCleanup(cctx, s.dsn, s.opts.Workload))
	}
	now, err := ReadSettings(cctx, s.db)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("reading settings back: %w", err))...)
	}
	diff := s.orig.Diff(now)
	res.Restored = len(diff) == 0
	if !res.Restored {
		errs = append(errs, fmt.Errorf("settings not restored: %s", strings.Join(diff, "; ")))
	}
	return errors.Join(errs...)
}
