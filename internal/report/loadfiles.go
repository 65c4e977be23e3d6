package report

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// LoadEvents adds the statements of JSON-lines event files to the
// statement charts.
func LoadEvents(data *HTMLData, paths []string, errOut io.Writer) error {
	if data.Statements == nil {
		data.Statements = NewStatementSummary()
	}
	for _, p := range paths {
		note, err := readEventFile(p, data.Statements)
		if err != nil {
			return err
		}
		if note != "" {
			fmt.Fprintln(errOut, "note:", note)
			data.Notes = append(data.Notes, note)
		}
	}
	data.Source = strings.TrimPrefix(data.Source+", "+filepath.Base(paths[0]), ", ")
	if len(paths) > 1 {
		data.Source += fmt.Sprintf(" and %d more", len(paths)-1)
	}
	return nil
}

// readEventFile adds the statements of one events file to sum and returns
// a note when its last line was torn ("" when not).
func readEventFile(path string, sum *StatementSummary) (string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("reading events: %w", err)
	}
	defer fh.Close()
	read, err := ReadEvents(fh, sum.Add)
	var bad *LineError
	if errors.As(err, &bad) {
		return "", fmt.Errorf("reading events %s:%d: %w", path, bad.Line, bad.Err)
	}
	if err != nil {
		return "", fmt.Errorf("reading events %s: %w", path, err)
	}
	if read.Statements == 0 {
		// Empty, or one unterminated line of something else (read as a
		// torn tail): a report from it would chart nothing and say nothing.
		return "", fmt.Errorf("%s holds no statement event (%d bytes unreadable): report reads the JSON lines written by watch, analyze or digest --events", path, read.TornBytes)
	}
	return read.TornNote(path), nil
}

// WriteFileAtomic writes through a temporary file beside path and renames
// it into place, so a failed or interrupted report never leaves half a
// file where the last good one was.
func WriteFileAtomic(path string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing left to remove
	if err := write(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil && !errors.Is(err, fs.ErrPermission) {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
