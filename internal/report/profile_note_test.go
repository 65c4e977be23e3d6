package report

import (
	"fmt"
	"slices"
	"testing"

	"github.com/gapscope/gapscope/internal/event"
)

// Per-statement notes that differ only in their numbers count as one kind.
func TestProfileCountsNoteKinds(t *testing.T) {
	p := NewProfile(ProfileOptions{})
	for _, n := range []string{"join: server start moved -3106 us into the wire window (allowed 14 us)",
		"join: server start moved -157 us into the wire window (allowed 14 us)", "tls: no sql text"} {
		p.Add(&event.Statement{Conn: "a>b", Cmd: "COM_QUERY", SQL: "select 1", Parts: event.Parts{ClientUS: 5}, Notes: []string{n}})
	}
	notes := p.Result().Notes
	if len(notes) != 2 {
		t.Fatalf("notes %q, want two kinds", notes)
	}
	if got := noteKind("moved -3106 us (allowed 14.5 us)"); got != "moved -N us (allowed N us)" {
		t.Errorf("noteKind = %q", got)
	}
}

// A note counted again by its own text and one counted through its kind
// add up under the kind.
func TestProfileCountsRepeatedNotes(t *testing.T) {
	p := NewProfile(ProfileOptions{})
	for _, n := range []string{"tls: no sql text", "tls: no sql text", "moved 5 us", "tls: no sql text", "moved 70 us"} {
		p.Add(&event.Statement{Conn: "a>b", Cmd: "COM_QUERY", SQL: "select 1", Parts: event.Parts{ClientUS: 5}, Notes: []string{n}})
	}
	want := []string{"tls: no sql text (3 statements)", "moved N us (2 statements)"}
	if got := p.Result().Notes; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("notes %q, want %q", got, want)
	}
}

// More distinct notes than the recent-note cache holds, counted in turns
// and through equal strings built apart, still add up per note.
func TestProfileCountsNotesBeyondRecent(t *testing.T) {
	p := NewProfile(ProfileOptions{})
	names := []string{"note a", "note b", "note c", "note d", "note e", "note f"}
	for round := range 3 {
		for i, n := range names {
			if round == 1 {
				n = string([]byte(n)) // the same text, another string
			}
			p.Add(&event.Statement{Conn: "a>b", Cmd: "COM_QUERY", SQL: "select 1", Parts: event.Parts{ClientUS: 5},
				Notes: []string{n, names[(i+1)%len(names)]}})
		}
	}
	got := p.Result().Notes
	if len(got) != len(names) {
		t.Fatalf("notes %q, want %d", got, len(names))
	}
	for i, n := range names {
		if want := n + " (6 statements)"; got[i] != want {
			t.Errorf("note %d = %q, want %q", i, got[i], want)
		}
	}
}

// A call whose rows the header-only capture could not count is left out
// of the digest's rows (sum, min, average), counted apart, and shown as a
// lower bound ("+") or "?"; a cut answer whose rows came from the server
// counts as any other.
func TestProfileLeavesUnknownRowsOut(t *testing.T) {
	p := NewProfile(ProfileOptions{})
	add := func(sql string, rows int64, by event.RowsSource) {
		p.Add(&event.Statement{Conn: "a>b", Cmd: "COM_QUERY", SQL: sql, Digest: sql, DigestText: sql, Rows: rows, RowsBy: by, Parts: event.Parts{ClientUS: 5}})
	}
	add("select a from t", 10, event.RowsCounted)
	add("select a from t", 0, event.RowsCut)
	add("select a from t", 30, event.RowsFromServer)
	add("select b from u", 0, event.RowsCut)
	rows := map[string]DigestRow{}
	for _, d := range p.Result().Digests {
		rows[d.DigestText] = d
	}
	d, ok := rows["select a from t"]
	if !ok {
		t.Fatalf("digests %v", rows)
	}
	if d.Rows != 40 || d.RowsSent != 40 || d.RowsUnknown != 1 {
		t.Errorf("rows %d, rows_sent %d, rows_unknown %d: want 40, 40, 1", d.Rows, d.RowsSent, d.RowsUnknown)
	}
	if a := d.Attributes.RowsSent; a.Min != 10 || a.Avg != 20 || a.Max != 30 {
		t.Errorf("rows_sent attribute %+v: want min 10, avg 20 over the two known calls, max 30", a)
	}
	if got := rowsCell(d); got != "40+" {
		t.Errorf("text cell %q, want 40+ (at least)", got)
	}
	u := rows["select b from u"]
	if u.RowsUnknown != 1 || u.Rows != 0 || rowsCell(u) != "?" {
		t.Errorf("every call unknown: rows %d, unknown %d, cell %q; want 0, 1, ?", u.Rows, u.RowsUnknown, rowsCell(u))
	}
}

// Connections are counted once each, whether a statement's name is the
// very string an earlier statement carried (the shortcut), an equal string
// built apart, or one of more connections than the shortcut holds.
func TestProfileCountsConnectionsOnce(t *testing.T) {
	p := NewProfile(ProfileOptions{})
	names := make([]string, 500)
	for i := range names {
		names[i] = fmt.Sprintf("127.0.0.1:%d>127.0.0.1:3306", 10000+i)
	}
	for round := range 3 {
		for i, n := range names {
			if round == 1 && i%2 == 0 {
				n = string([]byte(n)) // the same name, another string
			}
			p.Add(&event.Statement{Conn: n, Cmd: "COM_QUERY", SQL: "select 1", Parts: event.Parts{ClientUS: 5}})
			p.Add(&event.Statement{Conn: n, Cmd: "COM_QUERY", SQL: "select 2", Parts: event.Parts{ClientUS: 5}})
		}
	}
	if got := p.Result().Connections; got != int64(len(names)) {
		t.Errorf("%d connections counted, want %d", got, len(names))
	}
}

// A reason's sentence and the rows' note, written from their codes, are
// counted among the profile's notes as the events file writes them.
func TestProfileCountsNotesOfCodes(t *testing.T) {
	p := NewProfile(ProfileOptions{})
	for range 2 {
		p.Add(&event.Statement{Conn: "a>b", Cmd: "COM_QUERY", SQL: "select 1", Why: event.Expired, RowsBy: event.RowsCut, Parts: event.Parts{ClientUS: 5}})
	}
	want := []string{event.NoteRowsUnknown + " (2 statements)", event.Expired.Text() + " (2 statements)"}
	if got := p.Result().Notes; !slices.Equal(got, want) {
		t.Errorf("notes %q, want %q", got, want)
	}
}
