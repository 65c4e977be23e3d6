//go:build linux

package capture

import (
	"context"
	"database/sql"
	"os"
	"testing"
	"time"
)

// A tap reads the server's frames without decoding them; with a short
// answer snap the kernel copies only the head of each answer, so a 20 kB
// result costs the ring a fraction of its bytes.
func TestTapCutsAnswers(t *testing.T) {
	inst := server(t)
	if os.Geteuid() != 0 {
		t.Skip("live capture needs root")
	}
	whole := tapQuery(t, inst.DSN(""), uint16(inst.Port), 0)
	cut := tapQuery(t, inst.DSN(""), uint16(inst.Port), 100)
	if whole.Frames == 0 || cut.Frames == 0 {
		t.Fatalf("no frames: whole %+v, cut %+v", whole, cut)
	}
	if whole.Bytes < 20_000 {
		t.Errorf("whole answers: %d bytes in the ring for a 20 kB result", whole.Bytes)
	}
	// Requests are kept whole, answers cut to 100 bytes a frame.
	if cut.Bytes >= 20_000 || cut.Bytes > 100*cut.Frames+2_000 {
		t.Errorf("cut answers: %d bytes in %d frames", cut.Bytes, cut.Frames)
	}
	if whole.KernelDrops != 0 || cut.KernelDrops != 0 {
		t.Errorf("kernel drops: whole %d, cut %d", whole.KernelDrops, cut.KernelDrops)
	}
}

// tapQuery runs a 20 kB result through a tap on lo and returns what the tap
// read once its count has settled.
func tapQuery(t *testing.T, dsn string, port uint16, snap int) TapStats {
	t.Helper()
	tap, err := OpenTap("lo", LiveOptions{Options: Options{Ports: []uint16{port}}, BlockKB: 64}, snap)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan TapStats, 1)
	go func() {
		st, err := tap.Run(ctx)
		if err != nil {
			t.Error(err)
		}
		done <- st
	}()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	var s string
	if err := db.QueryRow("SELECT REPEAT('x', 20000)").Scan(&s); err != nil || len(s) != 20_000 {
		t.Fatalf("query: %v (%d bytes)", err, len(s))
	}
	db.Close()
	// The kernel hands a block over after its timeout: wait until the
	// count stops growing.
	last := int64(-1)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(3 * blockTimeout) {
		if n := tap.Stats().Frames; n > 0 && n == last {
			break
		} else {
			last = n
		}
	}
	cancel()
	return <-done
}
