package diagnose

import (
	"context"
	"database/sql"
	"strings"

	"github.com/gapscope/gapscope/internal/collect"
)

// ServerWindow fills the configuration half of a Window from a live server
// through collect's readers (gather, then decide: the rules stay pure).
// caps is what collect.GatherCapabilities read; cores is the server host's
// CPU count when known (0 otherwise). Statements are the caller's to add.
func ServerWindow(ctx context.Context, db *sql.DB, caps collect.Capabilities, cores int) (*Window, error) {
	vars, err := collect.GlobalVariables(ctx, db)
	if err != nil {
		return nil, err
	}
	status, err := collect.GlobalStatus(ctx, db)
	if err != nil {
		return nil, err
	}
	w := CapabilitiesWindow(caps, vars, status, cores)
	if caps.Server.ThreadPoolTables {
		if groups, err := collect.ThreadPoolGroups(ctx, db); err == nil {
			w.PoolGroups = PoolGroupsFrom(groups)
		}
	}
	return w, nil
}

// CapabilitiesWindow is the configuration half of a Window from what
// collect read: the capabilities, global variables and status.
func CapabilitiesWindow(caps collect.Capabilities, vars, status map[string]string, cores int) *Window {
	server := caps.Server
	return &Window{Vars: lowerKeys(vars), Status: status, Flavor: caps.Server.Flavor, Version: caps.Server.Version,
		Cores: cores, Consumers: caps.Consumers, Instruments: caps.Instruments, Grants: caps.Grants,
		Server: &server, PoolTables: caps.PoolTables, SettingsSource: "server"}
}

// PoolGroupsFrom converts collect's thread-pool rows.
func PoolGroupsFrom(groups []collect.PoolGroup) []PoolGroup {
	out := make([]PoolGroup, 0, len(groups))
	for _, g := range groups {
		out = append(out, PoolGroup{GroupID: g.GroupID, Connections: g.Connections, Threads: g.Threads,
			ActiveThreads: g.ActiveThreads, QueueLength: g.QueueLength, Stalled: g.IsStalled})
	}
	return out
}

func lowerKeys(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[strings.ToLower(k)] = v
	}
	return out
}
