package plans

import (
	"database/sql"
	"fmt"
	"strconv"
	"strings"
)

// Row is one line of a tabular plan (EXPLAIN, SHOW EXPLAIN FOR, SHOW
// ANALYZE FOR, EXPLAIN FOR CONNECTION): the columns every flavour prints.
type Row struct {
	ID         int     `json:"id"`
	SelectType string  `json:"select_type"`
	Table      string  `json:"table"`
	Type       string  `json:"type"` // access type: ALL, index, range, ref, eq_ref, const, ...
	Key        string  `json:"key,omitempty"`
	Ref        string  `json:"ref,omitempty"`
	Rows       int64   `json:"rows"`             // the optimizer's estimate; -1 when the server printed none
	RRows      float64 `json:"r_rows,omitempty"` // SHOW ANALYZE: rows read so far per lookup; -1 when absent
	Extra      string  `json:"extra,omitempty"`
}

// Plan is one execution plan: its rows in join order.
type Plan struct {
	Rows []Row `json:"rows"`
}

// planColumns maps a result column name to the Row field it fills.
var planColumns = map[string]func(r *Row, v string){
	"id":          func(r *Row, v string) { r.ID, _ = strconv.Atoi(v) },
	"select_type": func(r *Row, v string) { r.SelectType = v },
	"table":       func(r *Row, v string) { r.Table = v },
	"type":        func(r *Row, v string) { r.Type = v },
	"key":         func(r *Row, v string) { r.Key = v },
	"ref":         func(r *Row, v string) { r.Ref = v },
	"rows":        func(r *Row, v string) { r.Rows = parseRows(v) },
	"r_rows":      func(r *Row, v string) { r.RRows = parseFloat(v) },
	"extra":       func(r *Row, v string) { r.Extra = v },
}

// ScanPlan reads a tabular plan result set by column name, so that it
// reads MariaDB's and MySQL's layouts (MySQL adds partitions and filtered,
// SHOW ANALYZE adds r_rows and r_filtered) alike.
func ScanPlan(rows *sql.Rows) (Plan, error) {
	cols, err := rows.Columns()
	if err != nil {
		return Plan{}, err
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	var p Plan
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return Plan{}, err
		}
		p.Rows = append(p.Rows, rowOf(cols, vals))
	}
	return p, rows.Err()
}

func rowOf(cols []string, vals []sql.NullString) Row {
	r := Row{Rows: -1, RRows: -1}
	for i, c := range cols {
		if set := planColumns[strings.ToLower(c)]; set != nil && vals[i].Valid {
			set(&r, vals[i].String)
		}
	}
	return r
}

func parseRows(v string) int64 {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

func parseFloat(v string) float64 {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil {
		return -1
	}
	return f
}

// Signature names the plan's shape: tables in join order, each with its
// access type and key, subquery tables prefixed with their select id. Two
// executions with the same signature read the data the same way, whatever
// their estimates.
func (p Plan) Signature() string {
	parts := make([]string, 0, len(p.Rows))
	for _, r := range p.Rows {
		parts = append(parts, r.step())
	}
	return strings.Join(parts, " > ")
}

func (r Row) step() string {
	s := r.Table
	if s == "" {
		s = "-"
	}
	if r.ID > 1 {
		s = fmt.Sprintf("#%d %s", r.ID, s)
	}
	t := r.Type
	if t == "" {
		t = "none" // "Impossible WHERE", "No tables used"
	}
	if r.Key != "" {
		return s + ":" + t + "(" + r.Key + ")"
	}
	return s + ":" + t
}

// Estimates maps each plan step's table (with its select id for
// subqueries) to the optimizer's row estimate.
func (p Plan) Estimates() map[string]int64 {
	out := make(map[string]int64, len(p.Rows))
	for _, r := range p.Rows {
		if r.Rows >= 0 {
			out[r.key()] = r.Rows
		}
	}
	return out
}

// Actual maps each step to the rows SHOW ANALYZE counted so far (r_rows);
// nil for plans without them.
func (p Plan) Actual() map[string]float64 {
	var out map[string]float64
	for _, r := range p.Rows {
		if r.RRows >= 0 {
			if out == nil {
				out = map[string]float64{}
			}
			out[r.key()] = r.RRows
		}
	}
	return out
}

func (r Row) key() string {
	if r.ID > 1 {
		return fmt.Sprintf("#%d %s", r.ID, r.Table)
	}
	return r.Table
}

// Text renders the plan as the server's tabular output would read, one
// line per row, for stores and reports.
func (p Plan) Text() string {
	var b strings.Builder
	b.WriteString("id\tselect_type\ttable\ttype\tkey\tref\trows\tr_rows\tExtra\n")
	for _, r := range p.Rows {
		rr := ""
		if r.RRows >= 0 {
			rr = strconv.FormatFloat(r.RRows, 'f', -1, 64)
		}
		fmt.Fprintf(&b, "%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.ID, r.SelectType, r.Table, r.Type, r.Key, r.Ref, r.Rows, rr, r.Extra)
	}
	return b.String()
}
