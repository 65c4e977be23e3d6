package slowlog

import (
	"bytes"
	"context"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gapscope/gapscope/internal/event"
)

// fixtureEvents parses a fixture and converts its events, keeping both.
func fixtureEvents(t *testing.T, name string) ([]Event, []event.Statement, Stats) {
	t.Helper()
	src, err := Open(fixtureDir + "/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var evs []Event
	var sts []event.Statement
	fs, err := read(context.Background(), src, ReadOptions{}, func(s *event.Statement, e *Event) {
		sts = append(sts, *s)
		evs = append(evs, Event{ // the fields these tests read; the rest is the parser's
			Query: bytes.Clone(e.Query), QueryTimeUS: e.QueryTimeUS, LockTimeUS: e.LockTimeUS,
			InnoDBRecLockWaitUS: e.InnoDBRecLockWaitUS, PagesAccessed: e.PagesAccessed, PagesRead: e.PagesRead,
			PagesPrefetched: e.PagesPrefetched, PagesReadTimeUS: e.PagesReadTimeUS, EngineTimeUS: e.EngineTimeUS,
			EngineFields: e.EngineFields,
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return evs, sts, fs.Stats
}

// sumField sums a header field's values over the log's text, read apart
// from the parser: "Key: 12.3456" as float64.
func sumField(t *testing.T, text []byte, key string) (sum float64, n int) {
	t.Helper()
	re := regexp.MustCompile(`(?m)^#.*\b` + regexp.QuoteMeta(key) + `: ([0-9.]+)`)
	for _, m := range re.FindAllSubmatch(text, -1) {
		v, err := strconv.ParseFloat(string(m[1]), 64)
		if err != nil {
			t.Fatalf("%s: %q: %v", key, m[1], err)
		}
		sum += v
		n++
	}
	return sum, n
}

const mariaEngineFields = EnginePagesAccessed | EnginePagesRead | EnginePagesPrefetched | EnginePagesUpdated |
	EngineOldRowsRead | EnginePagesReadTime | EngineTime

// TestMariaDBEngineFixture reads the real MariaDB 10.11 log written with
// log_slow_verbosity=engine (testdata/gen/slowlog -lock-wait): every
// entry with engine lines has its seven fields, their sums are the log's,
// and no statement gets a lock wait, since MariaDB writes no row-lock
// wait field: the waiting UPDATE's wait shows in Engine_time, not in
// Lock_time.
func TestMariaDBEngineFixture(t *testing.T) {
	const name = "mariadb-10.11-engine.log"
	text := fixtureBytes(t, name)
	evs, sts, st := fixtureEvents(t, name)
	if st.BadValues != 0 || st.Dropped() != 0 || st.Restarts == 0 {
		t.Errorf("stats %+v: want no bad value or drop, and the generator's restart", st)
	}
	engineLines := bytes.Count(text, []byte("\n# Pages_accessed: "))
	timeLines := bytes.Count(text, []byte("\n# Pages_read_time: "))
	var withEngine int
	var pagesRead, prefetched, accessed, readUS, engineUS int64
	for i, e := range evs {
		switch e.EngineFields {
		case 0:
		case mariaEngineFields:
			withEngine++
		default:
			t.Errorf("%q: engine fields %b, want none or MariaDB's %b", e.Query, e.EngineFields, mariaEngineFields)
		}
		pagesRead += e.PagesRead
		prefetched += e.PagesPrefetched
		accessed += e.PagesAccessed
		readUS += e.PagesReadTimeUS
		engineUS += e.EngineTimeUS
		if sts[i].LockWait != nil {
			t.Errorf("%q: lock wait %+v from a MariaDB log, which has no lock wait field", e.Query, *sts[i].LockWait)
		}
	}
	if engineLines == 0 || withEngine != engineLines || withEngine != timeLines {
		t.Errorf("%d events with engine fields; the log has %d Pages_accessed and %d Pages_read_time lines", withEngine, engineLines, timeLines)
	}
	for _, c := range []struct {
		key  string
		got  int64
		unit float64 // of the log's value, in the parser's unit
	}{{"Pages_read", pagesRead, 1}, {"Pages_prefetched", prefetched, 1}, {"Pages_accessed", accessed, 1},
		{"Pages_read_time", readUS, 1000}, {"Engine_time", engineUS, 1000}} {
		sum, n := sumField(t, text, c.key)
		// Each value is rounded to the µs on its own: n µs at most apart.
		if d := float64(c.got) - sum*c.unit; d > float64(n) || d < -float64(n) {
			t.Errorf("%s: parsed sum %d, the log's %.4f x %g (%d values)", c.key, c.got, sum, c.unit, n)
		}
	}
	waiter := fixtureEvent(t, evs, "UPDATE hot SET v = v + 1 WHERE id = 1")
	if waiter.EngineTimeUS*10 < waiter.QueryTimeUS*9 || waiter.LockTimeUS*10 > waiter.QueryTimeUS {
		t.Errorf("the waiting UPDATE: Query_time %d µs, Engine_time %d µs, Lock_time %d µs: want the wait in Engine_time, not in Lock_time",
			waiter.QueryTimeUS, waiter.EngineTimeUS, waiter.LockTimeUS)
	}
	if free := fixtureEvent(t, evs, "UPDATE hot SET v = v + 1 WHERE id = 2"); free.QueryTimeUS*10 > waiter.QueryTimeUS {
		t.Errorf("the UPDATE of a free row took %d µs, the waiting one %d µs: the fixture shows no wait", free.QueryTimeUS, waiter.QueryTimeUS)
	}
	if cold := fixtureEvent(t, evs, "SELECT COUNT(*) FROM hot WHERE v > 10"); cold.PagesRead == 0 || cold.PagesReadTimeUS == 0 {
		t.Errorf("the scan after the restart read %d pages in %d µs: want reads from disk", cold.PagesRead, cold.PagesReadTimeUS)
	}
}

func fixtureEvent(t *testing.T, evs []Event, query string) Event {
	t.Helper()
	for _, e := range evs {
		if string(e.Query) == query {
			return e
		}
	}
	t.Fatalf("no event %q in the fixture", query)
	return Event{}
}

// recLockWaits reads the log's InnoDB_rec_lock_wait values, in order, as
// whole microseconds (Percona writes six decimals), apart from the parser.
func recLockWaits(t *testing.T, text []byte) []int64 {
	t.Helper()
	var out []int64
	re := regexp.MustCompile(`(?m)^#\s+InnoDB_rec_lock_wait: (\d+)\.(\d{6})\b`)
	for _, m := range re.FindAllSubmatch(text, -1) {
		us, err := strconv.ParseInt(string(m[1])+string(m[2]), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, us)
	}
	return out
}

// TestPerconaLockWaitFixture: the hand-written Percona Server 8.0 log
// says so in its header, and each statement whose InnoDB_rec_lock_wait is
// not 0 becomes a row-lock wait of that length with its blocker unknown;
// a written 0, and an entry without InnoDB statistics, give none.
func TestPerconaLockWaitFixture(t *testing.T) {
	const name = "percona-8.0-lockwait.log"
	text := fixtureBytes(t, name)
	var comment []string
	for _, l := range strings.Split(string(text), "\n")[3:] { // after the server's banner
		if !strings.HasPrefix(l, "# ") || strings.HasPrefix(l, "# Time:") {
			break
		}
		comment = append(comment, l)
	}
	if len(comment) == 0 || !strings.HasPrefix(comment[0], "# Hand-written from the format Percona Server 8.0 documents") {
		t.Errorf("%s must say in its header comment that it is hand-written from Percona's documented format, not written by a server; it starts %q",
			name, comment)
	}
	evs, sts, st := fixtureEvents(t, name)
	if st.BadValues != 0 || st.Dropped() != 0 || st.Restarts != 0 {
		t.Errorf("stats %+v: the header comment must not cost an event or a value", st)
	}
	written := recLockWaits(t, text)
	var want []int64
	for _, us := range written {
		if us > 0 {
			want = append(want, us)
		}
	}
	if len(want) == 0 || len(want) == len(written) {
		t.Fatalf("the fixture's rec lock waits %v: want waits and written 0s", written)
	}
	var got []int64
	var known int
	for i, s := range sts {
		if evs[i].Has(EngineRecLockWait) {
			known++
		}
		if s.LockWait == nil {
			if evs[i].InnoDBRecLockWaitUS != 0 {
				t.Errorf("%q: InnoDB_rec_lock_wait %d µs and no lock wait", evs[i].Query, evs[i].InnoDBRecLockWaitUS)
			}
			continue
		}
		got = append(got, s.LockWaitTime())
		if s.BlockedBy != nil || s.LockWaitUS > s.ServerUS {
			t.Errorf("%q: lock wait %+v of a %d µs statement: want no blocker (the log names none), within its time",
				evs[i].Query, *s.LockWait, s.ServerUS)
		}
		line := string(s.AppendJSON(nil))
		if !strings.Contains(line, `"lock_wait_us":`+strconv.FormatInt(s.LockWaitUS, 10)) || strings.Contains(line, "blocked_by") {
			t.Errorf("JSON of a waiting statement: %s", line)
		}
	}
	if !slices.Equal(got, want) || known != len(written) {
		t.Errorf("lock waits %v, the log's non-zero InnoDB_rec_lock_wait %v; %d events knew the field, the log wrote it %d times",
			got, want, known, len(written))
	}
}

// perconaWait is one Percona entry that waited for a row lock.
const perconaWait = "# User@Host: app[app] @ web1 [10.0.0.5]  Id:    33\n# Schema: shop  Last_errno: 0  Killed: 0\n" +
	"# Query_time: %s  Lock_time: 0.000100  Rows_sent: 0  Rows_examined: 1  Rows_affected: 1\n" +
	"#   InnoDB_IO_r_ops: 0  InnoDB_IO_r_bytes: 0  InnoDB_IO_r_wait: 0.000000\n" +
	"#   InnoDB_rec_lock_wait: %s  InnoDB_queue_wait: 0.000000\n" +
	"SET timestamp=1714979289;\nUPDATE stock SET qty = qty - 1 WHERE sku = 'A-100';\n"

func perconaEntry(queryTime, lockWait string) string {
	return strings.Replace(strings.Replace(perconaWait, "%s", queryTime, 1), "%s", lockWait, 1)
}

// A rec lock wait longer than the statement (a log that contradicts
// itself) is cut to the statement's time, and the statement says so.
func TestLockWaitCutToQueryTime(t *testing.T) {
	src := &Source{Reader: strings.NewReader(perconaEntry("0.200000", "0.250000") + perconaEntry("0.200000", "0.150000")),
		count: &countingReader{}}
	var got []event.Statement
	if _, err := read(context.Background(), src, ReadOptions{}, func(s *event.Statement, _ *Event) { got = append(got, *s) }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].LockWaitTime() != 200_000 || got[1].LockWaitTime() != 150_000 {
		t.Fatalf("statements %+v", got)
	}
	if !slices.Contains(got[0].Notes, NoteLockWaitCut) || slices.Contains(got[1].Notes, NoteLockWaitCut) {
		t.Errorf("notes %q and %q: want the cut noted on the first only", got[0].Notes, got[1].Notes)
	}
	if got[0].LockWait == got[1].LockWait {
		t.Error("two statements share one lock wait: a kept statement would change under the next")
	}
}

// Converting statements that waited allocates a block of lock waits now
// and then, not one per statement: parsing and converting a log full of
// waits stays within one allocation per lockWaitBlock statements.
func TestConverterLockWaitAllocations(t *testing.T) {
	p := NewParser(&cycleReader{data: []byte(perconaEntry("0.400000", "0.312000"))}, Options{})
	c := NewConverter(ConvertOptions{})
	var st event.Statement
	next := func() {
		e, err := p.Next()
		if err != nil {
			t.Fatal(err)
		}
		c.Statement(e, &st)
	}
	for range 3 * lockWaitBlock { // warm up: the parser's buffers, the normalizer's cache
		next()
	}
	allocs := testing.AllocsPerRun(20, func() {
		for range lockWaitBlock {
			next()
		}
	})
	if allocs > 1 || st.LockWaitTime() != 312_000 {
		t.Errorf("%.1f allocations per %d statements with a lock wait (lock wait %d µs)", allocs, lockWaitBlock, st.LockWaitTime())
	}
}
