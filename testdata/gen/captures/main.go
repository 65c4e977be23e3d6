// Command captures makes the packet-capture fixtures under testdata/captures:
// real MySQL-protocol traffic between real clients (sysbench, the mariadb
// CLI, go-sql-driver) and a private MariaDB sandbox, recorded by tcpdump on
// the loopback interface. Beside each NAME.pcap.gz it writes
// NAME.expect.json, counted by tshark (not by gapscope), which the capture
// tests compare against.
//
//	go run ./testdata/gen/captures                       # all fixtures into testdata/captures
//	go run ./testdata/gen/captures -only errors,tls      # some of them
//	go run ./testdata/gen/captures -only sysbench-text -duration 30s \
//	    -out /tmp/gapscope-bench -name bench-text -gzip=false   # the benchmark input
//
// It lives under testdata so that `go build ./...` ignores it; it needs
// root (tcpdump on lo), mariadbd, mariadb, sysbench, tshark and editcap.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// config is what the command line chooses.
type config struct {
	out      string
	only     []string
	duration time.Duration
	rate     int
	name     string
	gzip     bool
	keep     bool
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "captures:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "captures:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (config, error) {
	var cfg config
	var only string
	fs := flag.NewFlagSet("captures", flag.ContinueOnError)
	fs.StringVar(&cfg.out, "out", "testdata/captures", "directory for NAME.pcap.gz and NAME.expect.json")
	fs.StringVar(&only, "only", "", "comma-separated scenarios to make (default all): "+strings.Join(scenarioNames(), ","))
	fs.DurationVar(&cfg.duration, "duration", 10*time.Second, "sysbench run time")
	fs.IntVar(&cfg.rate, "rate", 40, "sysbench --rate: transactions/s (keeps fixtures small and tcpdump lossless; 0 = unlimited)")
	fs.StringVar(&cfg.name, "name", "", "output name instead of the scenario's (only with one scenario)")
	fs.BoolVar(&cfg.gzip, "gzip", true, "write NAME.pcap.gz (false: NAME.pcap)")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the sandbox and work directory (for debugging)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if only != "" {
		cfg.only = strings.Split(only, ",")
		for _, n := range cfg.only {
			if !slices.Contains(scenarioNames(), n) {
				return cfg, fmt.Errorf("unknown scenario %q (have %s)", n, strings.Join(scenarioNames(), ", "))
			}
		}
	}
	if cfg.name != "" && len(cfg.only) != 1 {
		return cfg, fmt.Errorf("-name needs exactly one scenario in -only")
	}
	return cfg, nil
}

// run starts one sandbox, prepares its data outside any capture, then makes
// each chosen fixture in order (the cut capture derives from sysbench-text).
func run(ctx context.Context, cfg config) error {
	if err := checkTools(); err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", cfg.out, err)
	}
	e, err := newEnv(ctx, cfg)
	if err != nil {
		return err
	}
	defer e.close()
	for _, sc := range chosen(cfg.only) {
		start := time.Now()
		if err := make1(ctx, e, sc); err != nil {
			return fmt.Errorf("%s: %w", sc.name, err)
		}
		fmt.Fprintf(os.Stderr, "captures: %s done in %s\n", sc.name, time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// chosen returns the scenarios to make, in dependency order: a derived
// scenario pulls in its source even when only the derived one was asked for.
func chosen(only []string) []*scenario {
	want := map[string]bool{}
	for _, n := range only {
		want[n] = true
	}
	var out []*scenario
	for _, sc := range scenarios() {
		if len(only) == 0 || want[sc.name] || needed(sc.name, want) {
			out = append(out, sc)
		}
	}
	return out
}

func needed(name string, want map[string]bool) bool {
	for _, sc := range scenarios() {
		if want[sc.name] && sc.from == name {
			return true
		}
	}
	return false
}

// make1 makes one fixture: capture (or derive) the raw pcap, count it with
// tshark, check it shows what it is for, and write the pcap(.gz) and its
// sidecar.
func make1(ctx context.Context, e *env, sc *scenario) error {
	raw, truth, err := produce(ctx, e, sc)
	if err != nil {
		return err
	}
	name, file := e.outputNames(sc)
	exp, err := expectFor(ctx, raw, e.inst.Port)
	if err != nil {
		return err
	}
	exp.File, exp.Scenario, exp.Description, exp.Caveat, exp.Generator = file, sc.name, sc.desc, sc.caveat, truth
	if err := sc.verify(exp); err != nil {
		return fmt.Errorf("fixture does not show what it is for: %w", err)
	}
	if err := writeCapture(raw, filepath.Join(e.cfg.out, file), e.cfg.gzip); err != nil {
		return err
	}
	return writeExpect(filepath.Join(e.cfg.out, name+".expect.json"), exp)
}

// produce captures the scenario's traffic, or derives it from its source's
// raw capture, into the work dir; it returns the path and the ground truth.
func produce(ctx context.Context, e *env, sc *scenario) (string, map[string]any, error) {
	raw := filepath.Join(e.work, sc.name+"."+sc.extension())
	var truth map[string]any
	var err error
	if sc.from != "" {
		truth, err = sc.derive(ctx, filepath.Join(e.work, sc.from+".pcap"), raw)
		if err == nil && e.truth[sc.from] != nil {
			truth["source_generator"] = e.truth[sc.from]
		}
	} else {
		truth, err = captureScenario(ctx, e, sc, raw)
	}
	e.truth[sc.name] = truth
	return raw, truth, err
}

// outputNames returns the sidecar's base name and the capture's file name;
// -name renames the one scenario asked for.
func (e *env) outputNames(sc *scenario) (name, file string) {
	name = sc.name
	if e.cfg.name != "" && sc.name == e.cfg.only[0] {
		name = e.cfg.name
	}
	file = name + "." + sc.extension()
	if e.cfg.gzip {
		file += ".gz"
	}
	return name, file
}

// captureAttempts bounds retries of a capture the kernel dropped packets
// from (a busy machine starves tcpdump); each scenario's reset SQL restores the
// state it changes, so a retry sends the same traffic.
const captureAttempts = 3

func captureScenario(ctx context.Context, e *env, sc *scenario, raw string) (map[string]any, error) {
	for attempt := 1; ; attempt++ {
		truth, err := captureOnce(ctx, e, sc, raw)
		if !errors.Is(err, errDropped) || attempt == captureAttempts {
			return truth, err
		}
		fmt.Fprintf(os.Stderr, "captures: %s: %v; retrying\n", sc.name, firstLine(err.Error()))
	}
}

// captureOnce records the scenario's traffic: tcpdump first, traffic only
// once it is listening, then a clean SIGINT stop so no packet is lost.
func captureOnce(ctx context.Context, e *env, sc *scenario, raw string) (map[string]any, error) {
	for _, q := range sc.reset {
		if _, err := e.db.ExecContext(ctx, q); err != nil {
			return nil, fmt.Errorf("reset %q: %w", q, err)
		}
	}
	td, err := startTcpdump(ctx, raw, e.inst.Port)
	if err != nil {
		return nil, err
	}
	truth, runErr := sc.run(ctx, e)
	// Let the last FIN/ACKs reach the capture before stopping it.
	time.Sleep(300 * time.Millisecond)
	stopErr := td.stop()
	if runErr != nil {
		return nil, runErr
	}
	return truth, stopErr
}
