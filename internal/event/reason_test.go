package event

import (
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

// Every reason has a distinct name and a sentence, and survives JSON.
func TestReasonNamesRoundTrip(t *testing.T) {
	seen := map[string]Reason{}
	for _, r := range Reasons() {
		name := r.String()
		if other, dup := seen[name]; dup {
			t.Errorf("reasons %d and %d share the name %q", other, r, name)
		}
		seen[name] = r
		b, err := json.Marshal(Statement{Why: r})
		if err != nil {
			t.Fatal(err)
		}
		var back Statement
		if err := json.Unmarshal(b, &back); err != nil || back.Why != r {
			t.Errorf("%s: round trip gave %v (%v)", name, back.Why, err)
		}
	}
	if len(seen) != int(reasonCount)-1 {
		t.Errorf("Reasons lists %d reasons, want %d", len(seen), reasonCount-1)
	}
	if b, _ := json.Marshal(Statement{}); strings.Contains(string(b), `"reason"`) {
		t.Errorf("a statement without a reason writes one: %s", b)
	}
	if err := json.Unmarshal([]byte(`{"reason":"no_such_reason"}`), &Statement{}); err == nil {
		t.Error("an unknown reason name was accepted")
	}
}

// checkEntry says what a reason's entry lacks: a name, words, a kind, the
// stage that records it, and attributes that fit its kind.
func checkEntry(e reasonEntry) error {
	var errs []error
	if e.name == "" {
		errs = append(errs, errors.New("no name"))
	}
	if e.label == "" || e.phrase == "" {
		errs = append(errs, errors.New("no label or no phrase"))
	}
	if e.kind == kindUnset || int(e.kind) >= len(kindTable) {
		errs = append(errs, errors.New("no kind (unjoined, withheld, server only, unmatched row)"))
	}
	if e.by == sourceUnset || int(e.by) >= len(sourceNames) {
		errs = append(errs, errors.New("no source (capture, join, watch)"))
	}
	if e.waited && e.kind != KindUnjoined {
		errs = append(errs, errors.New("waited, yet not an unjoined wire statement's"))
	}
	if e.waited && e.deliberate {
		errs = append(errs, errors.New("both waited for and deliberate"))
	}
	return errors.Join(errs...)
}

// Every reason has a name, a text and a classification (its kind and the
// stage that records it).
func TestReasonTableComplete(t *testing.T) {
	for _, r := range Reasons() {
		if err := checkEntry(reasonTable[r]); err != nil {
			t.Errorf("reason %d (%q): %v", r, r, err)
		}
		if r.Text() == "" || r.Text() != r.Kind().Lead()+r.Phrase() {
			t.Errorf("%s: text %q is not its kind's lead and its phrase", r, r.Text())
		}
		if got, want := r.Note() == "", r.By() == ByCapture; got != want {
			t.Errorf("%s: note %q for a reason recorded by %s", r, r.Note(), r.By())
		}
	}
	if ReasonNone.String() != "" || ReasonNone.Text() != "" || ReasonNone.Note() != "" || ReasonNone.Kind() != kindUnset {
		t.Error("ReasonNone says something")
	}
}

// A reason appended with no more than its name (or a bare constant: the
// table's length then does not build) is refused: it has no words and no
// classification, and would be left out of every list its kind is in.
func TestReasonAppendedWithoutAttributes(t *testing.T) {
	for _, e := range []reasonEntry{
		{name: "new_reason"},
		{name: "new_reason", label: "x", phrase: "y"},
		{name: "new_reason", label: "x", phrase: "y", kind: KindUnjoined},
		{name: "new_reason", label: "x", phrase: "y", by: ByJoin},
	} {
		if checkEntry(e) == nil {
			t.Errorf("an entry %+v passes as complete", e)
		}
	}
}

// The lists code takes reasons from are the table's attributes, whatever a
// reason's place: the exporters' unjoined series hold every reason a wire
// statement reads unjoined for (the last one, unexplained_delivery,
// included), the unmatched rows' every row reason.
func TestReasonListsFromAttributes(t *testing.T) {
	unjoined, rows := UnjoinedReasons(), reasonsWhere(func(r Reason) bool { return r.Kind() == KindUnmatchedRow })
	for _, r := range Reasons() {
		k := r.Kind()
		if got, want := slices.Contains(unjoined, r), k == KindUnjoined || k == KindWithheld || k == KindStream; got != want {
			t.Errorf("%s (%s): in UnjoinedReasons %v, want %v", r, k, got, want)
		}
		if got, want := slices.Contains(rows, r), k == KindUnmatchedRow; got != want {
			t.Errorf("%s (%s): among the unmatched-row reasons %v, want %v", r, k, got, want)
		}
		if r.ServerOnly() != (k == KindServerOnly) {
			t.Errorf("%s (%s): ServerOnly %v", r, k, r.ServerOnly())
		}
	}
	if !slices.Contains(unjoined, reasonCount-1) {
		t.Errorf("the last reason, %s, is not among the unjoined: %v", reasonCount-1, unjoined)
	}
	for r, want := range map[Reason][2]bool{ // deliberate, waited
		SampledOut: {true, false}, NoServer: {true, false}, NoCapture: {true, false},
		NoRow: {false, true}, Expired: {false, true}, RunEnd: {false, true},
		Evicted: {false, false}, RingLost: {false, false}, UnixSocket: {false, false}, UnexplainedDelivery: {false, false},
	} {
		if r.Deliberate() != want[0] || r.Waited() != want[1] {
			t.Errorf("%s: deliberate %v, waited %v; want %v", r, r.Deliberate(), r.Waited(), want)
		}
	}
}

// docs/events.md's table of reasons has a row for every reason, with its
// kind, the stage that records it and its attributes as the table has
// them.
func TestReasonsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/events.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	for line := range strings.Lines(string(doc)) {
		cells := strings.Split(strings.TrimSpace(line), "|")
		if len(cells) != 7 { // | kind | recorded by | name | attributes | meaning |
			continue
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if name, ok := strings.CutPrefix(cells[3], "`"); ok {
			rows[strings.TrimSuffix(name, "`")] = cells[1:5]
		}
	}
	for _, r := range Reasons() {
		row, ok := rows[r.String()]
		if !ok {
			t.Errorf("docs/events.md's table of reasons has no row for %q", r)
			continue
		}
		var attrs []string
		if r.Deliberate() {
			attrs = append(attrs, "deliberate")
		}
		if r.Waited() {
			attrs = append(attrs, "waited")
		}
		want := []string{r.Kind().String(), r.By().String(), "`" + r.String() + "`", strings.Join(attrs, ", ")}
		if !slices.Equal(row, want) {
			t.Errorf("docs/events.md's row for %q is %q, want %q", r, row, want)
		}
	}
	for name := range rows {
		if _, ok := ParseReason(name); !ok {
			t.Errorf("docs/events.md lists a reason %q that does not exist", name)
		}
	}
}

// A reason's sentence and the rows' note are written among the notes from
// their codes, after the statement's own notes, and read back into the
// codes; the capture's reasons are said by the capture's own note only.
func TestNotesRenderedFromCodes(t *testing.T) {
	cases := []struct {
		s     Statement
		notes []string
	}{
		{Statement{Conn: "c", Notes: []string{"capture started mid-connection"}, Why: NoRow},
			[]string{"capture started mid-connection", NoRow.Text()}},
		{Statement{Conn: "c", Notes: []string{"capture started mid-connection"}, Why: MidStream},
			[]string{"capture started mid-connection"}},
		{Statement{Conn: "c", Why: SampledOut, RowsBy: RowsCut}, []string{NoteRowsUnknown, SampledOut.Text()}},
		{Statement{Conn: "c", Joined: true, Notes: []string{"join: x"}, RowsBy: RowsFromServer}, []string{"join: x", NoteRowsFromServer}},
		// a server-only statement built with its sentence says it once
		{Statement{Why: NoCapture, Notes: []string{NoCapture.Text()}}, []string{NoCapture.Text()}},
		{Statement{Conn: "c", Joined: true}, nil},
	}
	for _, c := range cases {
		b := c.s.AppendJSON(nil)
		var out struct{ Notes []string }
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(out.Notes, c.notes) || !slices.Equal(slices.Collect(c.s.AllNotes()), c.notes) {
			t.Errorf("%+v: notes written %q, AllNotes %q, want %q", c.s, out.Notes, slices.Collect(c.s.AllNotes()), c.notes)
		}
		if c.s.HasNotes() != (len(c.notes) > 0) {
			t.Errorf("%+v: HasNotes %v", c.s, c.s.HasNotes())
		}
		var back Statement
		if _, err := DecodeLine(b, &back); err != nil {
			t.Fatal(err)
		}
		if back.Why != c.s.Why || back.RowsBy != c.s.RowsBy || slices.Contains(back.Notes, NoteRowsUnknown) ||
			slices.Contains(back.Notes, NoteRowsFromServer) || back.Why.Note() != "" && slices.Contains(back.Notes, back.Why.Note()) {
			t.Errorf("%s read back as reason %v, rows %v, notes %q", b, back.Why, back.RowsBy, back.Notes)
		}
		if again := back.AppendJSON(nil); string(again) != string(b) {
			t.Errorf("read back and written again:\n%s\nwant\n%s", again, b)
		}
	}
}
