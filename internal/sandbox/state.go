package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// StateFile is the file in a persistent sandbox's Dir that describes it.
const StateFile = "sandbox.json"

// ErrNotRunning is returned by LoadState when a dir holds no live sandbox.
var ErrNotRunning = errors.New("sandbox: no running sandbox there")

type state struct {
	PID       int    `json:"pid"`
	Port      int    `json:"port"`
	ExtraPort int    `json:"extra_port,omitempty"`
	Socket    string `json:"socket"`
	DataDir   string `json:"datadir"`
	ErrorLog  string `json:"error_log"`
	Flavor    string `json:"flavor"`
}

func (inst *Instance) saveState() error {
	b, err := json.MarshalIndent(state{inst.PID, inst.Port, inst.ExtraPort, inst.Socket, inst.DataDir, inst.ErrorLog, inst.Flavor}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(inst.Dir, StateFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("sandbox: saving state: %w", err)
	}
	return nil
}

// LoadState returns the persistent sandbox recorded in dir, if its server
// process is still alive. Stop on the result stops the server but leaves
// dir (the caller owns it; RemoveDir or StopDir remove it).
func LoadState(dir string) (*Instance, error) {
	b, err := os.ReadFile(filepath.Join(dir, StateFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNotRunning
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox: reading state: %w", err)
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("sandbox: %s is corrupt: %w", filepath.Join(dir, StateFile), err)
	}
	inst := &Instance{Dir: dir, DataDir: st.DataDir, Socket: st.Socket, Port: st.Port, ExtraPort: st.ExtraPort,
		ErrorLog: st.ErrorLog, Flavor: st.Flavor, PIDFile: filepath.Join(dir, "mysqld.pid"), Host: "127.0.0.1"}
	if !isOurServer(st.PID, st.DataDir) {
		return inst, ErrNotRunning
	}
	inst.PID = st.PID
	return inst, nil
}

// StopDir stops the persistent sandbox recorded in dir (if it still runs)
// and removes dir. Only a dir holding a sandbox state file or datadir is
// removed, so a mistyped --dir cannot wipe unrelated files.
func StopDir(dir string) error {
	inst, err := LoadState(dir)
	if err != nil && !errors.Is(err, ErrNotRunning) {
		return err
	}
	if inst != nil && inst.PID > 0 {
		stopPID(inst.PID, 30*time.Second)
	}
	if !looksLikeSandbox(dir) {
		if _, statErr := os.Stat(dir); os.IsNotExist(statErr) {
			return ErrNotRunning
		}
		return fmt.Errorf("sandbox: %s does not look like a sandbox dir (no %s or data/); not removing it", dir, StateFile)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("sandbox: removing %s: %w", dir, err)
	}
	return nil
}

func looksLikeSandbox(dir string) bool {
	for _, p := range []string{StateFile, "data"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
			return true
		}
	}
	return false
}

// isOurServer checks that pid is alive and is a server on datadir, so that a
// recycled pid is never signalled.
func isOurServer(pid int, datadir string) bool {
	if pid <= 0 {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	return strings.Contains(string(b), "--datadir="+datadir)
}

// stopPID sends SIGTERM and waits for the process to exit, then kills its
// process group. Used for servers this process did not start.
func stopPID(pid int, grace time.Duration) {
	if syscall.Kill(pid, syscall.SIGTERM) != nil {
		return
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if !alive(pid) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	for i := 0; i < 100 && alive(pid); i++ {
		time.Sleep(20 * time.Millisecond)
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// Field 3 (after "pid (comm) ") is the state; Z = zombie.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}
