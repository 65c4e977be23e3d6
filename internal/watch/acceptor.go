package watch

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gapscope/gapscope/internal/collect"
)

// acceptWatch tells, for a server on this host, whether a client connected
// lately without asking the server. MariaDB's main thread accepts every
// connection, over TCP and the unix socket alike, and sleeps otherwise:
// the count of times it ran (the third field of its
// /proc/PID/task/PID/schedstat) moves when, and only when, clients
// connect (one or two runs each on MariaDB 10.11; still over seconds
// idle). A client the wire cannot see (a unix socket) shows here at once,
// where the server's counters show it at the next status read only.
type acceptWatch struct {
	path    string
	runs    uint64
	read    bool
	movedAt time.Time
}

// acceptGrace is how long after a connection the running scans keep their
// pace whatever the wire says: a new client's first statements are seen
// running even when the wire cannot see them.
const acceptGrace = time.Second

// openAcceptWatch finds the server's main thread from its pid file; nil
// when the server's process cannot be read (then nothing gates the scans).
func openAcceptWatch(ctx context.Context, db *sql.DB) (*acceptWatch, error) {
	var pidFile, dataDir string
	if err := db.QueryRowContext(ctx, collect.Mark+" SELECT @@pid_file, @@datadir").Scan(&pidFile, &dataDir); err != nil {
		return nil, fmt.Errorf("reading the server's pid file name: %w", err)
	}
	if !filepath.IsAbs(pidFile) {
		pidFile = filepath.Join(dataDir, pidFile)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return nil, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return nil, fmt.Errorf("%s holds no pid", pidFile)
	}
	a := &acceptWatch{path: fmt.Sprintf("/proc/%d/task/%d/schedstat", pid, pid)}
	if _, err := a.runCount(); err != nil {
		return nil, err
	}
	return a, nil
}

// runCount reads how many times the main thread ran.
func (a *acceptWatch) runCount() (uint64, error) {
	b, err := os.ReadFile(a.path)
	if err != nil {
		return 0, err
	}
	f := bytes.Fields(b)
	if len(f) < 3 {
		return 0, fmt.Errorf("%s: %q", a.path, b)
	}
	return strconv.ParseUint(string(f[2]), 10, 64)
}

// recent reports whether a client connected within acceptGrace of now, or
// whether it cannot tell (the file unreadable: the server restarted).
func (a *acceptWatch) recent(now time.Time) bool {
	runs, err := a.runCount()
	if err != nil {
		return true
	}
	if a.read && runs != a.runs {
		a.movedAt = now
	}
	a.runs, a.read = runs, true
	return now.Sub(a.movedAt) < acceptGrace
}
