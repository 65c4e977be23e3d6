// Package store keeps statements, samples, findings, runs, probe results and
// plans in an embedded SQLite file (modernc.org/sqlite, pure Go). The schema
// grows only by append-only numbered migrations; writes are batched into
// transactions; the file is in WAL mode, so a process killed mid-write
// leaves a store that opens and reads up to the last committed batch.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// ErrNewerSchema is returned when the file was written by a newer gapscope
// whose migrations this one does not know.
var ErrNewerSchema = errors.New("store: schema is newer than this gapscope")

// Store is an open store file. Its methods are safe for concurrent use.
type Store struct {
	db   *sql.DB
	path string
}

// Open opens (creating if needed) the store at path and applies pending
// migrations.
func Open(ctx context.Context, path string) (*Store, error) {
	if path == "" {
		return nil, errors.New("opening store: empty path")
	}
	db, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		return nil, fmt.Errorf("opening store %s: %w", path, err)
	}
	s := &Store{db: db, path: path}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		if strings.Contains(err.Error(), "file is not a database") {
			// SQLite's own words name neither the file nor what it
			// expected; the file is left untouched.
			return nil, fmt.Errorf("opening store %s: not a gapscope store (not an SQLite database; --store takes a file written by watch, probe or plans --store)", path)
		}
		return nil, fmt.Errorf("opening store %s: %w", path, err)
	}
	return s, nil
}

// dsn sets, on every pooled connection: WAL (readers never block the
// writer; a kill loses at most the open transaction), synchronous=NORMAL
// (durable across process crashes, which is what a kill is; only a power
// loss may drop the last commits), a busy timeout instead of SQLITE_BUSY
// errors, and IMMEDIATE transactions so two writers queue instead of
// deadlocking on lock upgrade.
func dsn(path string) string {
	// A file: URI, so '%', '?' and '#' in the path are escaped.
	path = strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	return "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=busy_timeout(10000)&_txlock=immediate"
}

// Close closes the store.
func (s *Store) Close() error { return s.db.Close() }

// Path is the file the store lives in.
func (s *Store) Path() string { return s.path }

// Check runs SQLite's integrity check and returns its complaint, if any.
func (s *Store) Check(ctx context.Context) error {
	var res string
	if err := s.db.QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&res); err != nil {
		return fmt.Errorf("checking store %s: %w", s.path, err)
	}
	if res != "ok" {
		return fmt.Errorf("store %s is damaged: %s", s.path, res)
	}
	return nil
}

// Run is one invocation of a gapscope command that wrote to the store.
type Run struct {
	ID      int64  `json:"id"`
	StartUS int64  `json:"start_us"`
	EndUS   int64  `json:"end_us"` // 0 while running, or when the process was killed
	Command string `json:"command"`
	DSN     string `json:"dsn"`
	Notes   string `json:"notes,omitempty"`
}

// StartRun records the start of a run and returns its id. dsn should come
// redacted; any password left in it is removed anyway.
func (s *Store) StartRun(ctx context.Context, command, dsn string, startUS int64) (int64, error) {
	res, err := s.db.ExecContext(ctx, "INSERT INTO runs (start_us, command, dsn) VALUES (?, ?, ?)", startUS, command, scrubDSN(dsn))
	if err != nil {
		return 0, fmt.Errorf("recording run start: %w", err)
	}
	return res.LastInsertId()
}

// EndRun records the end of a run, with optional notes (drops, degraded
// modes).
func (s *Store) EndRun(ctx context.Context, id, endUS int64, notes string) error {
	if _, err := s.db.ExecContext(ctx, "UPDATE runs SET end_us = ?, notes = ? WHERE id = ?", endUS, notes, id); err != nil {
		return fmt.Errorf("recording run end: %w", err)
	}
	return nil
}

// Runs returns every run, oldest first.
func (s *Store) Runs(ctx context.Context) ([]Run, error) {
	rows, err := s.db.QueryContext(ctx, "SELECT id, start_us, end_us, command, dsn, notes FROM runs ORDER BY id")
	if err != nil {
		return nil, fmt.Errorf("reading runs: %w", err)
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		var r Run
		if err := rows.Scan(&r.ID, &r.StartUS, &r.EndUS, &r.Command, &r.DSN, &r.Notes); err != nil {
			return nil, fmt.Errorf("reading runs: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// scrubDSN removes the password of a go-sql-driver DSN
// ([user[:password]@][net[(addr)]]/dbname[?params]), which the driver
// finds between the first ':' and the last '@' before the last '/'.
func scrubDSN(dsn string) string {
	slash := strings.LastIndex(dsn, "/")
	if slash < 0 {
		slash = len(dsn)
	}
	at := strings.LastIndex(dsn[:slash], "@")
	if at < 0 {
		return dsn
	}
	colon := strings.Index(dsn[:at], ":")
	if colon < 0 {
		return dsn
	}
	return dsn[:colon] + ":***" + dsn[at:]
}
