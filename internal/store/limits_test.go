package store

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/event"
)

// TestWeekWithinLimits runs ten days of a fake clock through a writer
// bounded to 8 MB and a 7-day retention: a statement every 6 s of 5
// digests, one in five failed, one in ten of the rest sampled. The store
// never takes more than 10% over its limit, keeps per-minute digest
// totals for the whole week, the newest statement rows, and says from
// when it holds what.
func TestWeekWithinLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("ten days of statements: seconds")
	}
	ctx := context.Background()
	s := openTemp(t)
	const maxBytes = 8 << 20
	start := time.UnixMicro(1_795_304_997_000_000)
	now := start
	clock := func() time.Time { return now }
	run, _ := s.StartRun(ctx, "watch", "", start.UnixMicro())
	w := s.NewWriter(run, WriterOptions{SampleEvery: 10, Limits: Limits{MaxBytes: maxBytes, Retain: 7 * 24 * time.Hour},
		Now: clock, FlushEvery: time.Hour}) // commits by batch, on the fake clock's pace
	var worst int64
	for i := 0; now.Sub(start) < 10*24*time.Hour; i++ {
		now = now.Add(6 * time.Second)
		st := statement(i)
		st.TReqFirst, st.Digest = now.UnixMicro(), fmt.Sprintf("d%d", i%5)
		if err := w.Add(&st); err != nil {
			t.Fatal(err)
		}
		if i%2000 == 0 {
			worst = max(worst, onDisk(t, s))
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.TrimError(); err != nil {
		t.Fatal(err)
	}
	worst = max(worst, onDisk(t, s))
	if worst > maxBytes*11/10 {
		t.Errorf("the store took %d bytes on disk, over its %d limit by more than 10%%", worst, maxBytes)
	}
	h, err := s.Holdings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	week := now.Add(-7 * 24 * time.Hour).UnixMicro()
	if h.MinutesFromUS < week || h.MinutesFromUS > week+2*minuteUS {
		t.Errorf("per-minute totals from %v, want the whole week from %v", time.UnixMicro(h.MinutesFromUS), time.UnixMicro(week))
	}
	if h.StatementsFromUS < h.MinutesFromUS+24*3600e6 || h.Trims == 0 || h.RemovedRows == 0 {
		t.Errorf("statements from %v, totals from %v, %d trims: want statement rows trimmed to the size",
			time.UnixMicro(h.StatementsFromUS), time.UnixMicro(h.MinutesFromUS), h.Trims)
	}
	// One in five failed (kept), one in ten of the rest: 28% of calls.
	if h.Kept*100/h.Calls < 25 || h.Kept*100/h.Calls > 31 {
		t.Errorf("%d of %d statements kept a row, want 28%%", h.Kept, h.Calls)
	}
	t.Logf("worst on disk %.1f MB of %d MB; %+v", float64(worst)/(1<<20), maxBytes>>20, h)
}

// onDisk is the store's file and write-ahead log, as du would count them.
func onDisk(t *testing.T, s *Store) int64 {
	var n int64
	for _, p := range []string{s.Path(), s.Path() + "-wal"} {
		if st, err := os.Stat(p); err == nil {
			n += st.Size()
		}
	}
	return n
}

// TestSampleKeepsWhatReadersLookFor: with 1 in 100 sampled, the slow, the
// failed, the outliers and the unjoined-for-a-reason keep their rows; the
// digest minute counts every statement.
func TestSampleKeepsWhatReadersLookFor(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	w := s.NewWriter(1, WriterOptions{SampleEvery: 100})
	base := statement(1)
	base.Error, base.Notes = nil, nil
	special := map[string]func(*event.Statement){
		"slow":     func(s *event.Statement) { s.ClientUS = DefaultSlowUS },
		"failed":   func(s *event.Statement) { s.Error = &event.Error{Code: 1213} },
		"outlier":  func(s *event.Statement) { s.Outlier = true },
		"unjoined": func(s *event.Statement) { s.Joined, s.Why = false, event.Expired },
		"lock wait": func(s *event.Statement) {
			s.LockWait = &event.LockWait{LockWaitUS: 200, BlockedBy: &event.Blocker{ConnID: 9, Kind: event.LockRow, Source: event.LockSourceWire, Confidence: event.ConfidenceLow}}
		},
	}
	for i := range 1000 {
		st := base
		st.TReqFirst += int64(i)
		w.Add(&st)
	}
	for name, f := range special {
		st := base
		st.SQL = name
		f(&st)
		w.Add(&st)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, _ := s.Statements(ctx, Query{})
	kept := map[string]bool{}
	for _, st := range got {
		kept[st.SQL] = true
	}
	for name := range special {
		if !kept[name] {
			t.Errorf("the %s statement lost its row", name)
		}
	}
	if len(got) != 10+len(special) {
		t.Errorf("%d rows, want 1 in 100 of 1000 and the %d special ones", len(got), len(special))
	}
	h, _ := s.Holdings(ctx)
	if h.Calls != 1000+int64(len(special)) || h.Kept != int64(len(got)) {
		t.Errorf("minutes count %d calls, %d kept; want %d and %d", h.Calls, h.Kept, 1000+len(special), len(got))
	}
}

// An unjoined statement keeps its row for a reason of its own; one left
// without its half by the run's set-up or its budget (a deliberate reason:
// the join sample, no statement history, no capture) is sampled as any.
func TestSampleKeepsUnjoinedByReason(t *testing.T) {
	w := openTemp(t).NewWriter(1, WriterOptions{SampleEvery: 100})
	defer w.Close()
	for _, r := range event.Reasons() {
		st := statement(1)
		st.Error, st.Joined, st.Why = nil, false, r
		w.ordinal = 1 // the next ordinary statement is not the sample's
		if got, want := w.keep(&st), !r.Deliberate(); got != want {
			t.Errorf("%s: kept %v, want %v", r, got, want)
		}
	}
}

// The notes stored are the notes as written: the rows' note and the
// reason's sentence rendered from their codes; read back, the rows' note
// is its code again (the reason is not stored: its sentence stays).
func TestNotesStoredAsWritten(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	w := s.NewWriter(1, WriterOptions{})
	st := statement(1)
	st.Joined, st.Why, st.Rows, st.RowsBy = false, event.Expired, 0, event.RowsCut
	w.Add(&st)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := s.Statements(ctx, Query{})
	if err != nil || len(got) != 1 {
		t.Fatalf("%d statements read (%v)", len(got), err)
	}
	if want := []string{"note 1", event.Expired.Text()}; !got[0].RowsUnknown() || !slices.Equal(got[0].Notes, want) {
		t.Errorf("read back: rows unknown %v, notes %q; want true, %q", got[0].RowsUnknown(), got[0].Notes, want)
	}
}
