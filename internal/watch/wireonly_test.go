package watch

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/capture"
	"github.com/gapscope/gapscope/internal/sandbox"
)

// TestWireOnlyPollerSleeps: on MariaDB's default (performance_schema off)
// watch sees the wire alone, and the poller has nothing it can read. Under
// load (new connections, fast and slow statements) its wake-ups must stay
// those of its schedule: the wire hands it no outliers or connections it
// could not serve, and nothing left pending keeps waking it. Counted, not
// timed: a spinning poller wakes hundreds of thousands of times a second.
func TestWireOnlyPollerSleeps(t *testing.T) {
	inst := sandbox.ForTest(t, sandbox.Options{ServerArgs: []string{"--performance-schema=OFF"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var statements atomic.Int64
	started := time.Now()
	res := runDuring(t, ctx, Options{DSN: inst.DSN(""), Iface: "lo", PollInterval: 200 * time.Millisecond, Capture: capture.SourceAuto},
		func() error { return churn(ctx, inst, 3*time.Second, &statements) })
	elapsed := time.Since(started).Seconds()
	if res.Capture.Statements < statements.Load()/2 {
		t.Fatalf("the wire saw %d statements of %d sent: the load did not reach the capture", res.Capture.Statements, statements.Load())
	}
	// The schedule: history polls (nothing to read: every PollInterval),
	// the slow polls each second, and the timer's own wake after each.
	bound := int64(elapsed*(1/0.2+2)) + 10
	if res.ServerSide.PollerWakes > bound {
		t.Errorf("poller woke %d times in %.1fs with nothing to read (at most %d): it spins under load (%d statements)",
			res.ServerSide.PollerWakes, elapsed, bound, res.Capture.Statements)
	}
	if res.ServerSide.SlowDrops != 0 {
		t.Errorf("%d outliers dropped on the way to a poller that cannot read them: the count would blame a full queue", res.ServerSide.SlowDrops)
	}
	// --capture auto keeps the ring where no server rows are read: a cut
	// answer's rows would have nothing to come from.
	if res.Capture.Source != "packet" {
		t.Errorf("auto with performance_schema off captured with %q, want the ring (packet)", res.Capture.Source)
	}
	if !slices.ContainsFunc(res.Notes, func(n string) bool {
		return strings.Contains(n, "eBPF only where the server's statement rows are read")
	}) {
		t.Errorf("auto's choice of the ring is not explained in the notes: %q", res.Notes)
	}
}

// churn runs, for d, four clients that each open a connection, run a few
// fast statements and an occasional slow one (an outlier), and close it.
func churn(ctx context.Context, inst *sandbox.Instance, d time.Duration, n *atomic.Int64) error {
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				if err := oneConnection(ctx, inst, w, i, n); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func oneConnection(ctx context.Context, inst *sandbox.Instance, w, i int, n *atomic.Int64) error {
	db, err := sql.Open("mysql", inst.DSN(""))
	if err != nil {
		return err
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	for j := range 20 {
		q := fmt.Sprintf("SELECT %d", w*1000+j)
		if j == 0 && i%5 == 0 {
			q = "SELECT SLEEP(0.03)"
		}
		var v any
		if err := conn.QueryRowContext(ctx, q).Scan(&v); err != nil {
			return err
		}
		n.Add(1)
	}
	return nil
}
