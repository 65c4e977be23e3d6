package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/gapscope/gapscope/internal/event"
)

func TestFastEncoderCurrent(t *testing.T) {
	if !fastEncoderCurrent {
		t.Errorf("event.Statement changed; update encodedFields and appendStatement in events.go:\n have %q\n know %q",
			statementFields(), encodedFields)
	}
}

// jsonLine is what encoding/json writes for s (the reference).
func jsonLine(t *testing.T, s *event.Statement) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return b.String()
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

func TestAppendStrMatchesEncodingJSON(t *testing.T) {
	var all strings.Builder
	for c := range 256 {
		all.WriteByte(byte(c))
	}
	for _, s := range []string{"", "plain", all.String(), "\xed\xa0\x80 surrogate", "\u2028", "a\u2029b", "日本語"} {
		want, _ := json.Marshal(s) // Marshal escapes HTML; compare without it
		want = bytes.ReplaceAll(want, []byte(`\u003c`), []byte("<"))
		want = bytes.ReplaceAll(want, []byte(`\u003e`), []byte(">"))
		want = bytes.ReplaceAll(want, []byte(`\u0026`), []byte("&"))
		if got := appendStr(nil, s); !bytes.Equal(got, want) {
			t.Errorf("appendStr(%q)\n got %s\nwant %s", s, got, want)
		}
	}
}

// TestEventWriterRandom compares with encoding/json on statements whose
// every field is filled by reflection, so a field left out of the fast
// encoder shows.
func TestEventWriterRandom(t *testing.T) {
	for seed := range uint64(200) {
		s := &event.Statement{}
		fill(reflect.ValueOf(s).Elem(), &rng{seed + 1})
		var b bytes.Buffer
		w := NewEventWriter(&b)
		w.Write(s)
		w.Flush()
		if want := jsonLine(t, s); b.String() != want {
			t.Fatalf("seed %d:\n got %s\nwant %s", seed, b.String(), want)
		}
	}
}

func fill(v reflect.Value, r *rng) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(r.str())
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(int64(r.next()%3) * int64(r.next()>>2) * []int64{1, -1}[r.next()%2])
	case reflect.Uint64, reflect.Uint16, reflect.Uint32:
		v.SetUint((r.next() % 2) * (r.next() >> (r.next() % 64)))
	case reflect.Bool:
		v.SetBool(r.next()%2 == 0)
	case reflect.Pointer:
		if r.next()%3 != 0 {
			v.Set(reflect.New(v.Type().Elem()))
			fill(v.Elem(), r)
		}
	case reflect.Slice:
		n := int(r.next() % 3)
		v.Set(reflect.MakeSlice(v.Type(), n, n))
		for i := range n {
			fill(v.Index(i), r)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			fill(v.Field(i), r)
		}
	default:
		panic(fmt.Sprintf("fill: unsupported kind %s; extend the test", v.Kind()))
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
