package collect

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// Threads maps performance_schema THREAD_ID to PROCESSLIST_ID (the
// connection id a client sees in its handshake) for foreground threads.
func Threads(ctx context.Context, db queryer) (map[uint64]uint64, error) {
	conns, _, err := threadConns(ctx, db)
	return conns, err
}

// threadConns is Threads, and the threads whose client connected through
// the server's unix socket (CONNECTION_TYPE 'Socket'): no packet capture
// sees those, so their statements can only be the server's.
//
// A thread still in its handshake (no CONNECTION_TYPE yet) is left out:
// MariaDB reuses a cached thread's instrumentation for the next connection
// and, until the handshake ends, may show the new THREAD_ID beside the
// previous connection's PROCESSLIST_ID. Taken as read, that pair hands one
// connection's statements to another. A thread that lives past its
// handshake is read at the next look; one that does not is named from the
// wire like any thread that ended before it was read.
func threadConns(ctx context.Context, db queryer) (map[uint64]uint64, map[uint64]bool, error) {
	rows, err := db.QueryContext(ctx, Mark+" SELECT THREAD_ID, PROCESSLIST_ID, CONNECTION_TYPE FROM performance_schema.threads WHERE PROCESSLIST_ID IS NOT NULL AND "+settledThread)
	if err != nil {
		return nil, nil, fmt.Errorf("reading performance_schema.threads: %w", err)
	}
	defer rows.Close()
	conns, sockets := map[uint64]uint64{}, map[uint64]bool{}
	var tls []uint64 // threads of TLS connections: socket or TCP, the type does not say
	for rows.Next() {
		var tid, pid uint64
		var typ string
		if err := rows.Scan(&tid, &pid, &typ); err != nil {
			return nil, nil, fmt.Errorf("reading performance_schema.threads: %w", err)
		}
		conns[tid] = pid
		switch typ {
		case "Socket":
			sockets[tid] = true
		case "SSL/TLS":
			tls = append(tls, tid)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("reading performance_schema.threads: %w", err)
	}
	if len(tls) > 0 {
		tlsOverSocket(ctx, db, conns, tls, sockets) // a failure: they stay TCP's, joined from the wire if they are
	}
	return conns, sockets, nil
}

// settledThread is the condition on performance_schema.threads for a
// thread whose PROCESSLIST_ID is its own connection's (threadConns).
const settledThread = "CONNECTION_TYPE IS NOT NULL"

// tlsOverSocket adds to sockets the TLS threads whose client came through
// the unix socket: the processlist's HOST has no port for those (clients
// such as the mariadb CLI use TLS over the socket when the server offers it).
func tlsOverSocket(ctx context.Context, db queryer, conns map[uint64]uint64, threads []uint64, sockets map[uint64]bool) {
	ids := make([]string, 0, len(threads))
	byConn := make(map[uint64]uint64, len(threads))
	for _, t := range threads {
		ids = append(ids, fmt.Sprint(conns[t]))
		byConn[conns[t]] = t
	}
	rows, err := db.QueryContext(ctx, Mark+" SELECT ID, HOST FROM information_schema.PROCESSLIST WHERE ID IN ("+strings.Join(ids, ",")+")")
	if err != nil {
		return
	}
	defer rows.Close()
	for rows.Next() {
		var id uint64
		var host string
		if rows.Scan(&id, &host) == nil && host != "" && !strings.Contains(host, ":") {
			sockets[byConn[id]] = true
		}
	}
}

// OwnThreadID returns the performance_schema THREAD_ID of the connection
// conn is using (MariaDB has no PS_CURRENT_THREAD_ID()).
func OwnThreadID(ctx context.Context, conn queryer) (uint64, error) {
	var tid uint64
	err := conn.QueryRowContext(ctx, Mark+" SELECT THREAD_ID FROM performance_schema.threads WHERE PROCESSLIST_ID = CONNECTION_ID()").Scan(&tid)
	if err != nil {
		return 0, fmt.Errorf("reading own thread id: %w", err)
	}
	return tid, nil
}

// ProcesslistReader reads the processlist repeatedly, learning the
// server's columns on its first read only: that lookup (information_schema.
// COLUMNS) costs the server more than the processlist itself.
type ProcesslistReader struct {
	query string
}

// Read returns the processlist without gapscope's own connections.
func (r *ProcesslistReader) Read(ctx context.Context, db queryer) ([]Process, error) {
	if r.query == "" {
		cols, err := LoadColumns(ctx, db, "information_schema", "PROCESSLIST")
		if err != nil {
			return nil, err
		}
		timeExpr := "TIME * 1000"
		if cols.Has("PROCESSLIST", "TIME_MS") {
			timeExpr = "TIME_MS"
		}
		r.query = Mark + " SELECT ID, USER, HOST, DB, COMMAND, " + timeExpr + ", STATE, INFO FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID()"
	}
	rows, err := db.QueryContext(ctx, r.query)
	if err != nil {
		return nil, fmt.Errorf("reading processlist: %w", err)
	}
	defer rows.Close()
	var out []Process
	for rows.Next() {
		p, err := scanProcess(rows)
		if err != nil {
			return nil, fmt.Errorf("reading processlist: %w", err)
		}
		if strings.Contains(p.Info, Mark) {
			continue
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading processlist: %w", err)
	}
	return out, nil
}

func scanProcess(rows *sql.Rows) (Process, error) {
	var p Process
	var user, host, db, cmd, state, info sql.NullString
	var timeMS sql.NullFloat64
	if err := rows.Scan(&p.ID, &user, &host, &db, &cmd, &timeMS, &state, &info); err != nil {
		return p, err
	}
	p.User, p.Host, p.DB, p.Command = user.String, host.String, db.String, cmd.String
	p.State, p.Info = state.String, info.String
	p.TimeMS = int64(timeMS.Float64)
	return p, nil
}
