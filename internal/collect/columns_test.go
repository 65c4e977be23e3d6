package collect

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

func loadFixture(t *testing.T, name string) Columns {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "columns", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cols, err := parseColumns(f)
	if err != nil {
		t.Fatal(err)
	}
	return cols
}

// Every fixture must yield a query for every reader: a server version
// whose tables lack a required column would fail here first.
func TestColumnFixturesBuildEveryQuery(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "columns", "*.txt"))
	if len(files) < 3 {
		t.Fatalf("found %d column fixtures, want mariadb, mysql-5.7, mysql-8.0", len(files))
	}
	for _, f := range files {
		cols := loadFixture(t, filepath.Base(f))
		for _, table := range []string{"events_statements_history", "events_statements_history_long"} {
			if _, _, err := selectList(cols, table, statementFields); err != nil {
				t.Errorf("%s: %v", f, err)
			}
		}
	}
}

func TestColumnVariants(t *testing.T) {
	maria, my80, my57 := loadFixture(t, "mariadb-10.11.txt"), loadFixture(t, "mysql-8.0.txt"), loadFixture(t, "mysql-5.7.txt")
	_, stmt80, _ := selectList(my80, "events_statements_history_long", statementFields)
	_, stmtMaria, _ := selectList(maria, "events_statements_history_long", statementFields)
	_, stmt57, _ := selectList(my57, "events_statements_history_long", statementFields)
	if !strings.Contains(stmt80, "CPU_TIME") {
		t.Errorf("MySQL 8.0 statement query lacks CPU_TIME: %s", stmt80)
	}
	for name, q := range map[string]string{"mariadb": stmtMaria, "mysql-5.7": stmt57} {
		if strings.Contains(q, "CPU_TIME") {
			t.Errorf("%s statement query selects CPU_TIME, which it lacks: %s", name, q)
		}
		if !strings.Contains(q, "NESTING_EVENT_LEVEL") {
			t.Errorf("%s statement query lacks NESTING_EVENT_LEVEL", name)
		}
	}
	if !maria.Has("processlist", "TIME_MS") || my80.Has("processlist", "TIME_MS") {
		t.Error("TIME_MS: want present in MariaDB, absent in MySQL 8.0")
	}
	if !my57.Table("setup_timers") || my80.Table("setup_timers") {
		t.Error("setup_timers: want present in 5.7, absent in 8.0")
	}
}

// A row of MySQL 8.0's columns decodes into the fields both flavours share
// and the ones only 8.0 has; NULLs leave zero values.
func TestDecodeStatementRowMySQL80(t *testing.T) {
	fields, _, err := selectList(loadFixture(t, "mysql-8.0.txt"), "events_statements_history_long", statementFields)
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]string{
		"THREAD_ID": "48", "EVENT_ID": "12", "END_EVENT_ID": "20", "EVENT_NAME": "statement/sql/select",
		"TIMER_START": "62211165875000", "TIMER_END": "62211244350000", "TIMER_WAIT": "78475000",
		"SQL_TEXT": "SELECT * FROM t WHERE id = 5", "DIGEST": strings.Repeat("ab", 32), "ROWS_SENT": "1",
		"ROWS_EXAMINED": "1", "NO_INDEX_USED": "0", "CPU_TIME": "51000000", "NESTING_EVENT_LEVEL": "0",
		"MYSQL_ERRNO": "0", "LOCK_TIME": "1000000",
	}
	row := make([][]byte, len(fields))
	for i, f := range fields {
		if v, ok := vals[f.name]; ok {
			row[i] = []byte(v)
		}
	}
	var s ServerStatement
	decodeRow(fields, row, &s, nil)
	if s.ThreadID != 48 || s.EventID != 12 || s.EndEventID != 20 || s.TimerWait != 78475000 ||
		s.SQLText != vals["SQL_TEXT"] || s.RowsSent != 1 || s.CPUTimePS != 51000000 || s.LockTimePS != 1000000 || len(s.Digest) != 64 {
		t.Errorf("decoded %+v", s)
	}
	if s.NestingEventID != 0 || s.Schema != "" {
		t.Errorf("NULL columns not zero: %+v", s)
	}
}

func TestColumnFixtureRejectsGarbage(t *testing.T) {
	if _, err := parseColumns(strings.NewReader("no colon here\n")); err == nil {
		t.Error("want an error for a line without a table")
	}
}

// TestInternerReusesRepeatedValues: a repeated value costs no allocation
// and comes back as the same string; the table stays bounded.
func TestInternerReusesRepeatedValues(t *testing.T) {
	var in interner
	digest := []byte("SELECT `c` FROM `sbtest1` WHERE `id` = ?")
	first := in.str(digest)
	if allocs := testing.AllocsPerRun(100, func() { _ = in.str(digest) }); allocs != 0 {
		t.Errorf("%v allocations per repeated value, want 0", allocs)
	}
	if again := in.str(digest); unsafe.StringData(again) != unsafe.StringData(first) || again != string(digest) {
		t.Error("a repeated value came back as another string")
	}
	for i := range 2 * internMax {
		in.str([]byte(strconv.Itoa(i)))
	}
	if len(in.m) > internMax {
		t.Errorf("interner holds %d values, bound %d", len(in.m), internMax)
	}
	var none *interner
	if none.str(digest) != string(digest) {
		t.Error("a nil interner does not copy the value")
	}
}

// parseColumns reads a column-set fixture: lines "table: COL1,COL2,...";
// '#' starts a comment.
func parseColumns(r io.Reader) (Columns, error) {
	cols := Columns{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		t, list, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("column fixture line %d: want \"table: COL,...\"", n)
		}
		for _, c := range strings.Split(list, ",") {
			if c = strings.TrimSpace(c); c != "" {
				cols.Add(strings.TrimSpace(t), c)
			}
		}
	}
	return cols, sc.Err()
}
