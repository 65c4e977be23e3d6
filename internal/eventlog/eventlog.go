// Package eventlog is a line-oriented log file bounded by size: once the
// file reaches its limit it is rotated the way log rotators leave files
// (F.jsonl becomes F.1.jsonl, F.1.jsonl becomes F.2.jsonl, ..., the oldest
// beyond Keep removed), and Reopen starts a new file after an outside
// rotator (logrotate without copytruncate) moved it away, as a daemon does
// on SIGHUP. Files are cut only after a newline, so each holds whole lines.
package eventlog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// DefaultKeep is how many rotated files are kept when Options.Keep is 0.
const DefaultKeep = 5

// Options bound the log.
type Options struct {
	// MaxSize rotates the file once a write would take it beyond this many
	// bytes (0: never; the file grows without bound). A file exceeds it by
	// at most the part of one write after its last newline.
	MaxSize int64
	// Keep is how many rotated files (F.1 ... F.Keep) are kept beside the
	// current one (DefaultKeep if 0; negative: none).
	Keep int
}

// File is an open log. Its methods are safe for concurrent use.
type File struct {
	path string
	opts Options
	mu   sync.Mutex
	f    *os.File
	size int64
}

// Create creates (truncating) the log at path.
func Create(path string, opts Options) (*File, error) {
	if opts.Keep == 0 {
		opts.Keep = DefaultKeep
	}
	if opts.MaxSize < 0 {
		return nil, fmt.Errorf("event log %s: negative size limit %d", path, opts.MaxSize)
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("creating event log: %w", err)
	}
	return &File{path: path, opts: opts, f: f}, nil
}

// Path is the current file's name.
func (l *File) Path() string { return l.path }

// Write appends p. When the file would exceed MaxSize, p up to its last
// newline goes to the current file, the file is rotated, and the rest
// starts the new one.
func (l *File) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return 0, errors.New("event log closed")
	}
	if l.opts.MaxSize <= 0 || l.size+int64(len(p)) <= l.opts.MaxSize {
		return l.write(p)
	}
	cut := bytes.LastIndexByte(p, '\n') + 1
	if cut == 0 {
		// No line ends in p: it continues the file's last line, which a
		// rotation must not split.
		return l.write(p)
	}
	n, err := l.write(p[:cut])
	if err != nil {
		return n, err
	}
	if err := l.rotate(); err != nil {
		return n, err
	}
	k, err := l.write(p[cut:])
	return n + k, err
}

func (l *File) write(p []byte) (int, error) {
	n, err := l.f.Write(p)
	l.size += int64(n)
	return n, err
}

// rotate shifts F.i to F.i+1 from the oldest down, F to F.1, and creates
// a new F.
func (l *File) rotate() error {
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("rotating event log %s: %w", l.path, err)
	}
	l.f = nil
	if l.opts.Keep > 0 {
		if err := os.Remove(RotatedName(l.path, l.opts.Keep)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("rotating event log: %w", err)
		}
		for i := l.opts.Keep - 1; i >= 1; i-- {
			if err := os.Rename(RotatedName(l.path, i), RotatedName(l.path, i+1)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("rotating event log: %w", err)
			}
		}
		if err := os.Rename(l.path, RotatedName(l.path, 1)); err != nil {
			return fmt.Errorf("rotating event log: %w", err)
		}
	}
	return l.open(os.O_TRUNC)
}

// open opens the current file for appending, created if missing; flag
// adds os.O_TRUNC or nothing.
func (l *File) open(flag int) error {
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND|flag, 0o644)
	if err != nil {
		return fmt.Errorf("opening event log: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("opening event log: %w", err)
	}
	l.f, l.size = f, st.Size()
	return nil
}

// Reopen closes the file and opens the path again, appending: after an
// outside rotator renamed the file, writes go to a new one under the
// configured name (SIGHUP).
func (l *File) Reopen() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return errors.New("event log closed")
	}
	err := l.f.Close()
	l.f = nil
	if oerr := l.open(0); oerr != nil {
		return errors.Join(err, oerr)
	}
	return err
}

// Close closes the file.
func (l *File) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// RotatedName is the name of the i-th rotated file of path: the number
// before the extension (events.jsonl: events.1.jsonl), so that the files
// still read as what they are.
func RotatedName(path string, i int) string {
	ext := filepath.Ext(path)
	if ext == "" || strings.Contains(ext, string(filepath.Separator)) {
		return fmt.Sprintf("%s.%d", path, i)
	}
	return fmt.Sprintf("%s.%d%s", strings.TrimSuffix(path, ext), i, ext)
}
