package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/diagnose"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/report"
	"github.com/spf13/cobra"
)

func init() { registerConnecting(newCheckCmd) }

func newCheckCmd(secrets *collect.Secrets) *cobra.Command {
	var dsn, defaultsFile, format string
	var noDefaults bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "check --dsn DSN",
		Short: "Audit what a server offers gapscope: instrumentation, thread pool, timers, grants",
		Long: `check connects to a MySQL/MariaDB server and reports, each with evidence and the
SQL or option that fixes it: performance_schema on/off, missing consumers and
instruments, the wait timer, thread-pool tables, and gapscope's grants.

The DSN is go-sql-driver's form, user[:password]@tcp(host:port)/ ; or give
--defaults-file: a my.cnf read as the mysql client reads it ([client], [mysql]
and [gapscope] groups; host=localhost or no host means the Unix socket).
~/.my.cnf is read unless --no-defaults; the DSN's fields win over the file's.
The password may come from MYSQL_PWD. Credentials are never printed.`,
		Example: `  gapscope check --dsn 'monitor@tcp(db1:3306)/'
  MYSQL_PWD=secret gapscope check --dsn 'monitor@tcp(db1:3306)/' --format json
  gapscope check --defaults-file ~/.my.cnf`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			defaultsFile, err := resolveTarget(secrets, "check", dsn, defaultsFile, noDefaults)
			if err != nil {
				return err
			}
			if format != "text" && format != "json" {
				return usagef("--format must be text or json, not %q", format)
			}
			ctx, cancel := context.WithTimeout(c.Context(), timeout)
			defer cancel()
			rep, err := runCheck(ctx, secrets, dsn, defaultsFile)
			if err != nil {
				return err
			}
			if format == "json" {
				return writeCheckJSON(c.OutOrStdout(), rep)
			}
			return writeCheckText(c.OutOrStdout(), rep)
		},
	}
	cmd.Flags().StringVar(&dsn, "dsn", "", "server to check, e.g. 'user@tcp(host:3306)/' (password from MYSQL_PWD)")
	cmd.Flags().StringVar(&defaultsFile, "defaults-file", "", "my.cnf whose [client], [mysql] or [gapscope] group names the server (default ~/.my.cnf)")
	addNoDefaultsFlag(cmd.Flags(), &noDefaults)
	cmd.Flags().StringVar(&format, "format", "text", "output: text or json")
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "give up after this long")
	return cmd
}

// checkReport is what check prints: the server and the findings about what
// it offers gapscope.
type checkReport struct {
	Server   collect.ServerInfo `json:"server"`
	Findings []event.Finding    `json:"findings"`
}

// runCheck reads the server's capabilities and settings once and applies
// the check rules to them.
func runCheck(ctx context.Context, secrets *collect.Secrets, dsn, defaultsFile string) (checkReport, error) {
	cfg, err := secrets.Config(dsn, defaultsFile)
	if err != nil {
		return checkReport{}, err
	}
	db, err := secrets.OpenConfig(ctx, cfg)
	if err != nil {
		return checkReport{}, err
	}
	defer db.Close()
	caps, err := collect.GatherCapabilities(ctx, db)
	if err != nil {
		return checkReport{Server: caps.Server}, err
	}
	cores := 0
	if host, _, err := net.SplitHostPort(cfg.Addr); err == nil && collect.IsLocalHost(host) {
		cores = runtime.NumCPU()
	}
	w, err := diagnose.ServerWindow(ctx, db, caps, cores)
	if err != nil {
		return checkReport{Server: caps.Server}, err
	}
	rep := checkReport{Server: caps.Server, Findings: diagnose.Run(w, diagnose.CheckRules()...)}
	if rep.Findings == nil {
		rep.Findings = []event.Finding{}
	}
	return rep, nil
}

func writeCheckJSON(w io.Writer, rep checkReport) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

func writeCheckText(w io.Writer, rep checkReport) error {
	s := rep.Server
	fmt.Fprintf(w, "server:  %s %s (%s)\n", s.Flavor, s.Version, s.VersionComment)
	fmt.Fprintf(w, "user:    %s   uptime %ds\n", s.CurrentUser, s.UptimeS)
	fmt.Fprintf(w, "p_s:     %s   history %d/thread, history_long %d\n", onOff(s.PerformanceSchema), s.HistorySize, s.HistoryLongSize)
	if len(s.Timers) > 0 {
		fmt.Fprintf(w, "timers:  %s\n", timersText(s.Timers))
	}
	fmt.Fprintf(w, "threads: %s", s.ThreadHandling)
	if s.ThreadPool {
		fmt.Fprintf(w, " (pool size %d, extra_port %d, tables %s)", s.ThreadPoolSize, s.ExtraPort, presence(s.ThreadPoolTables))
	}
	fmt.Fprintln(w)
	if len(rep.Findings) == 0 {
		_, err := fmt.Fprintln(w, "\nno findings: this server gives gapscope everything it uses")
		return err
	}
	fmt.Fprintf(w, "\n%d findings:\n\n", len(rep.Findings))
	return report.WriteFindingsText(w, rep.Findings)
}

func timersText(t map[string]string) string {
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + t[k]
	}
	return strings.Join(parts, " ")
}

func onOff(b bool) string {
	if b {
		return "ON"
	}
	return "OFF"
}

func presence(b bool) string {
	if b {
		return "present"
	}
	return "absent"
}
