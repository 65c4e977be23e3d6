package probe

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Cap is a limit on how many statements a server runs at once.
type Cap struct {
	// Variable names the setting that imposes it (a formula of settings
	// for the thread pool's active limit; "cpu_count" for the cores).
	Variable string `json:"variable"`
	Threads  int64  `json:"threads"`
	// Formula shows how Threads follows from the settings, with values.
	Formula string `json:"formula"`
	// Config is false for the CPU count: a property of the host, not a
	// setting someone can change with SET GLOBAL.
	Config bool `json:"config"`
}

// Names of the caps that are not a single variable.
const (
	CapPoolActive = "thread_pool_size*(thread_pool_oversubscribe+1)"
	CapCPU        = "cpu_count"
)

// CapsFromSettings lists the caps in force given global variables (names
// in lower case, as SHOW GLOBAL VARIABLES prints them) and the server
// host's CPU count (0 when unknown).
func CapsFromSettings(vars map[string]string, cores int) []Cap {
	var caps []Cap
	num := func(name string) (int64, bool) {
		n, err := strconv.ParseInt(strings.TrimSpace(vars[name]), 10, 64)
		return n, err == nil
	}
	if vars["thread_handling"] == "pool-of-threads" {
		caps = append(caps, poolCaps(num)...)
	}
	if n, ok := num("innodb_thread_concurrency"); ok && n > 0 {
		caps = append(caps, Cap{Variable: "innodb_thread_concurrency", Threads: n, Config: true,
			Formula: fmt.Sprintf("innodb_thread_concurrency=%d threads inside InnoDB at once", n)})
	}
	if n, ok := num("max_connections"); ok && n > 0 {
		caps = append(caps, Cap{Variable: "max_connections", Threads: n, Config: true,
			Formula: fmt.Sprintf("max_connections=%d", n)})
	}
	if cores > 0 {
		caps = append(caps, Cap{Variable: CapCPU, Threads: int64(cores), Config: false,
			Formula: fmt.Sprintf("%d CPU cores on the server host", cores)})
	}
	return caps
}

// poolCaps are the MariaDB/Percona thread pool's two limits: the active
// statements per group before newcomers wait for a stall
// (oversubscribe+1, times the groups), and the hard limit on pool threads.
// While requests queue, each group keeps one thread as its listener, so
// thread_pool_max_threads=8 with 2 groups ran 6 statements at once here
// (MariaDB 10.11, SELECT SLEEP load).
func poolCaps(num func(string) (int64, bool)) []Cap {
	size, ok := num("thread_pool_size")
	if !ok || size <= 0 {
		return nil
	}
	var caps []Cap
	if over, ok := num("thread_pool_oversubscribe"); ok && over >= 0 {
		caps = append(caps, Cap{Variable: CapPoolActive, Threads: size * (over + 1), Config: true,
			Formula: fmt.Sprintf("thread_pool_size=%d x (thread_pool_oversubscribe=%d + 1)", size, over)})
	}
	if mt, ok := num("thread_pool_max_threads"); ok && mt > size {
		caps = append(caps, Cap{Variable: "thread_pool_max_threads", Threads: mt - size, Config: true,
			Formula: fmt.Sprintf("thread_pool_max_threads=%d - %d listener threads (one per group, thread_pool_size=%d)", mt, size, size)})
	}
	return caps
}

// DefaultTolerance is how far (relative to the cap) a knee may lie from a
// cap and still be tied to it.
const DefaultTolerance = 0.20

// MatchCap returns the cap nearest to the knee (relative distance) within
// tolerance; on a tie a configured cap wins over the CPU count, because it
// is the one a user can change.
func MatchCap(knee float64, caps []Cap, tolerance float64) (Cap, bool) {
	var best Cap
	bestDist := math.Inf(1)
	for _, c := range caps {
		if c.Threads <= 0 {
			continue
		}
		d := math.Abs(knee-float64(c.Threads)) / float64(c.Threads)
		if d > tolerance {
			continue
		}
		if d < bestDist-1e-9 || (math.Abs(d-bestDist) <= 1e-9 && c.Config && !best.Config) {
			best, bestDist = c, d
		}
	}
	return best, !math.IsInf(bestDist, 1)
}
