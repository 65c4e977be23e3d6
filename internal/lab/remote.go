package lab

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gapscope/gapscope/internal/capture"
	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/netlab"
	"github.com/gapscope/gapscope/internal/report"
	"github.com/gapscope/gapscope/internal/sandbox"
	"github.com/gapscope/gapscope/internal/watch"
	"github.com/go-sql-driver/mysql"
)

// RemoteOptions tune the remote scenario.
type RemoteOptions struct {
	Options
	// Delay is the link's one-way delay (default 0: the forwarder's own).
	Delay time.Duration
	// ThreadPool runs the server with --thread-handling=pool-of-threads
	// (idle: nothing should queue).
	ThreadPool bool
	// PointSelects and Sleeps are how many of each statement the
	// application runs (defaults 200 and 3).
	PointSelects, Sleeps int
	// Gapscope is the command that runs gapscope (default: this
	// executable) and GapscopeEnv extra environment for it; watch runs as
	// its own process inside the client's namespace.
	Gapscope    []string
	GapscopeEnv []string
}

// RemoteSummary is what the remote scenario measured.
type RemoteSummary struct {
	DelayUS      int64  `json:"delay_us"`
	ThreadPool   bool   `json:"thread_pool"`
	CapturePoint string `json:"capture_point"`
	// PathRTTUS is the round trip to the server watch measured from TCP
	// (median over connections of each one's smallest), PathSpreadUS how
	// far single samples strayed above it.
	PathRTTUS    int64 `json:"path_rtt_us"`
	PathSpreadUS int64 `json:"path_spread_us"`
	// KernelMinRTTUS is the kernel's smallest round trip of the
	// application's sockets (sock_diag; 0 when unreadable), the
	// cross-check of PathRTTUS.
	KernelMinRTTUS int64 `json:"kernel_min_rtt_us"`
	// ClockErrorUS is the calibration's error bound, ClockPathRTTUS the
	// round trip of its markers' connection.
	ClockErrorUS   int64        `json:"clock_error_us"`
	ClockPathRTTUS int64        `json:"clock_path_rtt_us"`
	PointSelects   PartsMedians `json:"point_selects"`
	Sleeps         PartsMedians `json:"sleeps"`
	SumMismatches  int          `json:"sum_mismatches"`
	// Witness holds the queues against a capture on the server's side.
	Witness WitnessCheck  `json:"server_side_witness"`
	Link    time.Duration `json:"-"`
}

// PartsMedians are the medians of each part over one kind of statement
// (joined ones only, except Seen); TransferUS is request + delivery.
type PartsMedians struct {
	Seen       int   `json:"seen"`
	Joined     int   `json:"joined"`
	ClientUS   int64 `json:"client_us"`
	RequestUS  int64 `json:"request_us"`
	QueueUS    int64 `json:"queue_us"`
	ExecUS     int64 `json:"exec_us"`
	DeliveryUS int64 `json:"delivery_us"`
	TransferUS int64 `json:"transfer_us"`
	MaxQueueUS int64 `json:"max_queue_us"`
	// ServerUS is the median of the server's own TIMER_WAIT.
	ServerUS int64 `json:"server_us"`
}

// serverNice is the lab server's nice value: on a host busy with other
// work, its threads (the thread pool's above all) were kept off the CPU
// for up to 140 ms, a true wait before the statement started that
// watch rightly reports as queue — but not what this lab is about.
const serverNice = -10

// remoteApp is the application's account; the monitor's is monitorUser.
const remoteApp = "app"

// sleepSQL is the statement whose server time is known.
const sleepSQL = "SELECT SLEEP(0.05)"

// Remote runs the managed-database case: MariaDB in one network namespace,
// the application and `gapscope watch` in another, joined by a link that
// delays each packet by Delay each way; watch captures on the application's
// side of the link. The application runs point selects and SELECT
// SLEEP(0.05); the result says where the capture ran, what the path and
// the calibration measured, and how each statement's time splits.
func Remote(ctx context.Context, o RemoteOptions) (*Result, error) {
	started := time.Now()
	o = o.withDefaults()
	r := &Result{Scenario: "remote", Settings: remoteSettings(o)}
	o.step(r, "building a link of %s each way between two network namespaces (TUN devices and a forwarder)", o.Delay)
	link, err := netlab.New(netlab.Options{Delay: o.Delay})
	if err != nil {
		return nil, err
	}
	defer link.Close()
	if !link.Realtime() {
		o.step(r, "the forwarder could not get real-time scheduling: on a busy host the link's delay varies more")
	}
	inst, err := startSandbox(ctx, o.Options, r, sandbox.Options{ServerArgs: r.Settings, NetNS: link.ServerNS(),
		BindAddress: netlab.ServerAddr, Nice: serverNice})
	if err != nil {
		return nil, err
	}
	defer inst.Stop()
	if err := prepareRemote(ctx, inst); err != nil {
		return nil, err
	}
	wit, err := startWitness(link, uint16(inst.Port))
	if err != nil {
		return nil, err
	}
	defer wit.stop()
	w, err := startRemoteWatch(ctx, o, link, inst)
	if err != nil {
		return nil, err
	}
	defer w.kill()
	o.step(r, "watch runs in namespace %s, capturing on %s (the application's side)", link.ClientNS(), link.ClientDevice())
	runErr := runRemoteApp(ctx, o, r, link, inst)
	time.Sleep(1500 * time.Millisecond) // the server's history is read every 100 ms; joins wait for it
	res, err := w.stop()
	if runErr != nil {
		return nil, runErr
	}
	if err != nil {
		return nil, err
	}
	r.Findings = res.Findings
	r.Statements = res.statements
	r.Remote = summarizeRemote(o, res)
	r.Remote.Witness = checkWitness(res.statements, wit.stop())
	r.Seen = describeRemote(r.Remote)
	r.Elapsed = time.Since(started)
	return r, nil
}

func (o RemoteOptions) withDefaults() RemoteOptions {
	if o.PointSelects <= 0 {
		o.PointSelects = 200
	}
	if o.Sleeps <= 0 {
		o.Sleeps = 3
	}
	o.Delay = max(o.Delay, 0)
	return o
}

func remoteSettings(o RemoteOptions) []string {
	s := slices.Clone(psArgs)
	if o.ThreadPool {
		s = append(s, "--thread-handling=pool-of-threads")
	}
	return s
}

// prepareRemote creates, through the socket, the accounts that log in
// across the link (root@localhost cannot come from another namespace) and
// the table the application reads.
func prepareRemote(ctx context.Context, inst *sandbox.Instance) error {
	db, err := sql.Open("mysql", inst.SocketDSN(""))
	if err != nil {
		return err
	}
	defer db.Close()
	stmts := []string{
		"CREATE USER IF NOT EXISTS '" + monitorUser + "'@'%'",
		"GRANT PROCESS ON *.* TO '" + monitorUser + "'@'%'",
		"GRANT SELECT ON performance_schema.* TO '" + monitorUser + "'@'%'",
		"CREATE USER IF NOT EXISTS '" + remoteApp + "'@'%'",
		"CREATE DATABASE IF NOT EXISTS lab",
		"CREATE DATABASE IF NOT EXISTS test",
		"GRANT ALL ON lab.* TO '" + remoteApp + "'@'%'",
		"CREATE TABLE IF NOT EXISTS lab.t (id INT PRIMARY KEY, v VARCHAR(32))",
		"INSERT IGNORE INTO lab.t SELECT seq, CONCAT('row ', seq) FROM test.seq_1_to_1000",
	}
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("preparing the remote lab (%s): %w", q, err)
		}
	}
	return nil
}

// remoteWatch is `gapscope watch` running inside the client namespace.
type remoteWatch struct {
	cmd    *exec.Cmd
	out    bytes.Buffer
	errLog *lockedTail
	events string
	dir    string
	done   chan error
}

// remoteWatchResult is the part of watch's JSON report the lab reads.
type remoteWatchResult struct {
	Findings   []event.Finding   `json:"findings"`
	Capture    capture.Stats     `json:"capture"`
	KernelPath *watch.KernelPath `json:"kernel_path"`
	Clock      collect.Clock     `json:"clock"`
	Notes      []string          `json:"notes"`
	statements []event.Statement
}

func startRemoteWatch(ctx context.Context, o RemoteOptions, link *netlab.Link, inst *sandbox.Instance) (*remoteWatch, error) {
	argv, err := gapscopeCommand(o)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "gapscope-remote-")
	if err != nil {
		return nil, err
	}
	w := &remoteWatch{dir: dir, events: filepath.Join(dir, "events.jsonl"), errLog: &lockedTail{}, done: make(chan error, 1)}
	dsn := fmt.Sprintf("%s@tcp(%s)/", monitorUser, inst.Addr())
	args := append(argv[1:], "watch", "--dsn", dsn, "--iface", link.ClientDevice(), "--format", "json", "--no-live",
		"--events", w.events, "--poll", "100ms", "--min-poll", "100ms", "--cpu-budget", "0")
	w.cmd = netlab.Command(ctx, link.ClientNS(), argv[0], args...)
	w.cmd.Env = append(os.Environ(), o.GapscopeEnv...)
	w.cmd.Stdout = &w.out
	stderr, err := w.cmd.StderrPipe()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := w.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting watch in %s: %w", link.ClientNS(), err)
	}
	ready := make(chan struct{})
	go w.readStderr(stderr, ready)
	go func() { w.done <- w.cmd.Wait() }()
	select {
	case <-ready:
		return w, nil
	case err := <-w.done:
		w.done <- err
		os.RemoveAll(dir)
		return nil, fmt.Errorf("watch in %s exited before it was ready (%v): %s", link.ClientNS(), err, w.errLog.String())
	case <-time.After(60 * time.Second):
		w.kill()
		return nil, fmt.Errorf("watch in %s not ready after 60 s: %s", link.ClientNS(), w.errLog.String())
	}
}

// gapscopeCommand is the command that runs gapscope.
func gapscopeCommand(o RemoteOptions) ([]string, error) {
	if len(o.Gapscope) > 0 {
		return o.Gapscope, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding the gapscope executable to run watch with: %w", err)
	}
	return []string{exe}, nil
}

func (w *remoteWatch) readStderr(r io.Reader, ready chan struct{}) {
	sc := bufio.NewScanner(r)
	signalled := false
	for sc.Scan() {
		line := sc.Text()
		w.errLog.add(line)
		if !signalled && strings.Contains(line, watch.ReadyLine) {
			close(ready)
			signalled = true
		}
	}
}

// stop interrupts watch as Ctrl-C would, waits for its report and reads
// the statements it wrote.
func (w *remoteWatch) stop() (*remoteWatchResult, error) {
	defer os.RemoveAll(w.dir)
	_ = w.cmd.Process.Signal(syscall.SIGINT)
	var err error
	select {
	case err = <-w.done:
	case <-time.After(30 * time.Second):
		w.kill()
		return nil, fmt.Errorf("watch did not stop within 30 s: %s", w.errLog.String())
	}
	if err != nil {
		return nil, fmt.Errorf("watch in the client namespace: %w: %s", err, w.errLog.String())
	}
	var res remoteWatchResult
	if err := json.Unmarshal(w.out.Bytes(), &res); err != nil {
		return nil, fmt.Errorf("reading watch's report: %w", err)
	}
	stmts, err := readEvents(w.events)
	res.statements = stmts
	return &res, err
}

// kill ends watch if it still runs (os.Process refuses a finished one).
func (w *remoteWatch) kill() {
	if w.cmd.Process != nil {
		_ = w.cmd.Process.Kill()
	}
}

// readEvents reads a JSON Lines file of statements.
func readEvents(path string) ([]event.Statement, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading watch's events: %w", err)
	}
	defer f.Close()
	var out []event.Statement
	dec := json.NewDecoder(f)
	for {
		var s event.Statement
		if err := dec.Decode(&s); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return out, fmt.Errorf("reading watch's events: %w", err)
		}
		out = append(out, s)
	}
}

// lockedTail keeps the last lines of a stream for error messages.
type lockedTail struct {
	lines atomic.Pointer[[]string]
}

func (t *lockedTail) add(line string) {
	old := t.lines.Load()
	var next []string
	if old != nil {
		next = slices.Clone(*old)
	}
	next = append(next, line)
	if len(next) > 20 {
		next = next[len(next)-20:]
	}
	t.lines.Store(&next)
}

func (t *lockedTail) String() string {
	if p := t.lines.Load(); p != nil {
		return strings.Join(*p, "\n")
	}
	return ""
}

// linkNetSeq numbers the driver networks registered for links.
var linkNetSeq atomic.Int64

// runRemoteApp is the application: from the client namespace, one
// connection runs the point selects, then the sleeps.
func runRemoteApp(ctx context.Context, o RemoteOptions, r *Result, link *netlab.Link, inst *sandbox.Instance) error {
	network := fmt.Sprintf("gapscope-link-%d", linkNetSeq.Add(1))
	mysql.RegisterDialContext(network, netlab.DialerIn(link.ClientNS()))
	db, err := sql.Open("mysql", fmt.Sprintf("%s@%s(%s)/lab", remoteApp, network, inst.Addr()))
	if err != nil {
		return err
	}
	defer db.Close()
	conn, err := connectApp(ctx, o, r, db)
	if err != nil {
		return err
	}
	defer conn.Close()
	start := time.Now()
	for i := 0; i < o.PointSelects; i++ {
		var v string
		q := fmt.Sprintf("SELECT v FROM t WHERE id = %d", 1+i%1000)
		if err := conn.QueryRowContext(ctx, q).Scan(&v); err != nil {
			return fmt.Errorf("point select across the link: %w", err)
		}
	}
	o.step(r, "the application ran %d point selects in %s (%s each at the client)", o.PointSelects,
		time.Since(start).Round(time.Millisecond), (time.Since(start) / time.Duration(o.PointSelects)).Round(10*time.Microsecond))
	for i := 0; i < o.Sleeps; i++ {
		if _, err := conn.ExecContext(ctx, sleepSQL); err != nil {
			return fmt.Errorf("%s across the link: %w", sleepSQL, err)
		}
	}
	o.step(r, "and %d × %s", o.Sleeps, sleepSQL)
	return nil
}

// connectApp opens the application's connection. On a host overloaded by
// other work the server has reset a new connection during its handshake
// (seen once in ~30 runs); that is no part of what the lab measures, so it
// tries again, twice at most, and says so.
func connectApp(ctx context.Context, o RemoteOptions, r *Result, db *sql.DB) (*sql.Conn, error) {
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		var conn *sql.Conn
		if conn, err = db.Conn(ctx); err == nil {
			if err = conn.PingContext(ctx); err == nil {
				return conn, nil
			}
			conn.Close()
		}
		if ctx.Err() != nil {
			break
		}
		o.step(r, "connecting across the link failed (%v); trying again", err)
	}
	return nil, fmt.Errorf("connecting across the link: %w", err)
}

// summarizeRemote reduces watch's report and the application's statements.
func summarizeRemote(o RemoteOptions, res *remoteWatchResult) *RemoteSummary {
	sum := &RemoteSummary{DelayUS: o.Delay.Microseconds(), ThreadPool: o.ThreadPool, Link: o.Delay,
		CapturePoint: res.Capture.Path.Point, PathRTTUS: res.Capture.Path.RTTMedianUS, PathSpreadUS: res.Capture.Path.SpreadUS,
		ClockErrorUS: res.Clock.ErrorUS, ClockPathRTTUS: res.Clock.PathRTTUS}
	if res.KernelPath != nil {
		sum.KernelMinRTTUS = res.KernelPath.MinRTTUS
	}
	var points, sleeps []event.Statement
	for _, s := range res.statements {
		if s.User != remoteApp || s.Cmd != "COM_QUERY" {
			continue
		}
		if s.Joined && s.RequestUS+s.QueueUS+s.ExecUS+s.SendStallUS+s.DeliveryUS != s.ClientUS {
			sum.SumMismatches++
		}
		switch {
		case strings.HasPrefix(s.DigestText, "SELECT `v` FROM `t`"), strings.HasPrefix(s.DigestText, "SELECT v FROM t"):
			points = append(points, s)
		case strings.Contains(strings.ToUpper(s.DigestText), "SLEEP"):
			sleeps = append(sleeps, s)
		}
	}
	sum.PointSelects, sum.Sleeps = medians(points), medians(sleeps)
	return sum
}

// medians of each part over the joined statements.
func medians(stmts []event.Statement) PartsMedians {
	m := PartsMedians{Seen: len(stmts)}
	var client, req, queue, exec, deliv, transfer, server []int64
	for _, s := range stmts {
		if !s.Joined {
			continue
		}
		m.Joined++
		client, req, queue = append(client, s.ClientUS), append(req, s.RequestUS), append(queue, s.QueueUS)
		exec, deliv = append(exec, s.ExecUS+s.SendStallUS), append(deliv, s.DeliveryUS)
		transfer, server = append(transfer, s.RequestUS+s.DeliveryUS), append(server, s.ServerUS)
		m.MaxQueueUS = max(m.MaxQueueUS, s.QueueUS)
	}
	m.ClientUS, m.RequestUS, m.QueueUS = median(client), median(req), median(queue)
	m.ExecUS, m.DeliveryUS, m.TransferUS, m.ServerUS = median(exec), median(deliv), median(transfer), median(server)
	return m
}

func median(v []int64) int64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// describeRemote renders the summary as the lab's "seen" lines.
func describeRemote(s *RemoteSummary) []string {
	pm := func(name string, m PartsMedians) string {
		return fmt.Sprintf("%s: %d seen, %d joined; medians client %s = request %s + queue %s + exec %s + delivery %s (request+delivery %s, max queue %s; the server recorded %s)",
			name, m.Seen, m.Joined, report.Micros(m.ClientUS), report.Micros(m.RequestUS), report.Micros(m.QueueUS), report.Micros(m.ExecUS), report.Micros(m.DeliveryUS), report.Micros(m.TransferUS), report.Micros(m.MaxQueueUS), report.Micros(m.ServerUS))
	}
	return []string{
		fmt.Sprintf("capture point: %s; round trip to the server measured from TCP %s (samples stray %s); the kernel's for the same sockets %s",
			s.CapturePoint, report.Micros(s.PathRTTUS), report.Micros(s.PathSpreadUS), report.Micros(s.KernelMinRTTUS)),
		fmt.Sprintf("clock calibration: ±%dµs (markers' round trip %s, each way assumed half)", s.ClockErrorUS, report.Micros(s.ClockPathRTTUS)),
		pm("point selects", s.PointSelects),
		pm(sleepSQL, s.Sleeps),
		fmt.Sprintf("statements whose parts do not sum to client_us: %d", s.SumMismatches),
		fmt.Sprintf("against a capture on the server's side of the link: %d statements matched, %d with a queue the server side does not show (max excess %s), %d queues of 10 ms or more confirmed by the server side; %d requests the link itself held beyond its usual transit (at most %s), which no capture on the application's side can tell from queue",
			s.Witness.Matched, s.Witness.Exceeding, report.Micros(s.Witness.MaxExcessUS), s.Witness.Confirmed, s.Witness.LinkHeld, report.Micros(s.Witness.MaxLinkHeldUS)),
	}
}
