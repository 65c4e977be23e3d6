package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// logWaits reads a Percona log's entries apart from gapscope: per entry,
// its statement (the last line) and its InnoDB_rec_lock_wait in µs (-1
// when it has none).
func logWaits(t *testing.T, path string) (stmts []string, waits []int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`InnoDB_rec_lock_wait: (\d+)\.(\d{6})\b`)
	for _, entry := range strings.Split(string(b), "# Time: ")[1:] {
		lines := strings.Split(strings.TrimSpace(entry), "\n")
		stmts = append(stmts, lines[len(lines)-1])
		w := int64(-1)
		if m := re.FindStringSubmatch(entry); m != nil {
			w, _ = strconv.ParseInt(m[1]+m[2], 10, 64)
		}
		waits = append(waits, w)
	}
	return stmts, waits
}

type lockWaitRow struct {
	Digest     string           `json:"digest"`
	DigestText string           `json:"digest_text"`
	Calls      int64            `json:"calls"`
	TotalUS    int64            `json:"total_us"`
	LockWaitUS *int64           `json:"lock_wait_us"`
	LockWaits  *int64           `json:"lock_waits"`
	Plan       map[string]int64 `json:"plan"`
}

func digestRows(t *testing.T, args ...string) []lockWaitRow {
	t.Helper()
	out, err := runDigestCmd(t, nil, append([]string{"--format", "json", "--tz", "UTC"}, args...)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var r struct {
		Digests []lockWaitRow `json:"digests"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%.500s", err, out)
	}
	return r.Digests
}

// TestDigestPerconaLockWaits: digest of the hand-written Percona 8.0 log
// of row-lock waits gives each class the sum and count of its statements'
// non-zero InnoDB_rec_lock_wait, as read from the log's text here; a class
// without one has neither field; the text report has one "lock waits"
// line per class that waited, and the events carry each wait.
func TestDigestPerconaLockWaits(t *testing.T) {
	log := slowlogDir + "/percona-8.0-lockwait.log"
	stmts, waits := logWaits(t, log)
	// The classes the waits belong to, by statement shape: the fixture's
	// waiting statements are "UPDATE stock SET qty = qty - N ..." and
	// "SELECT ... FOR UPDATE".
	wantUS, wantN := map[string]int64{}, map[string]int64{}
	var totalUS, totalN int64
	for i, s := range stmts {
		if waits[i] <= 0 {
			continue
		}
		key := "select"
		if strings.HasPrefix(s, "UPDATE stock SET qty = qty - ") {
			key = "update"
		} else if !strings.HasSuffix(s, "FOR UPDATE;") {
			t.Fatalf("the fixture's waiting statement %q is neither shape", s)
		}
		wantUS[key] += waits[i]
		wantN[key]++
		totalUS += waits[i]
		totalN++
	}
	if len(wantN) != 2 {
		t.Fatalf("the fixture's waits %v: want both shapes to wait", waits)
	}
	var gotUS, gotN int64
	for _, d := range digestRows(t, log) {
		if d.LockWaits == nil {
			if d.LockWaitUS != nil {
				t.Errorf("%s: lock_wait_us without lock_waits", d.DigestText)
			}
			continue
		}
		if d.LockWaitUS == nil || *d.LockWaits == 0 || *d.LockWaits > d.Calls || *d.LockWaitUS > d.TotalUS {
			t.Errorf("%s: lock_wait_us %v lock_waits %v of %d calls, %d µs", d.DigestText, d.LockWaitUS, d.LockWaits, d.Calls, d.TotalUS)
			continue
		}
		key := "select"
		if strings.HasPrefix(strings.ToLower(d.DigestText), "update stock set qty = qty - ") { // digest text is lower case
			key = "update"
		}
		if *d.LockWaitUS != wantUS[key] || *d.LockWaits != wantN[key] {
			t.Errorf("%s: %d µs in %d calls, the log's %s statements waited %d µs in %d", d.DigestText,
				*d.LockWaitUS, *d.LockWaits, key, wantUS[key], wantN[key])
		}
		gotUS, gotN = gotUS+*d.LockWaitUS, gotN+*d.LockWaits
	}
	if gotUS != totalUS || gotN != totalN {
		t.Errorf("digests: %d µs in %d statements, the log's waits %d µs in %d", gotUS, gotN, totalUS, totalN)
	}

	out, err := runDigestCmd(t, nil, "--tz", "UTC", "--top", "0", log)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out, "\n# lock waits "); n != len(wantN) {
		t.Errorf("%d lock waits lines in the class report, want %d:\n%s", n, len(wantN), out)
	}

	events := filepath.Join(t.TempDir(), "ev.jsonl")
	if _, err := runDigestCmd(t, nil, "--events", events, log); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(events)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var evWaits []int64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e struct {
			LockWaitUS *int64          `json:"lock_wait_us"`
			BlockedBy  json.RawMessage `json:"blocked_by"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		w := int64(-1)
		if e.LockWaitUS != nil {
			w = *e.LockWaitUS
		}
		evWaits = append(evWaits, w)
		if e.BlockedBy != nil {
			t.Errorf("event with a blocker the log does not name: %s", sc.Text())
		}
	}
	if len(evWaits) != len(waits) {
		t.Fatalf("%d events for %d entries", len(evWaits), len(waits))
	}
	for i, w := range waits {
		if w <= 0 {
			w = -1 // a written 0 or no InnoDB statistics: no lock wait
		}
		if evWaits[i] != w {
			t.Errorf("event %d (%s): lock_wait_us %d, the log's wait %d", i+1, stmts[i], evWaits[i], w)
		}
	}
}

// TestDigestMariaDBEngineFields: digest of the real MariaDB 10.11
// log_slow_verbosity=engine log carries its engine fields into the
// classes' plans (page counts summing to the log's) and no lock wait,
// which MariaDB does not log; the text shows the engine line.
func TestDigestMariaDBEngineFields(t *testing.T) {
	log := slowlogDir + "/mariadb-10.11-engine.log"
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	rows := digestRows(t, log)
	for _, key := range []string{"Pages_accessed", "Pages_read", "Pages_prefetched", "Pages_updated", "Old_rows_read"} {
		var want int64
		for _, m := range regexp.MustCompile(`\b`+key+`: (\d+)`).FindAllStringSubmatch(string(b), -1) {
			v, _ := strconv.ParseInt(m[1], 10, 64)
			want += v
		}
		var got int64
		jsonKey := strings.ToLower(key)
		known := 0
		for _, d := range rows {
			if v, ok := d.Plan[jsonKey]; ok {
				got += v
				known++
			}
		}
		if got != want || known == 0 {
			t.Errorf("%s: classes sum %d (in %d plans), the log %d", key, got, known, want)
		}
	}
	for _, d := range rows {
		if d.LockWaitUS != nil || d.LockWaits != nil {
			t.Errorf("%s: lock wait from a MariaDB log", d.DigestText)
		}
	}
	out, err := runDigestCmd(t, nil, "--top", "0", log)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "\n# engine         pages accessed ") || strings.Contains(out, "# lock waits") {
		t.Errorf("class report: want engine lines and no lock waits:\n%.3000s", out)
	}
}

// TestDigestWithoutLockWaitFields: logs that carry no rec lock wait give
// no lock-wait field or line at all.
func TestDigestWithoutLockWaitFields(t *testing.T) {
	for _, log := range []string{"mariadb-10.11-sysbench.log", "mysql-5.7.log", "mysql-8.0-slow-extra.log", "mysql-5.1.log"} {
		for _, format := range []string{"json", "text"} {
			out, err := runDigestCmd(t, nil, "--format", format, "--top", "0", slowlogDir+"/"+log)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(out, "lock_wait") || strings.Contains(out, "lock waits") {
				t.Errorf("%s (%s): a lock wait from a log without one", log, format)
			}
		}
	}
}
