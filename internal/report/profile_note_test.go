package report

import (
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
