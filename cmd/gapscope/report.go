package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gapscope/gapscope/internal/overhead"
	"github.com/gapscope/gapscope/internal/report"
	"github.com/gapscope/gapscope/internal/store"
	"github.com/spf13/cobra"
)

func init() { register(newReportCmd) }

type reportFlags struct {
	storePath, out, title string
	events                []string
	run                   int64
}

func newReportCmd() *cobra.Command {
	var f reportFlags
	cmd := &cobra.Command{
		Use:   "report --store FILE.db | --events FILE.jsonl [-o report.html]",
		Short: "Write a self-contained HTML report (SVG charts, no network) from a store",
		Long: `report reads what probe, watch, overhead and plans recorded in a store and
writes one HTML file that needs nothing else: inline CSS and SVG, no script,
nothing fetched. Sections appear when their data is there:
  findings            each with its evidence and fix
  canary              latency max/avg/median (log axis) beside Threads_connected
                      and Threads_running, the concurrency knee, latency against
                      Threads_running
  where the time went the five parts per digest (top 10), queue wait per
                      thread-pool group over time
  overhead            throughput ratio per instrumentation setting, with intervals
  plan history        plans caught per digest, changes marked`,
		Example: `  gapscope probe --dsn 'monitor@tcp(db1:3306)/' --store probe.db
  gapscope report --store probe.db -o probe.html
  gapscope report --store watch.db --run 3 -o - > run3.html`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if f.storePath == "" && len(f.events) == 0 {
				return usagef("report needs --store FILE.db or --events FILE.jsonl")
			}
			if f.out == "" {
				return usagef("-o must name a file, or - for standard output")
			}
			if f.run < 0 {
				return usagef("--run must be a run id (see the runs in the report), not %d", f.run)
			}
			return runReport(c.Context(), c.OutOrStdout(), c.ErrOrStderr(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.storePath, "store", "", "store written by probe, watch, overhead or plans (--store of those commands)")
	fl.StringVarP(&f.out, "output", "o", "report.html", "HTML file to write, - for standard output")
	fl.StringSliceVar(&f.events, "events", nil, "statement events (JSON lines of watch/analyze --events) to chart, repeatable")
	fl.Int64Var(&f.run, "run", 0, "only this run (default: every run in the store)")
	fl.StringVar(&f.title, "title", "", "page title (default: gapscope report: FILE)")
	return cmd
}

func runReport(ctx context.Context, stdout, errOut io.Writer, f reportFlags) error {
	data := &report.HTMLData{Title: f.title, Generated: time.Now()}
	if f.storePath != "" {
		if err := loadStore(ctx, data, f); err != nil {
			return err
		}
	}
	if len(f.events) > 0 {
		if err := loadEvents(data, f.events, errOut); err != nil {
			return err
		}
	}
	if data.Title == "" {
		data.Title = "gapscope report: " + filepath.Base(data.Source)
	}
	if f.out == "-" {
		return report.WriteHTML(stdout, data)
	}
	return writeFileAtomic(f.out, func(w io.Writer) error { return report.WriteHTML(w, data) })
}

func loadStore(ctx context.Context, data *report.HTMLData, f reportFlags) error {
	// store.Open creates missing files: a mistyped path must not become an
	// empty report.
	if _, err := os.Stat(f.storePath); err != nil {
		return fmt.Errorf("reading store: %w", err)
	}
	st, err := store.Open(ctx, f.storePath)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := report.LoadStore(ctx, st, f.storePath, f.run, data); err != nil {
		return err
	}
	data.Overhead, err = overhead.StoredReport(ctx, st, f.run)
	return err
}

// loadEvents adds the statements of JSON-lines event files to the
// statement charts.
func loadEvents(data *report.HTMLData, paths []string, errOut io.Writer) error {
	if data.Statements == nil {
		data.Statements = report.NewStatementSummary()
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
func readEventFile(path string, sum *report.StatementSummary) (string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("reading events: %w", err)
	}
	defer fh.Close()
	read, err := report.ReadEvents(fh, sum.Add)
	var bad *report.LineError
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

// writeFileAtomic writes through a temporary file beside path and renames
// it into place, so a failed or interrupted report never leaves half a
// file where the last good one was.
func writeFileAtomic(path string, write func(io.Writer) error) error {
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
