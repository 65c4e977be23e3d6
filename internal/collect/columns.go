package collect

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// Columns records which columns each table of a schema has on this server.
// Readers build their SELECT lists from it, so that one reader serves
// MariaDB, MySQL 5.7, 8.0 and 8.4, whose performance_schema tables differ.
type Columns map[string]map[string]bool // upper-case table -> upper-case column

// Has reports whether table has column.
func (c Columns) Has(table, column string) bool {
	return c[strings.ToUpper(table)][strings.ToUpper(column)]
}

// Table reports whether the table exists (has any column).
func (c Columns) Table(table string) bool { return len(c[strings.ToUpper(table)]) > 0 }

// Add records one column (used by LoadColumns and fixtures).
func (c Columns) Add(table, column string) {
	t := strings.ToUpper(table)
	if c[t] == nil {
		c[t] = map[string]bool{}
	}
	c[t][strings.ToUpper(column)] = true
}

// LoadColumns reads information_schema.COLUMNS for the given tables of schema.
func LoadColumns(ctx context.Context, db queryer, schema string, tables ...string) (Columns, error) {
	q := Mark + " SELECT TABLE_NAME, COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ?"
	if len(tables) > 0 {
		q += " AND TABLE_NAME IN (" + quoteList(tables) + ")"
	}
	rows, err := db.QueryContext(ctx, q, schema)
	if err != nil {
		return nil, fmt.Errorf("reading information_schema.COLUMNS: %w", err)
	}
	defer rows.Close()
	cols := Columns{}
	for rows.Next() {
		var t, c string
		if err := rows.Scan(&t, &c); err != nil {
			return nil, fmt.Errorf("reading information_schema.COLUMNS: %w", err)
		}
		cols.Add(t, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading information_schema.COLUMNS: %w", err)
	}
	return cols, nil
}

// field is one column a reader wants: its name, and how to store its text
// value into the record R. Optional fields are left out of the SELECT when
// the server lacks them; a missing required field is an error.
type field[R any] struct {
	name     string
	optional bool
	set      func(r *R, v []byte)
	// setStr, when set instead of set, stores a text value that repeats
	// from row to row (event names, digests, schemas): decodeRow hands it
	// an interned string, one allocation per distinct value, not per row.
	setStr func(r *R, s string)
	// prefix, when > 0, reads only the column's first prefix characters
	// (LEFT(col, prefix)): less for the server to send and for us to parse.
	prefix int
}

// selectExpr is the SELECT expression reading f from the table aliased q
// ("" for none).
func (f field[R]) selectExpr(q string) string {
	col := f.name
	if q != "" {
		col = q + "." + col
	}
	if f.prefix > 0 {
		return fmt.Sprintf("LEFT(%s, %d)", col, f.prefix)
	}
	return col
}

// selectList returns the fields of want that table has, in order, and the
// SELECT list naming them.
func selectList[R any](cols Columns, table string, want []field[R]) ([]field[R], string, error) {
	var have []field[R]
	var names []string
	for _, f := range want {
		if !cols.Has(table, f.name) {
			if !f.optional {
				return nil, "", fmt.Errorf("%s has no column %s (unsupported server version?)", table, f.name)
			}
			continue
		}
		have = append(have, f)
		names = append(names, f.name)
	}
	return have, strings.Join(names, ", "), nil
}

// decodeRow stores one row's raw values (nil for NULL) into r, interning
// the values of setStr fields in in (nil: a new string each time).
func decodeRow[R any](fields []field[R], vals [][]byte, r *R, in *interner) {
	for i, f := range fields {
		if i >= len(vals) || vals[i] == nil {
			continue
		}
		if f.setStr != nil {
			f.setStr(r, in.str(vals[i]))
		} else {
			f.set(r, vals[i])
		}
	}
}

// interner hands out one string per distinct value of the columns whose
// values repeat, so that a reader polling thousands of rows a second does
// not allocate (and collect) the same digest text thousands of times. It
// holds at most internMax values: when full it starts over, so a server
// with endless distinct values costs what it did without it.
type interner struct {
	m map[string]string
}

const internMax = 4096

func (in *interner) str(b []byte) string {
	if in == nil {
		return string(b)
	}
	if s, ok := in.m[string(b)]; ok { // no allocation for the lookup
		return s
	}
	if in.m == nil || len(in.m) >= internMax {
		in.m = make(map[string]string, 256)
	}
	s := string(b)
	in.m[s] = s
	return s
}

// Text-value parsers: the driver hands us column text; bad numbers read as 0
// (a server never sends them, and a monitor must not fail on one row).
func pU64(b []byte) uint64 {
	n, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		f, _ := strconv.ParseFloat(string(b), 64)
		return uint64(max(f, 0))
	}
	return n
}

func pI64(b []byte) int64 {
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		f, _ := strconv.ParseFloat(string(b), 64)
		return int64(f)
	}
	return n
}

func pBool(b []byte) bool {
	s := string(b)
	return s != "0" && !strings.EqualFold(s, "NO") && s != ""
}
