package watch

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/sandbox"
)

// A statement watch reports from the server alone (a unix-socket client's,
// or any in a run without the wire) carries its own text, as a wire
// statement does: as sent with --keep-literals, trailing comment and all,
// else redacted as the capture redacts (gapscope's digest text); a text
// longer than what watch reads for the join (its first 128 characters) is
// read whole.
func TestServerOnlyStatementText(t *testing.T) {
	inst := sandbox.ForTest(t, sandbox.Options{ServerArgs: fieldArgs})
	monitor := monitorDSN(t, inst)
	const short = "SELECT SLEEP(0.15) /* via_socket */"
	long := "SELECT SLEEP(0.15), '" + strings.Repeat("k", 200) + "' AS padded /* via_socket */"
	for _, tc := range []struct {
		name      string
		keep      bool
		noCapture bool
		why       event.Reason
		wantShort string
		wantLong  string
	}{
		{"socket keep-literals", true, false, event.UnixSocket, short, long},
		{"no-capture redacted", false, true, event.NoCapture, "select sleep(?)", "select sleep(?), ? as padded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			opts := DefaultOptions()
			opts.DSN, opts.Iface, opts.KeepLiterals, opts.NoCapture = monitor, "lo", tc.keep, tc.noCapture
			var mu sync.Mutex
			var got []event.Statement
			opts.Sinks = append(opts.Sinks, StatementFunc(func(s *event.Statement) {
				if strings.Contains(strings.ToLower(s.DigestText), "sleep") {
					mu.Lock()
					got = append(got, *s)
					mu.Unlock()
				}
			}))
			db, err := sql.Open("mysql", inst.SocketDSN(""))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			conn, err := db.Conn(ctx) // open through watch's last read: its thread names the socket
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			runDuring(t, ctx, opts, func() error {
				for _, q := range []string{short, long} {
					if _, err := conn.ExecContext(ctx, q); err != nil {
						return err
					}
				}
				return nil
			})
			mu.Lock()
			defer mu.Unlock()
			if len(got) != 2 {
				t.Fatalf("%d SLEEP statements reported, want 2: %+v", len(got), got)
			}
			for i, want := range []string{tc.wantShort, tc.wantLong} {
				s := got[i]
				t.Logf("sql %q why %v notes %v", s.SQL, s.Why, s.Notes)
				if s.SQL != want || s.Why != tc.why || s.Joined || s.ServerUS < 140_000 {
					t.Errorf("statement %d: sql %q why %v joined %v server %d µs; want sql %q, %v", i, s.SQL, s.Why, s.Joined, s.ServerUS, want, tc.why)
				}
				if !strings.Contains(s.DigestText, "SLEEP") {
					t.Errorf("digest text %q: want the server's", s.DigestText)
				}
			}
		})
	}
}
