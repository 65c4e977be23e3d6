package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Scenarios driven by go-sql-driver, each on one pinned connection so the
// capture holds exactly one TCP connection per client session.

// withConn opens a one-connection pool with the given DSN parameters, runs
// f on a pinned connection and closes everything (COM_QUIT on the wire).
func withConn(ctx context.Context, e *env, params string, f func(*sql.Conn) error) error {
	db, err := sql.Open("mysql", e.dsn(params))
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	if err := f(conn); err != nil {
		conn.Close()
		return err
	}
	return conn.Close()
}

// errorCode returns the server error number in err, or 0.
func errorCode(err error) int {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return int(me.Number)
	}
	return 0
}

// errorSteps are sent in order; prepare marks the one sent with an argument,
// which makes database/sql prepare it (COM_STMT_PREPARE fails).
var errorSteps = []struct {
	sql     string
	prepare bool
	code    int
}{
	{"SELEC 1", false, 1064},
	{"SELECT * FROM fx.nosuch", false, 1146},
	{"INSERT INTO fx.kv VALUES (1, 'first')", false, 0},
	{"INSERT INTO fx.kv VALUES (1, 'again')", false, 1062},
	{"SELECT v FROM fx.kv WHERE nosuchcol = ?", true, 1054},
	{"SELECT v FROM fx.kv WHERE id = 1", false, 0},
}

func runErrors(ctx context.Context, e *env) (map[string]any, error) {
	var steps []map[string]any
	err := withConn(ctx, e, "interpolateParams=false", func(c *sql.Conn) error {
		for _, s := range errorSteps {
			var err error
			if s.prepare {
				_, err = c.ExecContext(ctx, s.sql, 1)
			} else {
				_, err = c.ExecContext(ctx, s.sql)
			}
			if got := errorCode(err); got != s.code || (err != nil && got == 0) {
				return fmt.Errorf("%q: got error %v, want code %d", s.sql, err, s.code)
			}
			cmd := "COM_QUERY"
			if s.prepare {
				cmd = "COM_STMT_PREPARE"
			}
			steps = append(steps, map[string]any{"sql": s.sql, "cmd": cmd, "error_code": s.code})
		}
		return nil
	})
	return map[string]any{"client": "go-sql-driver", "statements": steps}, err
}

func checkErrors(exp *expect) error {
	for _, code := range []string{"1064", "1146", "1062", "1054"} {
		if exp.ErrorCodes[code] != 1 {
			return fmt.Errorf("tshark saw error %s %d times, want 1 (%v)", code, exp.ErrorCodes[code], exp.ErrorCodes)
		}
	}
	return nil
}

var multiQueries = []struct {
	sql  string
	sets []int // rows per result set the client reads
	code int   // error the client sees after those sets
}{
	{"SELECT 1 AS one; SELECT id, c FROM fx.big WHERE id <= 3; UPDATE fx.kv SET v = 'multi' WHERE id = 100", []int{1, 3}, 0},
	{"CALL fx.two_sets(5)", []int{5, 1}, 0},
	{"SELECT 1 AS a; SELEC 2; SELECT 3 AS c", []int{1}, 1064},
}

// runMulti reads every result set of each multi-result query; a failing
// statement ends the batch with an ERR after the earlier result sets.
func runMulti(ctx context.Context, e *env) (map[string]any, error) {
	var done []map[string]any
	err := withConn(ctx, e, "multiStatements=true", func(c *sql.Conn) error {
		for _, q := range multiQueries {
			sets, err := readAllSets(ctx, c, q.sql)
			if errorCode(err) != q.code || (err != nil && q.code == 0) {
				return fmt.Errorf("%q: %v, want error code %d", q.sql, err, q.code)
			}
			if fmt.Sprint(sets) != fmt.Sprint(q.sets) {
				return fmt.Errorf("%q: result sets with %v rows, want %v", q.sql, sets, q.sets)
			}
			done = append(done, map[string]any{"sql": q.sql, "result_set_rows": q.sets, "error_code": q.code})
		}
		return nil
	})
	return map[string]any{"client": "go-sql-driver multiStatements=true", "statements": done,
		"note": "the UPDATE's OK and the CALL's final OK carry no result set"}, err
}

func readAllSets(ctx context.Context, c *sql.Conn, q string) ([]int, error) {
	rows, err := c.QueryContext(ctx, q)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var sets []int
	for {
		n := 0
		for rows.Next() {
			n++
		}
		if err := rows.Err(); err != nil {
			return sets, err
		}
		sets = append(sets, n)
		if !rows.NextResultSet() {
			return sets, rows.Err()
		}
	}
}

const longDataBytes = 100 << 10

// runPrepared binds every Go parameter type go-sql-driver sends. With
// maxAllowedPacket=65536 a []byte over 65536/(7+1) bytes goes ahead in
// COM_STMT_SEND_LONG_DATA instead of inside COM_STMT_EXECUTE.
func runPrepared(ctx context.Context, e *env) (map[string]any, error) {
	when := time.Date(2024, 2, 29, 13, 14, 15, 123456000, time.UTC)
	long := []byte(blobText()[:longDataBytes])
	rowsIn := [][]any{
		{int64(-42), 3.25, "héllo, wörld", []byte{0, 1, 2, 0xff}, when, true, nil},
		{int64(9223372036854775807), -1e300, "", long, when.Add(time.Hour), false, int64(7)},
		{nil, nil, nil, nil, nil, nil, nil},
	}
	var got int
	err := withConn(ctx, e, "interpolateParams=false&maxAllowedPacket=65536&parseTime=true", func(c *sql.Conn) error {
		ins, err := c.PrepareContext(ctx, "INSERT INTO fx.types (i, f, s, b, t, flag, n) VALUES (?, ?, ?, ?, ?, ?, ?)")
		if err != nil {
			return err
		}
		for _, r := range rowsIn {
			if _, err := ins.ExecContext(ctx, r...); err != nil {
				return fmt.Errorf("insert: %w", err)
			}
		}
		if err := ins.Close(); err != nil {
			return err
		}
		if got, err = countBinaryRows(ctx, c); err != nil {
			return err
		}
		return c.PingContext(ctx)
	})
	if err == nil && got != len(rowsIn) {
		err = fmt.Errorf("read back %d rows, want %d", got, len(rowsIn))
	}
	return map[string]any{"client": "go-sql-driver interpolateParams=false maxAllowedPacket=65536",
		"statements": []map[string]any{
			{"sql": "INSERT INTO fx.types (i, f, s, b, t, flag, n) VALUES (?, ?, ?, ?, ?, ?, ?)", "executions": len(rowsIn),
				"params": []string{"int64 -42, float64 3.25, 'héllo, wörld', x'000102ff', 2024-02-29 13:14:15.123456, true, NULL",
					fmt.Sprintf("int64 max, float64 -1e300, '', %d-byte blob via COM_STMT_SEND_LONG_DATA, +1h, false, 7", longDataBytes),
					"all NULL"}},
			{"sql": "SELECT id, i, f, s, LENGTH(b), t, flag, n FROM fx.types WHERE id >= ? ORDER BY id", "params": []string{"1"},
				"rows": len(rowsIn)},
		}, "then": "COM_PING"}, err
}

func countBinaryRows(ctx context.Context, c *sql.Conn) (int, error) {
	rows, err := c.QueryContext(ctx, "SELECT id, i, f, s, LENGTH(b), t, flag, n FROM fx.types WHERE id >= ? ORDER BY id", 1)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
	}
	return n, rows.Err()
}

func checkPrepared(exp *expect) error {
	return needCommands(map[string]int{"COM_STMT_PREPARE": 2, "COM_STMT_EXECUTE": 4,
		"COM_STMT_SEND_LONG_DATA": 1, "COM_STMT_CLOSE": 2, "COM_PING": 1})(exp)
}

// preparedBlob sends the 17 MiB blob as a bound parameter (inline in one
// COM_STMT_EXECUTE: 64M/(2+1) > 17 MiB) and reads it back as a binary row.
func preparedBlob(ctx context.Context, e *env, blob string) (map[string]any, error) {
	var n int
	err := withConn(ctx, e, "interpolateParams=false&maxAllowedPacket=67108864", func(c *sql.Conn) error {
		if _, err := c.ExecContext(ctx, "INSERT INTO fx.blobs VALUES (?, ?)", 2, []byte(blob)); err != nil {
			return fmt.Errorf("prepared insert: %w", err)
		}
		var b []byte
		if err := c.QueryRowContext(ctx, "SELECT b FROM fx.blobs WHERE id = ?", 2).Scan(&b); err != nil {
			return fmt.Errorf("prepared select: %w", err)
		}
		n = len(b)
		return nil
	})
	if err == nil && n != blobSize {
		err = fmt.Errorf("prepared blob came back with %d bytes", n)
	}
	return map[string]any{"client": "go-sql-driver interpolateParams=false", "statements": []string{
		"INSERT INTO fx.blobs VALUES (?, ?) -- 17 MiB in COM_STMT_EXECUTE", "SELECT b FROM fx.blobs WHERE id = ? -- 17 MiB binary row"}}, err
}

const slowSleep = 3 * time.Second

// runSlowClient runs the 100k-row SELECT and sleeps before reading any row:
// the client's receive window fills and closes while the server still has
// rows to send.
func runSlowClient(ctx context.Context, e *env) (map[string]any, error) {
	n := 0
	err := withConn(ctx, e, "interpolateParams=false", func(c *sql.Conn) error {
		rows, err := c.QueryContext(ctx, "SELECT * FROM fx.big")
		if err != nil {
			return err
		}
		defer rows.Close()
		time.Sleep(slowSleep)
		for rows.Next() {
			n++
		}
		return rows.Err()
	})
	if err == nil && n != 100000 {
		err = fmt.Errorf("read %d rows, want 100000", n)
	}
	return map[string]any{"client": "go-sql-driver", "statements": []map[string]any{
		{"sql": "SELECT * FROM fx.big", "rows": 100000, "client_sleep_before_reading_ms": slowSleep.Milliseconds()}}}, err
}

func checkSlowClient(exp *expect) error {
	if exp.ZeroWindows == 0 {
		return fmt.Errorf("no zero windows: the client did not fall behind")
	}
	return nil
}
