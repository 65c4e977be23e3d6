package sandbox

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of /proc/PID/stat's CPU times (USER_HZ, 100 on
// every Linux architecture Go supports).
const clockTick = 10 * time.Millisecond

// CPU returns the CPU time (user + system, all threads) the server has used
// since it started. Unlike its throughput, which depends on how much of the
// machine other processes leave it, its CPU per unit of work is a property
// of the server and its settings: overhead measurements on a shared host
// compare that.
func (inst *Instance) CPU() (time.Duration, error) {
	if inst.PID <= 0 {
		return 0, errors.New("sandbox: CPU: the server is not running")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", inst.PID))
	if err != nil {
		return 0, fmt.Errorf("sandbox: reading the server's CPU time: %w", err)
	}
	return parseStatCPU(string(b))
}

// parseStatCPU reads utime and stime, fields 14 and 15 of /proc/PID/stat,
// counted after the command name in parentheses (which may hold spaces).
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("sandbox: /proc stat without a command name")
	}
	f := strings.Fields(stat[i+1:]) // f[0] is field 3, the state
	if len(f) < 13 {
		return 0, fmt.Errorf("sandbox: /proc stat has %d fields after the name, want 13 or more", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("sandbox: /proc stat CPU field %q: %w", s, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * clockTick, nil
}
