package watch

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/join"
	"github.com/gapscope/gapscope/internal/sandbox"
)

// pipeBatch is one batch as the client timed it (testdata/pipeline).
type pipeBatch struct {
	Client  string `json:"client"`
	ConnID  uint64 `json:"conn_id"`
	Batch   int    `json:"batch"`
	N       int    `json:"n"`
	StartUS int64  `json:"start_us"`
	EndUS   int64  `json:"end_us"`
}

// pipeDriver runs a real driver's pipelined batches: the command, or why
// it cannot run here.
type pipeDriver struct {
	name string
	cmd  func(ctx context.Context, host string, port, n int, sql string, batches int, pause time.Duration) (*exec.Cmd, string)
}

func connectorJ() pipeDriver {
	return pipeDriver{name: "connector-j", cmd: func(ctx context.Context, host string, port, n int, sql string, batches int, pause time.Duration) (*exec.Cmd, string) {
		jar := "/usr/share/java/mariadb-java-client.jar"
		if _, err := os.Stat(jar); err != nil {
			return nil, "MariaDB Connector/J is not installed (libmariadb-java)"
		}
		java, err := exec.LookPath("java")
		if err != nil {
			return nil, "no java (default-jdk-headless)"
		}
		src, _ := filepath.Abs(filepath.Join("testdata", "pipeline", "Batch.java"))
		return exec.CommandContext(ctx, java, "-cp", jar, src, host, strconv.Itoa(port), "root", strconv.Itoa(n), sql,
			strconv.Itoa(batches), strconv.Itoa(int(pause.Milliseconds()))), ""
	}}
}

// nodeModules is where Node's mariadb package is: $GAPSCOPE_NODE_MODULES,
// or npm's global root.
func nodeModules() string {
	dirs := []string{os.Getenv("GAPSCOPE_NODE_MODULES")}
	if out, err := exec.Command("npm", "root", "-g").Output(); err == nil {
		dirs = append(dirs, strings.TrimSpace(string(out)))
	}
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "mariadb", "package.json")); err == nil {
			return d
		}
	}
	return ""
}

func nodeMariaDB() pipeDriver {
	return pipeDriver{name: "node-mariadb", cmd: func(ctx context.Context, host string, port, n int, sql string, batches int, pause time.Duration) (*exec.Cmd, string) {
		node, err := exec.LookPath("node")
		if err != nil {
			return nil, "no node (nodejs)"
		}
		mods := nodeModules()
		if mods == "" {
			return nil, "Node's mariadb package is not installed (npm install -g mariadb, or GAPSCOPE_NODE_MODULES=DIR/node_modules)"
		}
		src, _ := filepath.Abs(filepath.Join("testdata", "pipeline", "pipeline.js"))
		cmd := exec.CommandContext(ctx, node, src, host, strconv.Itoa(port), "root", strconv.Itoa(n), sql,
			strconv.Itoa(batches), strconv.Itoa(int(pause.Milliseconds())))
		cmd.Env = append(os.Environ(), "NODE_PATH="+mods)
		return cmd, ""
	}}
}

func runPipeClient(cmd *exec.Cmd) ([]pipeBatch, error) {
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%v: %w\n%s", cmd.Args, err, stderr.String())
	}
	var bs []pipeBatch
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var b pipeBatch
		if err := json.Unmarshal(sc.Bytes(), &b); err != nil {
			return nil, fmt.Errorf("the client printed %q: %w", sc.Text(), err)
		}
		bs = append(bs, b)
	}
	return bs, nil
}

// pipeSleepUS is what each statement of the batches runs on the server.
const pipeSleepUS = 20_000

// A pipelined batch from a real driver on one connection: MariaDB
// Connector/J 2.7 (Debian's libmariadb-java) sends a Statement batch of
// 50 DO SLEEP(0.02) without waiting (useBatchMultiSend, its default);
// Node's mariadb connector (npm) sends 10 SELECT SLEEP(0.02) queries at
// once (pipelining, its default). Five batches each, watch at its default
// flags. A batch longer than a thread's 10-row history turns it over
// before watch reads it; with history_long holding 10 rows the ring turns
// over too, and the rows no read caught are split from the wire. Every
// statement is joined: its queue is its wait behind the connection's
// earlier requests (never less than the wait for the previous answer, on
// the wire), its exec the server's 20 ms (within 5%, or the server's own
// time when a host busy with other work kept it asleep longer), its
// delivery under 1 ms on loopback. Only the first statement of a batch,
// which has nothing before it on its connection, may stay unjoined when
// the 10-row ring lost its row.
//
// Connector/J needs libmariadb-java and a JDK (the batch program runs
// from source); Node's package is looked for in $GAPSCOPE_NODE_MODULES or
// npm's global root (scripts/install-deps.sh installs them).
func TestPipelinedBatchJoined(t *testing.T) {
	drivers := []struct {
		drv pipeDriver
		n   int
		sql string
	}{
		{connectorJ(), 50, "DO SLEEP(0.02)"},
		{nodeMariaDB(), 10, "SELECT SLEEP(0.02)"},
	}
	rings := []struct {
		name string
		args []string
		lost bool // rows may be lost: split from the wire
	}{
		{"history_long 100000", serverArgs, false},
		{"history_long 10", append(slices.Clone(serverArgs), "--performance-schema-events-statements-history-long-size=10"), true},
	}
	for _, d := range drivers {
		for _, ring := range rings {
			t.Run(d.drv.name+"/"+ring.name, func(t *testing.T) {
				if testing.Short() {
					t.Skip("sandbox test: skipped with -short")
				}
				if _, why := d.drv.cmd(context.Background(), "", 0, 0, "", 0, 0); why != "" {
					t.Skip(why)
				}
				runPipelined(t, d.drv, d.n, d.sql, ring.args, ring.lost)
			})
		}
	}
}

func runPipelined(t *testing.T, drv pipeDriver, n int, sql string, args []string, lost bool) {
	inst := sandbox.ForTest(t, sandbox.Options{ServerArgs: args})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	opts := DefaultOptions()
	opts.DSN, opts.Iface = monitorDSN(t, inst), "lo"
	var mu sync.Mutex
	var got []event.Statement
	opts.Sinks = append(opts.Sinks, StatementFunc(func(s *event.Statement) {
		mu.Lock()
		got = append(got, *s)
		mu.Unlock()
	}))
	const batches = 5
	var bs []pipeBatch
	res := runDuring(t, ctx, opts, func() error {
		cmd, _ := drv.cmd(ctx, "127.0.0.1", inst.Port, n, sql, batches, 300*time.Millisecond)
		var err error
		bs, err = runPipeClient(cmd)
		time.Sleep(1500 * time.Millisecond) // history_long's next poll
		return err
	})
	mu.Lock()
	defer mu.Unlock()
	if len(bs) != batches {
		t.Fatalf("the client ran %d batches of %d", len(bs), batches)
	}
	var execs []int64
	var total, byRow, fromWire, firstLost, within, maxDelivery, maxPause int64
	for _, b := range bs {
		var sel []event.Statement
		for _, s := range got {
			if s.ConnID == b.ConnID && s.TReqFirst >= b.StartUS-1000 && s.TReqFirst <= b.EndUS {
				sel = append(sel, s)
			}
		}
		slices.SortFunc(sel, func(x, y event.Statement) int { return cmp.Compare(x.TRespLast, y.TRespLast) })
		if len(sel) != n {
			t.Errorf("batch %d: watch reported %d statements of %d", b.Batch, len(sel), n)
		}
		for k := range sel {
			s := &sel[k]
			total++
			desc := fmt.Sprintf("batch %d statement %d: joined %v (%v, %s) request %d queue %d exec %d delivery %d server %d notes %v",
				b.Batch, k, s.Joined, s.Why, s.JoinSource, s.RequestUS, s.QueueUS, s.ExecUS, s.DeliveryUS, s.ServerUS, s.Notes)
			if testing.Verbose() {
				t.Log(desc)
			}
			if !s.Joined && lost && k == 0 && !s.Outlier {
				// The first of a batch has nothing before it on its
				// connection: without its row (not an outlier, so its
				// thread was not read, and the ring lost it) the wire
				// does not show when the server started it.
				firstLost++
				continue
			}
			if !s.Joined {
				t.Errorf("%s: not joined", desc)
				continue
			}
			checkParts(t, s)
			if s.JoinSource == join.SourceWire {
				fromWire++
				if !lost {
					t.Errorf("%s: split from the wire, though history_long keeps every row", desc)
				}
			} else {
				byRow++
			}
			execs = append(execs, s.ExecUS)
			// SLEEP runs at least its time; a host busy with other work
			// may keep the server asleep longer, which the server's own
			// time then shows (to the timer's rounding: exec is the
			// server's end less its start in µs, server_us its
			// TIMER_WAIT in ps cut to µs).
			if s.ExecUS < pipeSleepUS*95/100 || s.ExecUS > max(pipeSleepUS*105/100, s.ServerUS+2) {
				t.Errorf("%s: exec not within 5%% of %d us nor of the server's time", desc, pipeSleepUS)
			}
			if s.ExecUS <= pipeSleepUS*105/100 {
				within++
			}
			maxDelivery = max(maxDelivery, s.DeliveryUS)
			if s.DeliveryUS >= 1000 {
				t.Errorf("%s: delivery over 1 ms on loopback", desc)
			}
			// Its wait: behind the answers before it (the previous
			// one's last byte, from the wire), never less; more by the
			// server's own pause between two statements, which a host
			// busy with other work stretches to milliseconds (the row's
			// start says so). Paired with a later statement's row, exec
			// would be cut short (checked above).
			want := int64(0)
			if k > 0 {
				want = max(sel[k-1].TRespLast-s.TReqLast, 0)
			}
			pause := s.QueueUS - want
			maxPause = max(maxPause, pause)
			if pause < -1000 {
				t.Errorf("%s: queue %d, less than its wait behind the requests before it, %d us", desc, s.QueueUS, want)
			}
		}
	}
	slices.Sort(execs)
	if len(execs) > 0 {
		t.Logf("%s: %d statements, %d joined by their rows, %d from the wire, %d first of a batch without its row; exec min %d p50 %d max %d us, %d within 5%% of %d us; delivery max %d us; the server paused up to %d us between two statements; joiner %+v",
			drv.name, total, byRow, fromWire, firstLost, execs[0], execs[len(execs)/2], execs[len(execs)-1], within, pipeSleepUS, maxDelivery, maxPause, res.Join)
	}
}
