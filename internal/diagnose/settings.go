package diagnose

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Flavours as collect reports them.
const (
	FlavorMariaDB = "mariadb"
	FlavorMySQL   = "mysql"
	FlavorPercona = "percona"
)

// flavor returns w.Flavor, or infers it from the version variables when the
// caller left it empty (fixtures and older collectors).
func (w *Window) flavor() string {
	if w.Flavor != "" {
		return strings.ToLower(w.Flavor)
	}
	v := strings.ToLower(w.Version + " " + w.Vars["version"] + " " + w.Vars["version_comment"])
	switch {
	case strings.Contains(v, "mariadb"):
		return FlavorMariaDB
	case strings.Contains(v, "percona"):
		return FlavorPercona
	case strings.TrimSpace(v) != "":
		return FlavorMySQL
	}
	return ""
}

// varInt returns a numeric global variable.
func (w *Window) varInt(name string) (int64, bool) { return parseInt(w.Vars[name]) }

// statusInt returns a numeric status counter; SHOW GLOBAL STATUS spells
// names Capitalised, so the lookup ignores case.
func (w *Window) statusInt(name string) (int64, bool) {
	if v, ok := w.Status[name]; ok {
		return parseInt(v)
	}
	for k, v := range w.Status {
		if strings.EqualFold(k, name) {
			return parseInt(v)
		}
	}
	return 0, false
}

func parseInt(s string) (int64, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	return n, err == nil
}

func isOn(s string) bool {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "ON", "1", "YES", "TRUE":
		return true
	}
	return false
}

// varsWithPrefix returns the variables whose names start with prefix, for
// evidence.
func (w *Window) varsWithPrefix(prefix string) map[string]string {
	out := map[string]string{}
	for k, v := range w.Vars {
		if strings.HasPrefix(k, prefix) {
			out[k] = v
		}
	}
	return out
}

// pool describes the thread pool the settings configure. The MariaDB and
// Percona pools share their variables; MySQL Enterprise's plugin differs in
// names and units.
type pool struct {
	Enabled bool
	Flavor  string
	Size    int64
	// PerGroup is how many statements a group runs at once before newcomers
	// wait for a stall (MariaDB/Percona: oversubscribe+1; MySQL Enterprise:
	// thread_pool_max_active_query_threads, 0 = no hard limit, taken as 1
	// because the group still waits for the stall limit).
	PerGroup     int64
	StallLimitMS int64
	Settings     map[string]string
}

// Cap is the number of statements the whole pool runs before queueing.
func (p pool) Cap() int64 { return p.Size * p.PerGroup }

func (w *Window) pool() pool {
	p := pool{Flavor: w.flavor(), Settings: w.varsWithPrefix("thread_pool_")}
	if th, ok := w.Vars["thread_handling"]; ok {
		p.Settings["thread_handling"] = th
	}
	p.Size, _ = w.varInt("thread_pool_size")
	stall, _ := w.varInt("thread_pool_stall_limit")
	if p.Flavor == FlavorMySQL {
		// The Enterprise plugin exists only when loaded; its stall limit
		// counts 10 ms units.
		p.Enabled = p.Size > 0
		p.StallLimitMS = stall * 10
		p.PerGroup, _ = w.varInt("thread_pool_max_active_query_threads")
		p.PerGroup = max(p.PerGroup, 1)
		return p
	}
	p.Enabled = w.Vars["thread_handling"] == "pool-of-threads" && p.Size > 0
	p.StallLimitMS = stall
	over, _ := w.varInt("thread_pool_oversubscribe")
	p.PerGroup = over + 1
	return p
}

// implication says in one sentence what the pool settings mean for a
// group's capacity.
func (p pool) implication() string {
	if !p.Enabled {
		return "no thread pool is configured (one thread per connection)"
	}
	if p.Flavor == FlavorMySQL {
		return fmt.Sprintf("thread_pool_size=%d groups; a group runs %d statement(s) at once and starts another only after thread_pool_stall_limit=%d ms; %d in all",
			p.Size, p.PerGroup, p.StallLimitMS, p.Cap())
	}
	return fmt.Sprintf("thread_pool_size=%d x (thread_pool_oversubscribe=%d + 1) = %d active statements in all, %d per group; when a group's statements run long, new requests on its connections wait up to thread_pool_stall_limit=%d ms for another thread",
		p.Size, p.PerGroup-1, p.Cap(), p.PerGroup, p.StallLimitMS)
}

// sortedKeys returns the keys of m in order, for stable evidence.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
