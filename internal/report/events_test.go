package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gapscope/gapscope/internal/event"
)

// jsonLine is the line for s: the schema version, then what encoding/json
// writes for the statement (its MarshalJSON, which event's tests hold to
// the fields' tags), HTML escaping off.
func jsonLine(t *testing.T, s *event.Statement) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`{"v":%d,`, event.SchemaVersion) + strings.TrimPrefix(b.String(), "{")
}

func TestEventWriterMatchesEncodingJSON(t *testing.T) {
	pg := 3
	full := benchStatement()
	full.Error = &event.Error{Code: 1064, State: "42000", Msg: "You have an error near '\"x\\' <>&\n\t\x01'"}
	full.PoolGroup = &pg
	full.Notes = []string{"tls: no sql text", "bad utf8 \xff\xfe", "js \u2028\u2029 é"}
	full.SendStallUS, full.ZeroWindowUS, full.Retransmits = 7, 8, 9
	zero := &event.Statement{}
	negative := &event.Statement{ConnID: 1<<64 - 1, TReqFirst: -5, Rows: -1, Retransmits: -2, PoolGroup: new(int)}
	for i, s := range []*event.Statement{full, zero, negative, benchStatement()} {
		var b bytes.Buffer
		w := NewEventWriter(&b)
		if err := w.Write(s); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if want := jsonLine(t, s); b.String() != want {
			t.Errorf("statement %d:\n got %s\nwant %s", i, b.String(), want)
		}
	}
}

// TestEventsRoundTripKnownZero: a counter known to be 0 is written, and
// reading the file back keeps it known, so a file read and written again
// is the same file.
func TestEventsRoundTripKnownZero(t *testing.T) {
	in := []*event.Statement{
		{Cmd: "COM_QUERY", Why: event.NoCapture, Notes: []string{event.NoCapture.Text()}},
		{Cmd: "COM_QUERY", Known: event.KnowsServerUS | event.KnowsLockUS | event.KnowsRowsExamined},
		{Conn: "c", Cmd: "COM_QUERY", Joined: true, JoinSource: "events_statements_history_long"},
		benchStatement(),
	}
	var first bytes.Buffer
	w := NewEventWriter(&first)
	for _, s := range in {
		if err := w.Write(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"server_us":0,"rows":0,"resp_bytes":0,"error":null,"lock_us":0,"rows_examined":0,`,
		`"server_us":0,"rows":0,"req_bytes":0,`} {
		if !strings.Contains(first.String(), want) {
			t.Errorf("the events lack %s:\n%s", want, first.String())
		}
	}
	var second bytes.Buffer
	w = NewEventWriter(&second)
	if _, err := ReadEvents(bytes.NewReader(first.Bytes()), func(s *event.Statement) { w.Write(s) }); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	if second.String() != first.String() {
		t.Errorf("read back and written again:\n%s\nwant\n%s", second.String(), first.String())
	}
}

func TestEventWriterNoAlloc(t *testing.T) {
	var b bytes.Buffer
	w := NewEventWriter(&b)
	s := benchStatement()
	allocs := testing.AllocsPerRun(1000, func() {
		b.Reset()
		w.Write(s)
	})
	if allocs != 0 {
		t.Errorf("EventWriter.Write allocates %.1f times per event, want 0", allocs)
	}
}

// Every line carries the schema version first; a reader takes lines with
// it and without it (files written before it existed), and refuses a
// newer version by line number.
func TestEventsSchemaVersion(t *testing.T) {
	var b bytes.Buffer
	w := NewEventWriter(&b)
	for range 2 {
		if err := w.Write(benchStatement()); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(b.String(), "\n")
	want := fmt.Sprintf(`{"v":%d,"conn":`, event.SchemaVersion)
	for i, l := range lines[:2] {
		if !strings.HasPrefix(l, want) {
			t.Errorf("line %d %q does not start with %s", i+1, l, want)
		}
	}
	unversioned := strings.Replace(lines[0], want, `{"conn":`, 1)
	var conns []string
	read, err := ReadEvents(strings.NewReader(unversioned+lines[1]), func(s *event.Statement) { conns = append(conns, s.Conn) })
	if err != nil || read.Statements != 2 || conns[0] != benchStatement().Conn || conns[1] != benchStatement().Conn {
		t.Fatalf("reading an unversioned and a versioned line: %+v %v %v", read, conns, err)
	}
	newer := strings.Replace(lines[1], want, fmt.Sprintf(`{"v":%d,"conn":`, event.SchemaVersion+1), 1)
	_, err = ReadEvents(strings.NewReader(lines[0]+newer), func(*event.Statement) {})
	var le *LineError
	if !errors.As(err, &le) || le.Line != 2 || !strings.Contains(err.Error(), "newer than this gapscope reads") {
		t.Errorf("newer schema: err %v, want a LineError on line 2", err)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestEventWriterError(t *testing.T) {
	w := NewEventWriter(failWriter{})
	w.Write(benchStatement())
	err := w.Flush()
	if err == nil || !strings.Contains(err.Error(), "writing events: disk full") {
		t.Fatalf("Flush error %v, want writing events: disk full", err)
	}
	if err2 := w.Write(benchStatement()); err2 != err {
		t.Errorf("Write after failure returned %v, want the first error", err2)
	}
}

// A writer killed mid-line leaves a torn last line: the lines before it
// are read and the tail is counted, not refused. A bad line anywhere else
// is an error naming it, and a whole last line without its newline counts.
func TestReadEventsTornTail(t *testing.T) {
	var b bytes.Buffer
	w := NewEventWriter(&b)
	for i := range 3 {
		s := benchStatement()
		s.ConnID = uint64(i + 1)
		if err := w.Write(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	whole := b.String()
	torn := whole[:len(whole)-40] // inside the third line
	var ids []uint64
	read, err := ReadEvents(strings.NewReader(torn), func(s *event.Statement) { ids = append(ids, s.ConnID) })
	if err != nil || read.Statements != 2 || len(ids) != 2 || ids[1] != 2 {
		t.Fatalf("torn: read %+v ids %v err %v", read, ids, err)
	}
	if want := len(strings.SplitAfter(whole, "\n")[2]) - 40; read.TornBytes != want {
		t.Errorf("torn bytes %d, want %d", read.TornBytes, want)
	}
	if note := read.TornNote("ev.jsonl"); !strings.Contains(note, "ev.jsonl: the last line is torn") || !strings.Contains(note, "2 whole lines") {
		t.Errorf("note %q", note)
	}
	read, err = ReadEvents(strings.NewReader(strings.TrimSuffix(whole, "\n")), func(*event.Statement) {})
	if err != nil || read.Statements != 3 || read.TornBytes != 0 || read.TornNote("x") != "" {
		t.Errorf("last line whole without newline: %+v %v", read, err)
	}
	bad := "{\"conn\":\"c\",\"cmd\":\"COM_QUERY\"}\n{not json\n" + whole
	_, err = ReadEvents(strings.NewReader(bad), func(*event.Statement) {})
	var le *LineError
	if !errors.As(err, &le) || le.Line != 2 {
		t.Errorf("a bad line inside the file: %v", err)
	}
}

// TestEventsDocumented: docs/events.md has a row for every field an events
// line carries ("v" and each JSON field of event.Statement) and none for a
// field that no longer exists, so the schema page stays the schema.
func TestEventsDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/events.md")
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|").FindAllStringSubmatch(string(b), -1) {
		documented = append(documented, m[1])
	}
	written := append([]string{"v"}, jsonFields(reflect.TypeFor[event.Statement]())...)
	if !slices.Equal(documented, written) {
		t.Errorf("docs/events.md documents, in order:\n %v\nevents lines carry:\n %v", documented, written)
	}
}

// jsonFields names the JSON fields of struct type st in order, those of
// embedded structs (the statement's time parts, its transaction, its lock
// wait) where they are embedded.
func jsonFields(st reflect.Type) []string {
	var out []string
	for i := range st.NumField() {
		f := st.Field(i)
		if f.Anonymous && f.Type.Kind() == reflect.Struct {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		if f.Anonymous && f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.Struct {
			out = append(out, jsonFields(f.Type.Elem())...) // the lock wait, when there is one
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "-" && name != "" {
			out = append(out, name)
		}
	}
	return out
}
