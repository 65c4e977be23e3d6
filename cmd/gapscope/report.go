package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
		if err := report.LoadEvents(data, f.events, errOut); err != nil {
			return err
		}
	}
	if data.Title == "" {
		data.Title = "gapscope report: " + filepath.Base(data.Source)
	}
	if f.out == "-" {
		return report.WriteHTML(stdout, data)
	}
	return report.WriteFileAtomic(f.out, func(w io.Writer) error { return report.WriteHTML(w, data) })
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
