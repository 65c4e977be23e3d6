package join

import "strings"

// What MariaDB 10.11 records in events_statements_history_long for each
// client command (performance_schema=ON, history_long consumer on; measured
// on a sandbox with go-sql-driver and the mariadb client; pinned by
// TestServerRecordsCommands):
//
//	wire command             EVENT_NAME                    SQL_TEXT / DIGEST      nesting
//	COM_QUERY                statement/sql/<verb>          text / digest          top level
//	COM_QUERY (syntax error) statement/sql/error           text / NULL digest     top level
//	COM_QUERY multi-stmt     one statement/sql/* per stmt  remaining text each    top level, same thread
//	COM_QUERY CALL p()       statement/sql/call_procedure  text / digest          top level
//	  statements inside p    statement/sp/stmt             text / NULL            NESTING_EVENT_TYPE=STATEMENT
//	COM_STMT_PREPARE         statement/com/Prepare         NULL / NULL            top level
//	COM_STMT_EXECUTE         statement/com/Execute         NULL / NULL            top level, no nested row
//	COM_STMT_CLOSE           statement/com/Close stmt      NULL / NULL            (no wire response)
//	COM_PING                 statement/com/Ping            NULL / NULL
//	COM_INIT_DB              statement/com/Init DB         NULL / NULL
//	COM_STATISTICS           statement/com/Statistics      NULL / NULL
//	COM_QUIT                 statement/com/Quit            NULL / NULL            (no wire response)
//
// The statement/com/* names are the server's command names, so the table
// below covers the remaining commands the same way. SQL-level PREPARE /
// EXECUTE arrive as COM_QUERY and are recorded as statement/sql/prepare_sql
// and statement/sql/execute_sql. MySQL 8 may record a prepared statement's
// execution under statement/sql/*, which is accepted for COM_STMT_EXECUTE.
var comEvents = map[string]string{
	"COM_SLEEP":               "statement/com/Sleep",
	"COM_QUIT":                "statement/com/Quit",
	"COM_INIT_DB":             "statement/com/Init DB",
	"COM_FIELD_LIST":          "statement/com/Field List",
	"COM_CREATE_DB":           "statement/com/Create DB",
	"COM_DROP_DB":             "statement/com/Drop DB",
	"COM_REFRESH":             "statement/com/Refresh",
	"COM_SHUTDOWN":            "statement/com/Shutdown",
	"COM_STATISTICS":          "statement/com/Statistics",
	"COM_PROCESS_INFO":        "statement/com/Processlist",
	"COM_CONNECT":             "statement/com/Connect",
	"COM_PROCESS_KILL":        "statement/com/Kill",
	"COM_DEBUG":               "statement/com/Debug",
	"COM_PING":                "statement/com/Ping",
	"COM_TIME":                "statement/com/Time",
	"COM_DELAYED_INSERT":      "statement/com/Delayed insert",
	"COM_CHANGE_USER":         "statement/com/Change user",
	"COM_BINLOG_DUMP":         "statement/com/Binlog Dump",
	"COM_TABLE_DUMP":          "statement/com/Table Dump",
	"COM_CONNECT_OUT":         "statement/com/Connect Out",
	"COM_REGISTER_SLAVE":      "statement/com/Register Slave",
	"COM_STMT_PREPARE":        "statement/com/Prepare",
	"COM_STMT_EXECUTE":        "statement/com/Execute",
	"COM_STMT_SEND_LONG_DATA": "statement/com/Long Data",
	"COM_STMT_CLOSE":          "statement/com/Close stmt",
	"COM_STMT_RESET":          "statement/com/Reset stmt",
	"COM_SET_OPTION":          "statement/com/Set option",
	"COM_STMT_FETCH":          "statement/com/Fetch",
	"COM_DAEMON":              "statement/com/Daemon",
	"COM_RESET_CONNECTION":    "statement/com/Reset connection",
	"COM_STMT_BULK_EXECUTE":   "statement/com/Bulk_execute",
}

const sqlEventPrefix = "statement/sql/"

// cmdCompatible reports whether a server event can be the record of a wire
// command. A command we do not know (TLS hides it, or a new protocol
// command) is compatible with everything: the time window decides alone.
func cmdCompatible(cmd, eventName string) bool {
	if strings.HasPrefix(eventName, "statement/abstract/") {
		// Not refined yet: read while running, before the server had the
		// whole request (a long or slowly sent one) and parsed it. No
		// evidence either way; its EVENT_ID is the statement's.
		return true
	}
	switch cmd {
	case "COM_QUERY":
		return strings.HasPrefix(eventName, sqlEventPrefix)
	case "COM_STMT_EXECUTE":
		return eventName == "statement/com/Execute" || strings.HasPrefix(eventName, sqlEventPrefix)
	}
	want, known := comEvents[cmd]
	if !known {
		return true
	}
	return eventName == want
}

// multiStatement reports whether one wire command may produce several
// top-level server rows (multi-statement COM_QUERY).
func multiStatement(cmd string) bool {
	if cmd == "COM_QUERY" {
		return true
	}
	_, known := comEvents[cmd]
	return !known && cmd != "COM_STMT_EXECUTE"
}

// mayHoldMore reports whether a query's wire text can hold more than one
// statement: a ';' before its end, or no text to tell (TLS). Without the
// check, a row that started within the calibration error of the answer
// passed for a second statement of a single-statement query (an UPDATE
// took the next query's row when the client sent it a few µs after the
// answer: TestJoinRealServer, one run in ten).
func mayHoldMore(sql string) bool {
	return sql == "" || strings.Contains(strings.TrimRight(sql, "; \t\r\n"), ";")
}

// textCompatible compares the leading keyword of the wire text and the
// server's SQL_TEXT. The wire text is usually redacted (literals replaced)
// and the server's digest uses another normalisation, so a full comparison
// is impossible; the verb still tells a SELECT from an UPDATE, which is what
// catches a misaligned match. Either text missing means no evidence.
func textCompatible(wire, server string) bool {
	// The server's side first: a prepared statement's row has no text
	// (MariaDB), and then the wire's keyword is not needed.
	b := leadingKeyword(server)
	if b == "" {
		return true
	}
	a := leadingKeyword(wire)
	return a == "" || strings.EqualFold(a, b)
}

// leadingKeyword returns the first word of a statement, skipping
// whitespace, comments and opening parentheses.
func leadingKeyword(s string) string {
	s = skipNoise(s)
	end := 0
	for end < len(s) && isWordByte(s[end]) {
		end++
	}
	return s[:end]
}

func skipNoise(s string) string {
	for {
		s = s[noiseLen(s):]
		switch {
		case strings.HasPrefix(s, "/*"):
			i := strings.Index(s[2:], "*/")
			if i < 0 {
				return ""
			}
			s = s[2+i+2:]
		case strings.HasPrefix(s, "-- "), strings.HasPrefix(s, "#"):
			i := strings.IndexByte(s, '\n')
			if i < 0 {
				return ""
			}
			s = s[i+1:]
		default:
			return s
		}
	}
}

// noiseLen is how many leading bytes of s are blanks or opening
// parentheses (strings.TrimLeft with a cutset built a set on every call,
// a fifth of a joined statement's way through the joiner).
func noiseLen(s string) int {
	i := 0
	for i < len(s) {
		switch s[i] {
		case ' ', '\t', '\r', '\n', '(':
			i++
		default:
			return i
		}
	}
	return i
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
