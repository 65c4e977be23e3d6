package workload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"time"

	"github.com/go-sql-driver/mysql"
)

// SysbenchBinary is the sysbench executable looked up on PATH.
const SysbenchBinary = "sysbench"

// SysbenchAvailable reports whether the real sysbench is installed.
func SysbenchAvailable() bool {
	_, err := exec.LookPath(SysbenchBinary)
	return err == nil
}

// Sysbench runs the real sysbench oltp_read_write with opts translated to
// its flags; command is "prepare", "run" or "cleanup". For "run" it parses
// sysbench's report into an OLTPResult (Driver "sysbench"). The schema is
// created for "prepare". Mix options other than the table shape, threads
// and bounds use sysbench's own defaults.
func Sysbench(ctx context.Context, dsn string, opts OLTPOptions, command string) (OLTPResult, error) {
	opts.defaults()
	switch command {
	case "prepare", "run", "cleanup":
	default:
		return OLTPResult{}, fmt.Errorf("workload: sysbench command %q: want prepare, run or cleanup", command)
	}
	if command == "run" && opts.Duration <= 0 && opts.Events <= 0 {
		return OLTPResult{}, errors.New("workload: sysbench run needs a Duration or Events")
	}
	args, err := sysbenchArgs(dsn, opts, command)
	if err != nil {
		return OLTPResult{}, err
	}
	if command == "prepare" {
		if err := createSchema(ctx, dsn, opts.Schema); err != nil {
			return OLTPResult{}, err
		}
	}
	var out, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, SysbenchBinary, args...)
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return OLTPResult{}, fmt.Errorf("workload: sysbench %s: %w: %s", command, err, lastLines(stderr.String()+out.String(), 5))
	}
	if command != "run" {
		return OLTPResult{Driver: "sysbench"}, nil
	}
	return ParseSysbench(out.Bytes())
}

// sysbenchArgs turns a go-sql-driver DSN and options into sysbench flags.
func sysbenchArgs(dsn string, opts OLTPOptions, command string) ([]string, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("workload: bad DSN: %w", err)
	}
	args := []string{"oltp_read_write", "--db-driver=mysql", "--mysql-user=" + cfg.User, "--mysql-db=" + opts.Schema,
		"--tables=" + strconv.Itoa(opts.Tables), "--table-size=" + strconv.Itoa(opts.TableSize),
		"--threads=" + strconv.Itoa(opts.Threads), "--range-size=" + strconv.Itoa(opts.RangeSize)}
	if cfg.Passwd != "" {
		args = append(args, "--mysql-password="+cfg.Passwd)
	}
	if cfg.Net == "unix" {
		args = append(args, "--mysql-socket="+cfg.Addr)
	} else {
		host, port, err := net.SplitHostPort(cfg.Addr)
		if err != nil {
			return nil, fmt.Errorf("workload: DSN address %q: %w", cfg.Addr, err)
		}
		args = append(args, "--mysql-host="+host, "--mysql-port="+port)
	}
	// time=0 with events=0 would run forever: a bound was checked above.
	args = append(args, "--time="+strconv.Itoa(int(opts.Duration/time.Second)), "--events="+strconv.FormatInt(opts.Events, 10))
	if opts.SkipTrx {
		args = append(args, "--skip_trx=on")
	}
	if opts.Rate > 0 {
		args = append(args, "--rate="+strconv.Itoa(opts.Rate))
	}
	return append(args, command), nil
}

func createSchema(ctx context.Context, dsn, schema string) error {
	if !schemaName.MatchString(schema) {
		return fmt.Errorf("workload: bad schema name %q", schema)
	}
	db, err := open(ctx, dsn, 1)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS `"+schema+"`"); err != nil {
		return fmt.Errorf("workload: creating schema: %w", err)
	}
	return nil
}

var (
	sbCount   = regexp.MustCompile(`(?m)^\s*(read|write|other|transactions|queries|ignored errors):\s+(\d+)`)
	sbTime    = regexp.MustCompile(`(?m)^\s*total time:\s+([0-9.]+)s`)
	sbLatency = regexp.MustCompile(`(?m)^\s*(min|avg|max|95th percentile):\s+([0-9.]+)`)
)

// ParseSysbench reads the report sysbench 1.0 prints after "run".
func ParseSysbench(out []byte) (OLTPResult, error) {
	res := OLTPResult{Driver: "sysbench"}
	counts := map[string]*int64{"read": &res.Reads, "write": &res.Writes, "other": &res.Other,
		"transactions": &res.Transactions, "queries": &res.Queries, "ignored errors": &res.Errors}
	found := 0
	for _, m := range sbCount.FindAllSubmatch(out, -1) {
		v, _ := strconv.ParseInt(string(m[2]), 10, 64)
		*counts[string(m[1])] = v
		found++
	}
	m := sbTime.FindSubmatch(out)
	if m == nil || found < len(counts) {
		return res, fmt.Errorf("workload: sysbench output has no complete report: %s", lastLines(string(out), 5))
	}
	secs, _ := strconv.ParseFloat(string(m[1]), 64)
	res.Elapsed = time.Duration(secs * float64(time.Second))
	res.rates()
	res.Latency.Count = int(res.Transactions)
	for _, m := range sbLatency.FindAllSubmatch(out, -1) {
		ms, _ := strconv.ParseFloat(string(m[2]), 64)
		d := time.Duration(ms * float64(time.Millisecond))
		switch string(m[1]) {
		case "min":
			res.Latency.Min = d
		case "avg":
			res.Latency.Avg = d
		case "max":
			res.Latency.Max = d
		case "95th percentile":
			res.Latency.P95 = d
		}
	}
	return res, nil
}

func lastLines(s string, n int) string {
	lines := bytes.Split(bytes.TrimSpace([]byte(s)), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte(" | ")))
}
