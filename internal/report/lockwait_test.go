package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gapscope/gapscope/internal/event"
)

// waitStmt is a statement of digest d that took us, waiting wait of it for
// a lock when wait > 0.
func waitStmt(d string, us, wait int64) *event.Statement {
	s := serverStmt(us, "shop", "app")
	s.Digest, s.DigestText = d, "update "+d
	if wait > 0 {
		s.LockWait = &event.LockWait{LockWaitUS: wait}
	}
	return s
}

// TestDigestLockWaits: a digest's lock_wait_us sums its calls' lock waits
// and lock_waits counts the calls that waited; a digest none of whose
// calls waited has neither, in JSON or text; a row merged into another
// keeps its waits.
func TestDigestLockWaits(t *testing.T) {
	p := NewProfile(ProfileOptions{Metric: ServerLatency})
	p.Add(waitStmt("hot", 312_480, 312_000))
	p.Add(waitStmt("hot", 46_390, 46_100))
	p.Add(waitStmt("hot", 210, 0))
	p.Add(&event.Statement{Cmd: "COM_QUERY", Digest: "hot", DigestText: "update hot", ServerUS: 100,
		LockWait: &event.LockWait{}}) // a known wait of 0: no wait
	p.Add(waitStmt("cold", 95_400, 0))
	r := p.Result()
	rows := map[string]DigestRow{}
	for _, d := range r.Digests {
		rows[d.Digest] = d
	}
	if hot := rows["hot"]; hot.LockWaitUS != 358_100 || hot.LockWaits != 2 || hot.Calls != 4 {
		t.Errorf("hot: lock wait %d µs in %d of %d calls, want 358100 in 2 of 4", hot.LockWaitUS, hot.LockWaits, hot.Calls)
	}
	if cold := rows["cold"]; cold.LockWaitUS != 0 || cold.LockWaits != 0 {
		t.Errorf("cold: lock wait %d µs in %d calls, want none", cold.LockWaitUS, cold.LockWaits)
	}

	var js struct {
		Digests []map[string]any `json:"digests"`
	}
	var buf bytes.Buffer
	if err := WriteJSON(&buf, r); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(buf.Bytes(), &js); err != nil {
		t.Fatal(err)
	}
	for _, d := range js.Digests {
		us, hasUS := d["lock_wait_us"]
		n, hasN := d["lock_waits"]
		switch d["digest"] {
		case "hot":
			if us != 358_100.0 || n != 2.0 {
				t.Errorf("hot JSON: lock_wait_us %v, lock_waits %v", us, n)
			}
		default:
			if hasUS || hasN {
				t.Errorf("%v JSON: lock_wait_us %v, lock_waits %v: want both left out", d["digest"], us, n)
			}
		}
	}

	var text bytes.Buffer
	co := ClassOptions{}
	if err := co.WriteClassText(&text, r); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	want := "# lock waits     2 of 4 calls waited 358ms in all ("
	if strings.Count(out, "# lock waits") != 1 || !strings.Contains(out, want) {
		t.Errorf("class report: want one lock waits line %q:\n%s", want, out)
	}

	// A row merged into another (folded into "(other)") keeps its waits.
	q := NewProfile(ProfileOptions{Metric: ServerLatency})
	q.Add(waitStmt("hot", 500_000, 400_000))
	a, b := p.digests["hot"], q.digests["hot"]
	if err := a.merge(b); err != nil {
		t.Fatal(err)
	}
	if row := a.row(); row.LockWaitUS != 758_100 || row.LockWaits != 3 || row.Calls != 5 {
		t.Errorf("merged: lock wait %d µs in %d of %d calls, want 758100 in 3 of 5", row.LockWaitUS, row.LockWaits, row.Calls)
	}
}
