package plans

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/sqltext"
)

// TableStatistics is what the optimizer believes about one table, from
// every source it may use: information_schema.TABLES, InnoDB persistent
// statistics, and MariaDB's engine-independent statistics (which win over
// InnoDB's when use_stat_tables says PREFERABLY or COMPLEMENTARY).
// Counts are -1 where the source has no row for the table.
type TableStatistics struct {
	Schema    string `json:"schema"`
	Table     string `json:"table"`
	TableRows int64  `json:"table_rows"` // information_schema.TABLES.TABLE_ROWS
	// InnoDBRows and InnoDBUpdated: mysql.innodb_table_stats n_rows and
	// last_update.
	InnoDBRows    int64  `json:"innodb_n_rows"`
	InnoDBUpdated string `json:"innodb_last_update,omitempty"`
	// Cardinality and AvgFrequency (index name -> rows per distinct value
	// of its first column): mysql.table_stats and mysql.index_stats.
	Cardinality  int64              `json:"eits_cardinality"`
	AvgFrequency map[string]float64 `json:"eits_avg_frequency,omitempty"`
	// Histograms counts the columns with a histogram (mysql.column_stats
	// on MariaDB, information_schema.COLUMN_STATISTICS on MySQL 8).
	Histograms int `json:"histograms"`
}

// statsVariables are the settings that decide which statistics exist and
// how fresh they are.
var statsVariables = []string{
	"innodb_stats_persistent", "innodb_stats_auto_recalc", "innodb_stats_persistent_sample_pages",
	"innodb_stats_transient_sample_pages", "innodb_stats_on_metadata", "use_stat_tables",
	"optimizer_use_condition_selectivity", "histogram_size", "histogram_type",
}

// readStatistics reads the statistics of the named tables of schema. A
// source the server lacks (mysql.table_stats on MySQL) leaves its fields
// at -1; only a failure to read information_schema is an error.
func readStatistics(ctx context.Context, db *sql.DB, schema string, tables []string) ([]TableStatistics, error) {
	var out []TableStatistics
	for _, t := range tables {
		ts := TableStatistics{Schema: schema, Table: t, TableRows: -1, InnoDBRows: -1, Cardinality: -1}
		err := db.QueryRowContext(ctx, collect.Mark+" SELECT COALESCE(TABLE_ROWS, -1) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?", schema, t).Scan(&ts.TableRows)
		if err == sql.ErrNoRows {
			continue // a word of the statement that is not a table
		}
		if err != nil {
			return out, fmt.Errorf("reading information_schema.TABLES: %w", err)
		}
		readOptionalStats(ctx, db, &ts)
		out = append(out, ts)
	}
	return out, nil
}

// readOptionalStats fills what the server has; missing tables or grants
// leave the defaults.
func readOptionalStats(ctx context.Context, db *sql.DB, ts *TableStatistics) {
	q := func(query string, dest ...any) {
		_ = db.QueryRowContext(ctx, collect.Mark+" "+query, ts.Schema, ts.Table).Scan(dest...)
	}
	q("SELECT n_rows, CAST(last_update AS CHAR) FROM mysql.innodb_table_stats WHERE database_name = ? AND table_name = ?", &ts.InnoDBRows, &ts.InnoDBUpdated)
	q("SELECT cardinality FROM mysql.table_stats WHERE db_name = ? AND table_name = ?", &ts.Cardinality)
	if q("SELECT COUNT(*) FROM mysql.column_stats WHERE db_name = ? AND table_name = ? AND histogram IS NOT NULL", &ts.Histograms); ts.Histograms == 0 {
		q("SELECT COUNT(*) FROM information_schema.COLUMN_STATISTICS WHERE SCHEMA_NAME = ? AND TABLE_NAME = ?", &ts.Histograms)
	}
	ts.AvgFrequency = readAvgFrequency(ctx, db, ts.Schema, ts.Table)
}

func readAvgFrequency(ctx context.Context, db *sql.DB, schema, table string) map[string]float64 {
	rows, err := db.QueryContext(ctx, collect.Mark+" SELECT index_name, avg_frequency FROM mysql.index_stats WHERE db_name = ? AND table_name = ? AND prefix_arity = 1", schema, table)
	if err != nil {
		return nil
	}
	defer rows.Close()
	var out map[string]float64
	for rows.Next() {
		var name string
		var f sql.NullFloat64
		if rows.Scan(&name, &f) != nil || !f.Valid {
			continue
		}
		if out == nil {
			out = map[string]float64{}
		}
		out[name] = f.Float64
	}
	return out
}

// readStatsVariables reads the statistics settings the server has.
func readStatsVariables(ctx context.Context, db *sql.DB) (map[string]string, error) {
	rows, err := db.QueryContext(ctx, collect.Mark+" SHOW GLOBAL VARIABLES WHERE Variable_name IN ('"+strings.Join(statsVariables, "','")+"')")
	if err != nil {
		return nil, fmt.Errorf("reading statistics settings: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, fmt.Errorf("reading statistics settings: %w", err)
		}
		out[strings.ToLower(k)] = v
	}
	return out, rows.Err()
}

// tablesNamed returns the distinct plan tables and the unquoted or
// backquoted names in sql: candidates for readStatistics, which keeps
// those that are tables of the schema. Plans print aliases, so the
// statement's own words are needed to find the real names.
func tablesNamed(p Plan, sql string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		s = strings.Trim(s, "`")
		if s == "" || seen[strings.ToLower(s)] || strings.HasPrefix(s, "<") || len(out) >= 32 {
			return
		}
		seen[strings.ToLower(s)] = true
		out = append(out, s)
	}
	for _, r := range p.Rows {
		add(r.Table)
	}
	for _, name := range identifiers(sql) {
		add(name)
	}
	return out
}

// identifiers returns the names that follow FROM, JOIN or a comma (of a
// FROM list, or harmlessly of a select list): the names that may be
// tables. In db.table the table is taken.
func identifiers(sql string) []string {
	toks := lexNames(sql)
	var out []string
	for i := 1; i < len(toks); i++ {
		prev := strings.ToLower(toks[i-1])
		if prev != "from" && prev != "join" && prev != "," {
			continue
		}
		if i+2 < len(toks) && toks[i+1] == "." {
			i += 2
		}
		out = append(out, toks[i])
	}
	return out
}

// lexNames is the text of sql's tokens, backquoted names unquoted.
func lexNames(sql string) []string {
	toks := sqltext.Tokens(sql)
	out := make([]string, len(toks))
	for i, t := range toks {
		out[i] = t.Text
	}
	return out
}
