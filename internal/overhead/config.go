// Package overhead measures what observability costs: it runs an OLTP
// workload under each instrumentation setting (performance_schema off,
// default, everything on; innodb_metrics; optimizer_trace; gapscope watch
// itself) in rotated rounds and compares throughput with paired rounds,
// saying whether each difference stands above the noise (the overhead case of docs/field-reports.md).
package overhead

import (
	"context"
	"fmt"
	"strings"

	"github.com/gapscope/gapscope/internal/collect"
)

// PerfSchema is the performance_schema state a configuration needs. It is
// a startup option: changing it needs a server restart.
type PerfSchema int

const (
	// PSAny keeps whatever the server runs with.
	PSAny PerfSchema = iota
	PSOn
	PSOff
)

// Config is one instrumentation setting: how to apply it on top of the
// server's original settings and how to restore them. Restore must be
// safe to call when Apply failed half way, or never ran.
type Config struct {
	Name    string
	Summary string
	// PerfSchema is the startup state it needs; a server in another state
	// must be restarted (only sandboxes are).
	PerfSchema PerfSchema
	// Startup, when set, are the server options that put this setting in
	// place as a DBA leaves it in my.cnf. Some settings only take full
	// effect at startup: instruments enabled at runtime do not reach the
	// mutexes, rwlocks and other objects the server created when it
	// started, which is where most of "everything on" costs. A sandbox is
	// restarted with these options (same data directory, preload and
	// warm-up after the start); on a server gapscope may not restart, Apply
	// sets the same at runtime and the row says it understates.
	Startup []string
	// Changes reports whether Apply changes server settings (a server
	// that is not a sandbox needs the user's consent).
	Changes bool
	Apply   func(ctx context.Context, s *session) error
	Restore func(ctx context.Context, s *session) error
}

// NeedsRestart reports whether the config needs a restart on a server
// whose performance_schema is on (or off).
func (c Config) NeedsRestart(psOn bool) bool {
	return (c.PerfSchema == PSOn && !psOn) || (c.PerfSchema == PSOff && psOn)
}

// Configs lists the known configurations in their canonical order.
func Configs() []Config {
	return []Config{
		{Name: "ps-off", Summary: "performance_schema=OFF (startup option: restart)", PerfSchema: PSOff, Apply: noop, Restore: noop},
		{Name: "ps-default", Summary: "performance_schema=ON with its default instruments and consumers", PerfSchema: PSOn, Apply: noop, Restore: noop},
		{Name: "ps-all", Summary: "every instrument enabled and timed, every consumer on, as set in my.cnf: " + strings.Join(PSAllStartup, " ") +
			" (sandbox restart; at runtime where restarts are not allowed)", PerfSchema: PSOn, Startup: PSAllStartup, Changes: true,
			Apply: func(ctx context.Context, s *session) error { return psAll(ctx, s, true) }, Restore: restorePS},
		{Name: "ps-all-runtime", Summary: "the same turned on at runtime: UPDATE setup_instruments SET ENABLED='YES', TIMED='YES' and every setup_consumers row on " +
			"(objects the server created at startup stay uninstrumented)", PerfSchema: PSOn, Changes: true,
			Apply: func(ctx context.Context, s *session) error { return psAll(ctx, s, true) }, Restore: restorePS},
		{Name: "innodb-metrics-all", Summary: "SET GLOBAL innodb_monitor_enable='all'", Changes: true, Apply: innodbMetricsAll,
			Restore: func(ctx context.Context, s *session) error {
				return restoreInnoDBMetrics(ctx, s.db, s.orig.InnoDBMetrics)
			}},
		{Name: "optimizer-trace", Summary: "SET GLOBAL optimizer_trace='enabled=on' (new sessions inherit it; the workload reconnects)", Changes: true,
			Apply: optimizerTraceOn, Restore: optimizerTraceRestore},
		{Name: "gapscope-watch", Summary: "gapscope watch running in-process: capture on the wire + performance_schema polling (enables the statement consumers it needs)",
			PerfSchema: PSOn, Changes: true, Apply: startWatch, Restore: stopWatch},
	}
}

// PSAllStartup are the options that start a server with every instrument
// enabled and timed and every consumer on.
var PSAllStartup = append([]string{"--performance-schema-instrument=%=ON"}, consumerOptions(
	"events-stages-current", "events-stages-history", "events-stages-history-long",
	"events-statements-current", "events-statements-history", "events-statements-history-long",
	"events-transactions-current", "events-transactions-history", "events-transactions-history-long",
	"events-waits-current", "events-waits-history", "events-waits-history-long",
	"global-instrumentation", "thread-instrumentation", "statements-digest")...)

func consumerOptions(names ...string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "--performance-schema-consumer-" + n + "=ON"
	}
	return out
}

// ParseConfigs returns the configs named in a comma-separated list, in
// the list's order; the first is the baseline.
func ParseConfigs(list string) ([]Config, error) {
	all := Configs()
	var out []Config
	seen := map[string]bool{}
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		c, ok := lookup(all, name)
		if !ok {
			return nil, fmt.Errorf("unknown configuration %q (known: %s)", name, strings.Join(Names(all), ", "))
		}
		if seen[name] {
			return nil, fmt.Errorf("configuration %q listed twice", name)
		}
		seen[name] = true
		out = append(out, c)
	}
	if len(out) < 2 {
		return nil, fmt.Errorf("need at least two configurations (a baseline first, then what to compare), got %d", len(out))
	}
	return out, nil
}

func lookup(all []Config, name string) (Config, bool) {
	for _, c := range all {
		if c.Name == name {
			return c, true
		}
	}
	return Config{}, false
}

// Names returns the configs' names.
func Names(cs []Config) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return out
}

func noop(context.Context, *session) error { return nil }

// psAll turns every instrument and consumer on; timed also times them all.
func psAll(ctx context.Context, s *session, timed bool) error {
	set := "ENABLED = 'YES'"
	if timed {
		set += ", TIMED = 'YES'"
	}
	for _, q := range []string{"UPDATE performance_schema.setup_instruments SET " + set,
		"UPDATE performance_schema.setup_consumers SET ENABLED = 'YES'"} {
		if _, err := s.db.ExecContext(ctx, collect.Mark+" "+q); err != nil {
			return fmt.Errorf("enabling every instrument and consumer: %w", err)
		}
	}
	return nil
}

func restorePS(ctx context.Context, s *session) error {
	if err := restoreInstruments(ctx, s.db, s.orig.Instruments); err != nil {
		return err
	}
	return restoreConsumers(ctx, s.db, s.orig.Consumers)
}

func innodbMetricsAll(ctx context.Context, s *session) error {
	if _, err := s.db.ExecContext(ctx, collect.Mark+" SET GLOBAL innodb_monitor_enable = 'all'"); err != nil {
		return fmt.Errorf("enabling every INNODB_METRICS counter: %w", err)
	}
	return nil
}

func optimizerTraceOn(ctx context.Context, s *session) error {
	if _, err := s.db.ExecContext(ctx, collect.Mark+" SET GLOBAL optimizer_trace = 'enabled=on'"); err != nil {
		return fmt.Errorf("enabling optimizer_trace: %w", err)
	}
	return nil
}

func optimizerTraceRestore(ctx context.Context, s *session) error {
	if _, err := s.db.ExecContext(ctx, collect.Mark+" SET GLOBAL optimizer_trace = ?", s.orig.OptimizerTrace); err != nil {
		return fmt.Errorf("restoring optimizer_trace: %w", err)
	}
	return nil
}
