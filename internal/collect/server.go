package collect

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
)

// queryer is what the readers need from *sql.DB, *sql.Conn or *sql.Tx.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// DetectServer reads flavour, version and the settings that decide what
// gapscope can collect.
func DetectServer(ctx context.Context, db queryer) (ServerInfo, error) {
	info := ServerInfo{HistorySize: -1, HistoryLongSize: -1}
	var user, host sql.NullString
	err := db.QueryRowContext(ctx, Mark+" SELECT VERSION(), @@version_comment, CONNECTION_ID(), CURRENT_USER(), @@hostname").
		Scan(&info.Version, &info.VersionComment, &info.ConnectionID, &user, &host)
	if err != nil {
		return info, fmt.Errorf("reading server version: %w", err)
	}
	info.CurrentUser, info.Hostname = user.String, host.String
	info.Flavor = flavorOf(info.Version, info.VersionComment)
	info.Major, info.Minor, info.Patch = parseVersion(info.Version)
	vars, err := variablesLike(ctx, db, []string{"performance_schema", "thread_handling", "thread_pool_size",
		"extra_port", "performance_schema_events_statements_history_size",
		"performance_schema_events_statements_history_long_size"})
	if err != nil {
		return info, err
	}
	info.PerformanceSchema = isOn(vars["performance_schema"])
	info.ThreadHandling = vars["thread_handling"]
	info.ThreadPool = strings.Contains(info.ThreadHandling, "pool")
	info.ThreadPoolSize = atoiOr(vars["thread_pool_size"], 0)
	info.ExtraPort = atoiOr(vars["extra_port"], 0)
	info.HistorySize = atoiOr(vars["performance_schema_events_statements_history_size"], -1)
	info.HistoryLongSize = atoiOr(vars["performance_schema_events_statements_history_long_size"], -1)
	if st, err := GlobalStatusOf(ctx, db, "Uptime"); err == nil {
		info.UptimeS = int64(atoiOr(st["Uptime"], 0))
	}
	info.ThreadPoolTables = tableExists(ctx, db, "information_schema", "THREAD_POOL_GROUPS")
	if info.PerformanceSchema {
		info.Timers, _ = readTimers(ctx, db)
	}
	return info, nil
}

func flavorOf(version, comment string) string {
	v, c := strings.ToLower(version), strings.ToLower(comment)
	switch {
	case strings.Contains(v, "mariadb") || strings.Contains(c, "mariadb"):
		return "mariadb"
	case strings.Contains(c, "percona") || strings.Contains(v, "percona"):
		return "percona"
	default:
		return "mysql"
	}
}

// parseVersion reads "10.11.19-MariaDB-0+deb12u1" or "8.0.36-28". The
// "5.5.5-" prefix some MariaDB proxies add is skipped.
func parseVersion(v string) (major, minor, patch int) {
	v = strings.TrimPrefix(v, "5.5.5-")
	nums := [3]int{}
	for i, part := range strings.SplitN(v, ".", 3) {
		end := 0
		for end < len(part) && part[end] >= '0' && part[end] <= '9' {
			end++
		}
		nums[i], _ = strconv.Atoi(part[:end])
	}
	return nums[0], nums[1], nums[2]
}

func isOn(v string) bool {
	switch strings.ToUpper(v) {
	case "ON", "1", "YES", "TRUE":
		return true
	}
	return false
}

func atoiOr(s string, def int) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return def
	}
	return n
}

func tableExists(ctx context.Context, db queryer, schema, table string) bool {
	var n int
	err := db.QueryRowContext(ctx, Mark+" SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ?",
		schema, table).Scan(&n)
	return err == nil && n > 0
}

func readTimers(ctx context.Context, db queryer) (map[string]string, error) {
	if !tableExists(ctx, db, "performance_schema", "setup_timers") {
		return nil, nil
	}
	return readPairs(ctx, db, Mark+" SELECT NAME, TIMER_NAME FROM performance_schema.setup_timers", "setup_timers")
}

// GlobalStatus returns SHOW GLOBAL STATUS as name -> value.
func GlobalStatus(ctx context.Context, db queryer) (map[string]string, error) {
	return readPairs(ctx, db, Mark+" SHOW GLOBAL STATUS", "global status")
}

// GlobalVariables returns SHOW GLOBAL VARIABLES as name -> value.
func GlobalVariables(ctx context.Context, db queryer) (map[string]string, error) {
	return readPairs(ctx, db, Mark+" SHOW GLOBAL VARIABLES", "global variables")
}

func variablesLike(ctx context.Context, db queryer, names []string) (map[string]string, error) {
	return readPairs(ctx, db, Mark+" SHOW GLOBAL VARIABLES WHERE Variable_name IN ("+quoteList(names)+")", "global variables")
}

// GlobalStatusOf returns only the named status variables. A full SHOW
// GLOBAL STATUS builds every row the server has, several times the
// server time of a few (docs/performance.md, "A few status variables, not
// all").
func GlobalStatusOf(ctx context.Context, db queryer, names ...string) (map[string]string, error) {
	return readPairs(ctx, db, Mark+" SHOW GLOBAL STATUS WHERE Variable_name IN ("+quoteList(names)+")", "global status")
}

// quoteList renders constant identifiers of ours as a SQL string list.
func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "'" + strings.ReplaceAll(n, "'", "''") + "'"
	}
	return strings.Join(q, ",")
}

func readPairs(ctx context.Context, db queryer, query, what string) (map[string]string, error) {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", what, err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var k string
		var v sql.NullString
		if err := rows.Scan(&k, &v); err != nil {
			return nil, fmt.Errorf("reading %s: %w", what, err)
		}
		out[k] = v.String
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", what, err)
	}
	return out, nil
}
