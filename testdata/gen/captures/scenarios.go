package main

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// scenario is one fixture: traffic to capture (run) or a transformation of
// another fixture's capture (from + derive), and the property the result
// must show to be worth keeping (check).
type scenario struct {
	name   string
	desc   string
	caveat string // where tshark's counts differ from the protocol's truth
	ext    string // "pcap" (default) or "pcapng"
	from   string
	reset  []string // SQL run before each capture attempt: the state run expects
	run    func(ctx context.Context, e *env) (map[string]any, error)
	derive func(ctx context.Context, src, dst string) (map[string]any, error)
	check  func(exp *expect) error
}

func (sc *scenario) extension() string {
	if sc.ext == "" {
		return "pcap"
	}
	return sc.ext
}

func (sc *scenario) verify(exp *expect) error {
	if exp.Packets == 0 {
		return fmt.Errorf("empty capture")
	}
	if sc.from != "sysbench-text" && exp.TCPConnections != exp.ConnectionsOpened {
		return fmt.Errorf("%d TCP connections but %d handshakes: stray traffic on the port", exp.TCPConnections, exp.ConnectionsOpened)
	}
	if sc.check == nil {
		return nil
	}
	return sc.check(exp)
}

// scenarios lists every fixture in the order they are made.
func scenarios() []*scenario {
	return []*scenario{
		{name: "sysbench-ps", desc: "sysbench oltp_read_write, 4 threads, server-side prepared statements (COM_STMT_EXECUTE)",
			run: runSysbench(nil), check: checkSysbenchPS},
		{name: "sysbench-text", desc: "sysbench oltp_read_write, 4 threads, --db-ps-mode=disable (COM_QUERY)",
			run: runSysbench([]string{"--db-ps-mode=disable"}), check: checkSysbenchText},
		{name: "sysbench-cut", desc: "sysbench-text without its first packets: every connection starts mid-stream, none ends",
			from: "sysbench-text", derive: cutMidConnection, check: checkCut},
		{name: "large-results", desc: "mariadb CLI: a 100k-row SELECT (~11 MB) and smaller result sets",
			run: runLargeResults, check: needCommands(map[string]int{"COM_QUERY": 5})},
		{name: "errors", desc: "go-sql-driver: syntax error, unknown table, duplicate key, failed prepare, then a good query",
			reset: []string{"DELETE FROM fx.kv WHERE id = 1"}, run: runErrors, check: checkErrors},
		{name: "errors-ng", ext: "pcapng", desc: "the errors capture converted to pcapng by editcap",
			from: "errors", derive: toPcapng, check: checkErrors},
		{name: "multi-statements", desc: "go-sql-driver multiStatements=true: 3-statement queries, one failing midway, CALL of a 2-result-set procedure",
			reset: []string{"INSERT INTO fx.kv VALUES (100, 'before') ON DUPLICATE KEY UPDATE v = 'before'"}, run: runMulti, check: needCommands(map[string]int{"COM_QUERY": 3})},
		{name: "prepared", desc: "go-sql-driver prepared statements: every parameter type, NULL, COM_STMT_SEND_LONG_DATA, binary result set, COM_PING",
			reset: []string{"TRUNCATE fx.types"}, run: runPrepared, check: checkPrepared},
		{name: "admin-commands", desc: "mariadb-admin ping/status/processlist and the CLI's USE (COM_PING, COM_STATISTICS, COM_INIT_DB)",
			run: runAdmin, check: needCommands(map[string]int{"COM_PING": 1, "COM_STATISTICS": 1, "COM_INIT_DB": 1})},
		{name: "load-data", desc: "mariadb --local-infile=1: LOAD DATA LOCAL INFILE of a 2000-line CSV, then a check query",
			caveat: "tshark decodes the streamed file contents as requests (unknown_commands, invalid_commands); the real requests are the 2 COM_QUERY and COM_QUIT",
			reset:  []string{"TRUNCATE fx.loaded"},
			run:    runLoadData, check: needCommands(map[string]int{"COM_QUERY": 2})},
		{name: "compressed", desc: "mariadb --compress: small and 2000-row results and an error over the compressed protocol",
			reset: []string{"DELETE FROM fx.kv WHERE id = 200"}, run: runCompressed},
		{name: "tls", desc: "mariadb --ssl: a TLS session (requests and responses visible by direction only, no SQL)",
			caveat: "commands are encrypted: tshark counts none; the client sent the 3 statements in generator plus COM_QUIT",
			run:    runTLS, check: checkTLS},
		{name: "blob-17mb", desc: "17 MiB blob INSERT and SELECT, text (mariadb CLI) and prepared (go-sql-driver): payloads split over 16 MB packets",
			caveat: "tshark takes the second packet of each >16 MB request for a command of its own (unknown_commands, invalid_commands)",
			reset:  []string{"TRUNCATE fx.blobs"}, run: runBlob},
		{name: "slow-client", desc: "go-sql-driver reads a 100k-row result only after sleeping 3 s: client zero windows",
			run: runSlowClient, check: checkSlowClient},
	}
}

func scenarioNames() []string {
	var out []string
	for _, sc := range scenarios() {
		out = append(out, sc.name)
	}
	return out
}

// needCommands fails unless tshark saw at least the given command counts.
func needCommands(min map[string]int) func(*expect) error {
	return func(exp *expect) error {
		for _, cmd := range sortedKeys(min) {
			if exp.Commands[cmd] < min[cmd] {
				return fmt.Errorf("tshark saw %d %s, want >= %d", exp.Commands[cmd], cmd, min[cmd])
			}
		}
		return nil
	}
}

// runSysbench runs oltp_read_write for the configured time and keeps
// sysbench's own counters as ground truth.
func runSysbench(extra []string) func(ctx context.Context, e *env) (map[string]any, error) {
	return func(ctx context.Context, e *env) (map[string]any, error) {
		args := e.sysbenchArgs(append([]string{"--threads=4", fmt.Sprintf("--time=%d", int(e.cfg.duration.Seconds())),
			fmt.Sprintf("--rate=%d", e.cfg.rate), "--report-interval=0"}, extra...)...)
		args = append(args, "oltp_read_write", "run")
		out, err := exec.CommandContext(ctx, "sysbench", args...).CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("sysbench run: %w\n%s", err, out)
		}
		truth := sysbenchCounters(string(out))
		truth["sysbench_args"] = strings.Join(append(extra, "--threads=4", fmt.Sprintf("--time=%d", int(e.cfg.duration.Seconds())),
			fmt.Sprintf("--rate=%d", e.cfg.rate), "--tables=2", "--table-size=10000"), " ")
		return truth, nil
	}
}

var sysbenchRE = regexp.MustCompile(`(?m)^\s+(read|write|other|total|transactions|queries|ignored errors|reconnects):\s+(\d+)`)

// sysbenchCounters picks the "SQL statistics" numbers out of sysbench's report.
func sysbenchCounters(out string) map[string]any {
	m := map[string]any{}
	for _, g := range sysbenchRE.FindAllStringSubmatch(out, -1) {
		key := "sysbench_" + strings.ReplaceAll(g[1], " ", "_")
		if _, seen := m[key]; seen {
			continue
		}
		n, _ := strconv.Atoi(g[2])
		m[key] = n
	}
	return m
}

func checkSysbenchPS(exp *expect) error {
	if exp.Commands["COM_STMT_EXECUTE"] == 0 || exp.Commands["COM_STMT_PREPARE"] == 0 {
		return fmt.Errorf("no prepared statements: %v", exp.Commands)
	}
	return checkSysbenchConns(exp)
}

func checkSysbenchText(exp *expect) error {
	if exp.Commands["COM_STMT_EXECUTE"] != 0 || exp.Commands["COM_QUERY"] == 0 {
		return fmt.Errorf("not text protocol: %v", exp.Commands)
	}
	return checkSysbenchConns(exp)
}

func checkSysbenchConns(exp *expect) error {
	if exp.ConnectionsOpened < 4 {
		return fmt.Errorf("%d connections opened in the capture, want >= 4", exp.ConnectionsOpened)
	}
	return nil
}

// The cut keeps a fixed window of packets from well after the handshakes.
const (
	cutFirst = 2001
	cutCount = 6000
)

func cutMidConnection(ctx context.Context, src, dst string) (map[string]any, error) {
	last := cutFirst + cutCount - 1
	if err := editcap(ctx, "-r", src, dst, fmt.Sprintf("%d-%d", cutFirst, last)); err != nil {
		return nil, err
	}
	return map[string]any{"source": "sysbench-text", "kept_packets": fmt.Sprintf("%d-%d", cutFirst, last),
		"how": "editcap -r"}, nil
}

func checkCut(exp *expect) error {
	if exp.ConnectionsOpened != 0 || exp.TCPConnections < 4 {
		return fmt.Errorf("cut capture has %d handshakes in %d connections, want 0 in >= 4",
			exp.ConnectionsOpened, exp.TCPConnections)
	}
	return nil
}

func toPcapng(ctx context.Context, src, dst string) (map[string]any, error) {
	if err := editcap(ctx, "-F", "pcapng", src, dst); err != nil {
		return nil, err
	}
	return map[string]any{"source": "errors", "how": "editcap -F pcapng"}, nil
}
