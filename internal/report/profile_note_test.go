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
		p.Add(&event.Statement{Conn: "a>b", Cmd: "COM_QUERY", SQL: "select 1", ClientUS: 5, Notes: []string{n}})
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
		p.Add(&event.Statement{Conn: "a>b", Cmd: "COM_QUERY", SQL: "select 1", ClientUS: 5, Notes: []string{n}})
	}
	want := []string{"tls: no sql text (3 statements)", "moved N us (2 statements)"}
	if got := p.Result().Notes; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("notes %q, want %q", got, want)
	}
}
