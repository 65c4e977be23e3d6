package plans

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gapscope/gapscope/internal/collect"
)

// AccessPath is one way the optimizer considered reading a table.
type AccessPath struct {
	Type   string  `json:"type"` // ref, eq_ref, range, scan, index_merge, ...
	Index  string  `json:"index,omitempty"`
	Rows   float64 `json:"rows"`
	Cost   float64 `json:"cost"`
	Chosen bool    `json:"chosen"`
	Cause  string  `json:"cause,omitempty"` // why it was rejected, when the trace says
}

func (a AccessPath) String() string {
	s := a.Type
	if a.Index != "" {
		s += "(" + a.Index + ")"
	}
	if a.Rows == 0 && a.Cost == 0 && a.Cause != "" {
		return s + " (" + a.Cause + ")" // MariaDB prints no numbers for a path it dismissed early
	}
	return fmt.Sprintf("%s rows %g cost %g", s, a.Rows, a.Cost)
}

// TraceTable is the optimizer's view of one table, at its place in the
// chosen join order.
type TraceTable struct {
	Table    string       `json:"table"`
	ScanRows float64      `json:"table_scan_rows"` // rows_estimation: what the engine says the table holds
	ScanCost float64      `json:"table_scan_cost"`
	Paths    []AccessPath `json:"paths"`
}

// Trace is what an optimizer trace says about a statement's plan.
type Trace struct {
	JoinOrder []string     `json:"join_order"`
	Tables    []TraceTable `json:"tables"`
	// Truncated: the trace exceeded optimizer_trace_max_mem_size.
	Truncated bool `json:"truncated,omitempty"`
}

// Summary renders, per table, the chosen access path and the rejected
// ones with their costs: the comparison the plan-flip case needed.
func (t Trace) Summary() map[string]any {
	tables := make([]map[string]any, 0, len(t.Tables))
	for _, tt := range t.Tables {
		m := map[string]any{"table": tt.Table, "table_scan_rows": tt.ScanRows}
		var rejected []string
		for _, p := range tt.Paths {
			if p.Chosen {
				m["chosen"] = p.String()
			} else {
				rejected = append(rejected, p.String())
			}
		}
		m["rejected"] = rejected
		tables = append(tables, m)
	}
	return map[string]any{"join_order": t.JoinOrder, "tables": tables}
}

// ParseTrace reads the TRACE column of INFORMATION_SCHEMA.OPTIMIZER_TRACE
// (MariaDB and MySQL layouts): rows_estimation for each table's scan
// estimate, considered_execution_plans for the access paths weighed at
// each join prefix, best_join_order (MariaDB) or the last complete plan
// for the order chosen.
func ParseTrace(text []byte) (Trace, error) {
	var root any
	if err := json.Unmarshal(text, &root); err != nil {
		return Trace{}, fmt.Errorf("parsing optimizer trace: %w", err)
	}
	w := &traceWalk{scans: map[string][2]float64{}}
	w.walk(root, nil, "")
	return w.result(), nil
}

// candidate is a best_access_path object and the join prefix it was
// evaluated after.
type candidate struct {
	prefix []string
	table  string
	paths  []AccessPath
}

type traceWalk struct {
	scans      map[string][2]float64 // table -> rows, cost of its full scan
	scanOrder  []string
	candidates []candidate
	joinOrder  []string
}

func (w *traceWalk) walk(v any, prefix []string, table string) {
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			w.walk(e, prefix, table)
		}
	case map[string]any:
		if p, ok := x["plan_prefix"].([]any); ok {
			prefix = names(p)
		}
		if t, ok := x["table"].(string); ok {
			table = unquote(t)
		}
		w.visit(x, prefix, table)
		for _, k := range sortedKeys(x) {
			w.walk(x[k], prefix, table)
		}
	}
}

// visit records what one trace object says.
func (w *traceWalk) visit(x map[string]any, prefix []string, table string) {
	if o, ok := x["best_join_order"].([]any); ok {
		w.joinOrder = names(o)
	}
	if ts, ok := x["table_scan"].(map[string]any); ok && table != "" {
		if _, seen := w.scans[table]; !seen {
			w.scanOrder = append(w.scanOrder, table)
			w.scans[table] = [2]float64{num(ts["rows"]), num(ts["cost"])}
		}
	}
	if bap, ok := x["best_access_path"].(map[string]any); ok {
		t := table
		if s, ok := bap["table"].(string); ok {
			t = unquote(s)
		}
		w.candidates = append(w.candidates, candidate{prefix: slices.Clone(prefix), table: t, paths: accessPaths(bap)})
	}
}

// accessPaths lists considered_access_paths, marking the one
// chosen_access_method names (MariaDB; MySQL marks it chosen=true last).
func accessPaths(bap map[string]any) []AccessPath {
	list, _ := bap["considered_access_paths"].([]any)
	var out []AccessPath
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			continue
		}
		p := AccessPath{Type: str(m["access_type"]), Index: str(m["index"]), Cost: num(m["cost"]), Cause: str(m["cause"])}
		if p.Type == "" {
			p.Type = str(m["type"])
		}
		p.Rows = firstNum(m, "rows", "resulting_rows", "rows_to_scan", "records")
		p.Chosen, _ = m["chosen"].(bool)
		out = append(out, p)
	}
	markChosen(out, bap)
	return out
}

func markChosen(paths []AccessPath, bap map[string]any) {
	chosen := -1
	if cm, ok := bap["chosen_access_method"].(map[string]any); ok {
		for i, p := range paths {
			if p.Type == str(cm["type"]) && p.Cost == num(cm["cost"]) {
				chosen = i
			}
		}
	}
	if chosen < 0 {
		for i, p := range paths {
			if p.Chosen {
				chosen = i
			}
		}
	}
	for i := range paths {
		paths[i].Chosen = i == chosen
	}
}

// result picks, for each table of the join order, the access paths
// weighed right after the tables before it.
func (w *traceWalk) result() Trace {
	order := w.joinOrder
	if len(order) == 0 {
		order = w.lastCompleteOrder()
	}
	t := Trace{JoinOrder: order}
	for i, table := range order {
		tt := TraceTable{Table: table, ScanRows: w.scans[table][0], ScanCost: w.scans[table][1]}
		for _, c := range w.candidates {
			if c.table == table && (slices.Equal(c.prefix, order[:i]) || tt.Paths == nil) {
				tt.Paths = c.paths
			}
		}
		t.Tables = append(t.Tables, tt)
	}
	return t
}

// lastCompleteOrder is the longest plan prefix plus its table seen last:
// MySQL's traces have no best_join_order.
func (w *traceWalk) lastCompleteOrder() []string {
	var best []string
	for _, c := range w.candidates {
		o := append(slices.Clone(c.prefix), c.table)
		if len(o) >= len(best) {
			best = o
		}
	}
	if best == nil {
		return w.scanOrder
	}
	return best
}

func names(a []any) []string {
	out := make([]string, 0, len(a))
	for _, e := range a {
		out = append(out, unquote(str(e)))
	}
	return out
}

func unquote(s string) string { return strings.Trim(s, "`") }

func str(v any) string {
	s, _ := v.(string)
	return s
}

func num(v any) float64 {
	f, _ := v.(float64)
	return f
}

func firstNum(m map[string]any, keys ...string) float64 {
	for _, k := range keys {
		if f, ok := m[k].(float64); ok {
			return f
		}
	}
	return 0
}

// ErrNotExplainable is returned for a statement the guard refuses.
var ErrNotExplainable = errors.New("not a read-only SELECT gapscope may EXPLAIN")

// TraceReplay plans sql again in a session of its own with optimizer_trace
// on and returns the trace. It runs EXPLAIN, not the statement: the trace
// is written while the optimizer plans, so the SELECT need not run (a
// plan that flipped to a full scan may take minutes) and nothing is
// executed. Only statements Classify finds Explainable are replayed.
func TraceReplay(ctx context.Context, db *sql.DB, schema, sqlText string) (Trace, error) {
	if v := Classify(sqlText); !v.Explainable {
		return Trace{}, fmt.Errorf("%w: %s", ErrNotExplainable, v.Reason)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return Trace{}, fmt.Errorf("tracing a plan: %w", err)
	}
	defer conn.Close()
	defer conn.ExecContext(context.WithoutCancel(ctx), collect.Mark+" SET SESSION optimizer_trace = 'enabled=off'")
	if _, err := conn.ExecContext(ctx, collect.Mark+" SET SESSION optimizer_trace = 'enabled=on'"); err != nil {
		return Trace{}, fmt.Errorf("turning optimizer_trace on: %w", err)
	}
	if _, err := explainOn(ctx, conn, schema, sqlText); err != nil {
		return Trace{}, err
	}
	var trace []byte
	var missing int64
	err = conn.QueryRowContext(ctx, collect.Mark+" SELECT TRACE, MISSING_BYTES_BEYOND_MAX_MEM_SIZE FROM information_schema.OPTIMIZER_TRACE").Scan(&trace, &missing)
	if err != nil {
		return Trace{}, fmt.Errorf("reading information_schema.OPTIMIZER_TRACE: %w", err)
	}
	t, err := ParseTrace(trace)
	t.Truncated = missing > 0
	return t, err
}

// explainOn runs EXPLAIN sqlText on conn in schema. It is the only place
// gapscope sends a statement's own text, and it checks the guard itself.
func explainOn(ctx context.Context, conn *sql.Conn, schema, sqlText string) (Plan, error) {
	if v := Classify(sqlText); !v.Explainable {
		return Plan{}, fmt.Errorf("%w: %s", ErrNotExplainable, v.Reason)
	}
	sqlText = strings.TrimRight(strings.TrimSpace(sqlText), "; \t\r\n")
	if schema != "" {
		if _, err := conn.ExecContext(ctx, collect.Mark+" USE "+quoteName(schema)); err != nil {
			return Plan{}, fmt.Errorf("using schema %s: %w", schema, err)
		}
	}
	rows, err := conn.QueryContext(ctx, collect.Mark+" EXPLAIN "+sqlText)
	if err != nil {
		return Plan{}, fmt.Errorf("EXPLAIN: %w", err)
	}
	defer rows.Close()
	p, err := ScanPlan(rows)
	if err != nil {
		return Plan{}, fmt.Errorf("EXPLAIN: %w", err)
	}
	return p, nil
}

func quoteName(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }
