// Package watch runs gapscope's main job live: it captures the wire,
// polls performance_schema on its own schedule, joins the two per statement
// and decomposes each statement's time (docs/events.md). The capture never waits
// for the server side: the two meet only in the joiner, through a bounded
// queue whose overflow is counted, never blocking.
//
// It sits above capture, collect, join and diagnose and below cmd and lab
// (an orchestrator, like lab; the wiring could live in cmd, but labs run
// the same engine in-process, so it lives here).
package watch

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/gapscope/gapscope/internal/capture"
	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/join"
	"github.com/gapscope/gapscope/internal/report"
	"github.com/gapscope/gapscope/internal/txn"
)

// DefaultCPUBudget is the CPU budget of `gapscope watch` without
// --cpu-budget: 0.5% of the host's CPUs, on average (a burst may spend
// ten seconds' worth at once). It decides how many fast statements are
// joined; every statement is captured whatever it says. What watch costs
// the server on a saturated host is measured by scripts/bench-watch-ab.sh.
const DefaultCPUBudget = 0.005

// DefaultOptions are `gapscope watch`'s defaults, the one place the CLI's
// flags and a zero Options (withDefaults) take them from. A zero
// Options.CPUBudget means no budget; the CLI's default is DefaultCPUBudget.
func DefaultOptions() Options {
	return Options{
		Sample:          1,
		CPUBudget:       DefaultCPUBudget,
		RingMB:          capture.DefaultRingMB,
		MaxRingMB:       capture.DefaultMaxRingMB,
		PollInterval:    time.Second,
		MinPollInterval: 250 * time.Millisecond,
		MaxWait:         5 * time.Second,
		LiveEvery:       time.Second,
		PlansThreshold:  time.Second,
		WindowSize:      50_000,
		QueueLen:        65_536,
	}
}

// ReadyLine is what `gapscope watch` prints on stderr once the capture and
// the poller run (Options.Ready): labs that start watch as a process, in
// another network namespace, wait for it.
const ReadyLine = "watch: capture and polling running"

// Options configure a watch run. Zero values pick sane defaults.
type Options struct {
	DSN          string
	DefaultsFile string
	// Secrets learns the passwords of DSN and DefaultsFile and masks
	// watch's messages with them: the command's own, so the error it
	// prints is masked too (nil: the run keeps a registry of its own).
	Secrets *collect.Secrets
	// Iface to capture on; "" picks the interface that reaches the server
	// ("lo" for a local server).
	Iface string
	// Ports are the server ports on the wire; default: the DSN's port.
	Ports []uint16
	// RingMB is the kernel capture ring's size at the start (0:
	// capture's default); MaxRingMB, when larger, the size it may grow to,
	// doubling each time the kernel drops packets (capture.LiveOptions).
	RingMB, MaxRingMB int
	// Sample > 1 joins the fast statements of only 1 in Sample connections
	// (client port hash, capture.Sample): the server reads and the joins
	// shrink with it. Every connection is still captured and counted, and
	// the statements that stand out are joined on all of them. 0 or 1:
	// every connection joined.
	Sample uint16
	// CPUBudget bounds watch's own CPU (user + system, all threads) as a
	// fraction of the host's CPUs on average, e.g. 0.01: past it watch
	// joins the fast statements of fewer connections (1 in 2, 4, 8 ... by
	// client port, as Sample), and more again when well under it. It never
	// decides what is captured. 0: no bound. A fixed Sample > 1 turns it off.
	CPUBudget float64
	// Duration stops the run after this long; 0 runs until ctx ends.
	Duration time.Duration
	// PollInterval is the longest interval between performance_schema reads
	// (default 1 s: each read scans the whole history ring on the server;
	// polling adapts faster when the ring fills).
	PollInterval time.Duration
	// MinPollInterval bounds how fast polling may go when the ring fills
	// (default 250 ms: every read scans the ring on the server and costs
	// its throughput; see docs/performance.md). A small ring is
	// read sooner when that keeps it from turning over (ringpace.go).
	MinPollInterval time.Duration
	// MaxWait is how long a statement waits for its other half (default 5 s).
	MaxWait time.Duration
	// KeepLiterals keeps SQL literals in the output (redacted by default).
	KeepLiterals bool
	// CapturePoint says where the capture runs relative to the server:
	// capture.PointServer, PointClient, PointBetween, or "" / PointAuto to
	// decide per connection from this host's addresses. Off the server's
	// host the measured transit to the server moves out of queue and exec
	// into request and delivery.
	CapturePoint string
	// NoCapture runs without the wire (server-side only), as when the user
	// has no capture permission.
	NoCapture bool
	// Capture picks the live capture: capture.SourceAuto, SourceEBPF or
	// SourcePacket ("": GAPSCOPE_CAPTURE, else capture.DefaultSource).
	Capture string
	// EnableConsumers lets watch turn on the performance_schema consumers
	// it needs when they are off (statements current, history and
	// history_long), restored on exit.
	EnableConsumers bool
	// Sinks get what each takes (Sink): every statement after the join
	// (joined or not) in the order they finished, every finished
	// transaction, a Snapshot every LiveEvery; then Close with the final
	// snapshot. A sink that takes statements only is a StatementFunc; the
	// terminal's live view is NewTerminalView.
	Sinks     []Sink
	LiveEvery time.Duration
	// Plans catches the live plans of statements running longer than
	// PlansThreshold and reports PLAN_FLIP (internal/plans).
	Plans          bool
	PlansThreshold time.Duration
	// Ready, when set, is called once the capture and the poller run,
	// with what the run holds outside the Go heap (the command fits the
	// process's memory limit to it; labs wait for it).
	Ready func(Started)
	// WindowSize bounds the statements kept for the diagnosis (default 50k).
	WindowSize int
	// QueueLen bounds wire statements waiting for the joiner (default 64k).
	QueueLen int
}

func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.Secrets == nil {
		o.Secrets = collect.NewSecrets()
	}
	if o.PollInterval <= 0 {
		o.PollInterval = d.PollInterval
	}
	if o.MinPollInterval <= 0 {
		o.MinPollInterval = d.MinPollInterval
	}
	o.MinPollInterval = min(o.MinPollInterval, o.PollInterval)
	if o.MaxWait <= 0 {
		o.MaxWait = d.MaxWait
	}
	if o.LiveEvery <= 0 {
		o.LiveEvery = d.LiveEvery
	}
	if o.WindowSize <= 0 {
		o.WindowSize = d.WindowSize
	}
	if o.QueueLen <= 0 {
		o.QueueLen = d.QueueLen
	}
	if o.Ready == nil {
		o.Ready = func(Started) {}
	}
	return o
}

// Started is what a run tells Options.Ready.
type Started struct {
	// RingBytes is the kernel ring the capture mapped into the process:
	// resident once it has wrapped, outside the Go runtime's heap.
	RingBytes int64
}

// Result is what a watch run saw.
type Result struct {
	Server  collect.ServerInfo    `json:"server"`
	Profile *report.ProfileResult `json:"profile"`
	// NotOnWire ranks, by the server's time, the statements whose client
	// the capture did not see (unix sockets...); nil when there were none.
	NotOnWire  *report.ProfileResult `json:"not_on_wire,omitempty"`
	Findings   []event.Finding       `json:"findings"`
	Capture    capture.Stats         `json:"capture"`
	Join       join.Stats            `json:"join"`
	ServerSide ServerSideStats       `json:"server_side"`
	Clock      collect.Clock         `json:"clock"`
	Groups     []GroupSummary        `json:"pool_groups,omitempty"`
	// KernelPath is the kernel's round trip of this host's connections to
	// a server elsewhere (nil on the server's host).
	KernelPath *KernelPath `json:"kernel_path,omitempty"`
	Notes      []string    `json:"notes"`
	ElapsedUS  int64       `json:"elapsed_us"`
	// ServerOnly: no wire (--no-capture, or no capture rights): the
	// profile is the server's time and what the wire adds is unknown.
	ServerOnly bool `json:"server_only"`
	// Own is what watch itself cost this host (and what its CPU budget did).
	Own OwnCost `json:"own"`
	// Coverage is what was seen and joined, and why the rest was not.
	Coverage Coverage `json:"coverage"`
	// Transactions sums the transactions the wire saw.
	Transactions txn.Summary `json:"transactions"`
	// Window holds the most recent statements (bounded by WindowSize), the
	// input of the diagnosis; labs assert on it.
	Window []event.Statement `json:"-"`
	// CloseErrors are what the sinks' Close returned: the run's result
	// is whole all the same.
	CloseErrors []error `json:"-"`
}

// ServerSideStats counts what the poller did.
type ServerSideStats struct {
	Polls       int64 `json:"polls"`
	PollErrors  int64 `json:"poll_errors"`
	Rows        int64 `json:"rows"`
	RingLost    int64 `json:"ring_lost"`
	Reconnects  int64 `json:"reconnects"`
	QueueDrops  int64 `json:"queue_drops"`
	OwnFiltered int64 `json:"own_filtered"`
	// SampledOutRows: history_long rows of connections the join sample
	// leaves out (read before the processlist classified them);
	// DuplicateRows: history_long rows a targeted read had already fed.
	SampledOutRows int64 `json:"sampled_out_rows"`
	DuplicateRows  int64 `json:"duplicate_rows"`
	// Targeted reads of outliers' threads (per-thread history, current):
	// the reads, the rows they fed to the join, the outliers whose row
	// they never found, and outliers the queue to them dropped.
	TargetedReads  int64 `json:"targeted_reads"`
	TargetedRows   int64 `json:"targeted_rows"`
	TargetedMissed int64 `json:"targeted_missed"`
	// RunningScans are the reads of events_statements_current for the
	// statements running past the outlier floor (every 100 ms, every 20 ms
	// while busy connections' outliers are lost to both histories).
	RunningScans int64 `json:"running_scans"`
	// LockReads are the reads of the server's lock tables, made only while
	// a statement had run over half a second (lock waits).
	LockReads int64 `json:"lock_reads"`
	// RunningScansSkipped are the scans at the regular pace not made
	// because the wire saw every client and none had a command in flight.
	RunningScansSkipped int64 `json:"running_scans_skipped"`
	// ThreadReads are the reads of which thread serves which connection
	// (performance_schema.threads), made as the wire sees new connections.
	ThreadReads int64 `json:"thread_reads"`
	SlowDrops   int64 `json:"slow_drops"`
	// PollerWakes are the poller's wake-ups: its reads on schedule, the
	// outliers and new connections the wire handed it, its retries.
	PollerWakes int64 `json:"poller_wakes"`
}

// portOf extracts the port of a host:port address (3306 when absent).
func portOf(addr string) uint16 {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 3306
	}
	n, err := strconv.Atoi(p)
	if err != nil || n <= 0 || n > 65535 {
		return 3306
	}
	return uint16(n)
}

// hostOf extracts the host of a host:port address.
func hostOf(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return h
}

// pingTimeout bounds the first connection attempt so a wrong DSN fails fast.
const pingTimeout = 10 * time.Second

func openServer(ctx context.Context, opts Options, own *ownAddrs) (*sql.DB, string, error) {
	cfg, err := opts.Secrets.Config(opts.DSN, opts.DefaultsFile)
	if err != nil {
		return nil, "", err
	}
	if cfg.Net != "tcp" && opts.Iface == "" && !opts.NoCapture {
		return nil, "", fmt.Errorf("the DSN uses %s, which cannot be captured on the wire; use a tcp(host:port) DSN or --no-capture", cfg.Net)
	}
	cfg.DialFunc = own.dial
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	db, err := opts.Secrets.OpenConfigCounting(pctx, cfg, &own.pool)
	if err != nil {
		return nil, "", err
	}
	return db, cfg.Addr, nil
}
