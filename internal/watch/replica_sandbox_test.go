package watch

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/sandbox"
)

// A replica reading the primary's binlog holds its COM_BINLOG_DUMP open for
// its whole life, the server streaming events with no end marker. Watch on
// the primary reports that stream once, as it begins, as a replica's
// stream (reason replica_stream), never as a statement: not in the
// profile or its percentiles, not an outlier, not given up as run_end; the
// coverage, the run's notes and the live view name it. When the replica
// leaves, the server's row of the stream (statement/com/Binlog Dump, its
// TIMER_WAIT the stream's life) is counted as the stream's, not as a
// server row no statement took.
func TestReplicaBinlogStream(t *testing.T) {
	primary := sandbox.ForTest(t, sandbox.Options{ServerArgs: append(append([]string(nil), serverArgs...),
		"--log-bin=primary-bin", "--server-id=1", "--binlog-format=ROW")})
	replica := sandbox.ForTest(t, sandbox.Options{ServerArgs: []string{"--server-id=2", "--relay-log=replica-relay"}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	pdb, err := primary.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer pdb.Close()
	rdb, err := replica.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	opts := DefaultOptions()
	opts.DSN, opts.Iface = monitorDSN(t, primary), "lo"
	var live bytes.Buffer
	opts.Sinks, opts.LiveEvery = append(opts.Sinks, NewTerminalView(&live)), 100*time.Millisecond
	var mu sync.Mutex
	var got []event.Statement
	opts.Sinks = append(opts.Sinks, StatementFunc(func(s *event.Statement) {
		mu.Lock()
		got = append(got, *s)
		mu.Unlock()
	}))
	res := runDuring(t, ctx, opts, func() error {
		for _, q := range []string{
			fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=%d, MASTER_USER='root', MASTER_PASSWORD='', MASTER_HEARTBEAT_PERIOD=0.2", primary.Port),
			"START SLAVE",
		} {
			if _, err := rdb.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		for _, q := range []string{"CREATE DATABASE r", "CREATE TABLE r.t (id INT PRIMARY KEY)", "INSERT INTO r.t VALUES (1), (2), (3)", "SELECT SLEEP(0.05)"} {
			if _, err := pdb.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		if err := waitFor(ctx, func() (bool, error) { // the replica applied the primary's rows
			var n int
			err := rdb.QueryRowContext(ctx, "SELECT COUNT(*) FROM r.t").Scan(&n)
			return err == nil && n == 3, nil
		}); err != nil {
			return fmt.Errorf("replication: %w", err)
		}
		// The replica leaves: the primary's dump thread ends at its next
		// heartbeat and writes the stream's row.
		if _, err := rdb.ExecContext(ctx, "STOP SLAVE"); err != nil {
			return err
		}
		return waitFor(ctx, func() (bool, error) {
			var n int
			err := pdb.QueryRowContext(ctx, "SELECT COUNT(*) FROM performance_schema.events_statements_history_long WHERE EVENT_NAME LIKE 'statement/com/Binlog Dump%'").Scan(&n)
			return n > 0, err
		})
	})
	mu.Lock()
	defer mu.Unlock()
	var streams []event.Statement
	for _, s := range got {
		if strings.HasPrefix(s.Cmd, "COM_BINLOG_DUMP") {
			streams = append(streams, s)
		}
	}
	if len(streams) != 1 {
		t.Fatalf("%d binlog dumps reported, want the replica's one stream: %+v", len(streams), streams)
	}
	s := streams[0]
	t.Logf("stream: %s %s client %d µs notes %v", s.Conn, s.Cmd, s.ClientUS, s.Notes)
	if s.Why != event.ReplicaStream || s.Joined || s.Outlier || !anyContains(s.Notes, "binlog stream") || s.TRespFirst == 0 {
		t.Errorf("the stream: why %v joined %v outlier %v notes %v answered at %d", s.Why, s.Joined, s.Outlier, s.Notes, s.TRespFirst)
	}
	p := res.Profile
	if p.ByCommand[s.Cmd] != 0 {
		t.Errorf("the profile counts %d %s", p.ByCommand[s.Cmd], s.Cmd)
	}
	for _, d := range p.Digests {
		if strings.Contains(d.DigestText, "BINLOG_DUMP") {
			t.Errorf("a digest of the stream in the profile: %+v", d)
		}
	}
	if p.ByCommand["COM_REGISTER_SLAVE"] == 0 || p.Statements == 0 {
		t.Errorf("the replica's statements before its stream are statements: by command %v", p.ByCommand)
	}
	c := res.Coverage
	if c.ReplicaStreams != 1 || c.Unjoined["replica_stream"] != 1 || c.Unjoined["run_end"] != 0 {
		t.Errorf("coverage: replica streams %d, unjoined %v", c.ReplicaStreams, c.Unjoined)
	}
	if c.ServerStreams != 1 || res.Join.Streams != 1 {
		t.Errorf("the stream's server row: coverage %d, join %d; unmatched %v", c.ServerStreams, res.Join.Streams, c.ServerUnmatched)
	}
	if !anyContains(res.Notes, "1 replica binlog stream (COM_BINLOG_DUMP)") || !anyContains(res.Notes, s.Conn) {
		t.Errorf("the run's notes do not name the replica's stream: %v", res.Notes)
	}
	if !strings.Contains(c.Summary(), "replicas: 1 replica binlog stream") {
		t.Errorf("coverage summary:\n%s", c.Summary())
	}
	if !strings.Contains(live.String(), "replicas: 1 replica binlog stream") {
		t.Errorf("the live view never named the replica's stream")
	}
}

// waitFor polls cond until it holds, fails, or ctx ends.
func waitFor(ctx context.Context, cond func() (bool, error)) error {
	for {
		ok, err := cond()
		if ok || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
