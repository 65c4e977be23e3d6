package event

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// mayBeUnknown are the counters written by knowledge, not by value: the
// reference writes them through pointers set when Knows says so.
var mayBeUnknown = map[string]Counters{"ServerUS": KnowsServerUS, "ReqBytes": KnowsReqBytes,
	"LockUS": KnowsLockUS, "RowsExamined": KnowsRowsExamined}

// reference is what encoding/json writes for s given its tags, with the
// counters that may be unknown as pointers set when known: the JSON form
// AppendJSON must produce, built by reflection over every field so that a
// field the encoder does not know shows.
func reference(t testing.TB, s *Statement) string {
	st := reflect.TypeFor[Statement]()
	var fields []reflect.StructField
	var from []int // the Statement field of each mirror field: the exported ones, as encoding/json sees them
	for i := range st.NumField() {
		f := st.Field(i)
		if !f.IsExported() {
			continue
		}
		if _, ok := mayBeUnknown[f.Name]; ok {
			f.Type = reflect.TypeFor[*int64]()
		}
		fields = append(fields, reflect.StructField{Name: f.Name, Type: f.Type, Tag: f.Tag, Anonymous: f.Anonymous})
		from = append(from, i)
	}
	mirror := reflect.New(reflect.StructOf(fields)).Elem()
	v := reflect.ValueOf(s).Elem()
	for m, i := range from {
		name := st.Field(i).Name
		if c, ok := mayBeUnknown[name]; ok {
			if s.Knows(c) {
				n := v.Field(i).Int()
				mirror.Field(m).Set(reflect.ValueOf(&n))
			}
			continue
		}
		if name == "Notes" { // written as AllNotes: the codes' sentences rendered
			mirror.Field(m).Set(reflect.ValueOf(slices.Collect(s.AllNotes())))
			continue
		}
		mirror.Field(m).Set(v.Field(i))
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(mirror.Interface()); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func sample() *Statement {
	return &Statement{
		Conn: "127.0.0.1:51234>127.0.0.1:3306", ConnID: 42, User: "app", DB: "shop", Cmd: "COM_QUERY",
		SQL: "SELECT c FROM sbtest1 WHERE id = ?", Digest: "0123456789abcdef", DigestText: "select c from sbtest1 where id = ?",
		TReqFirst: 1795304997094600, TReqLast: 1795304997094610, TRespFirst: 1795304997094700, TRespLast: 1795304997094750,
		Parts: Parts{ClientUS: 150, RequestUS: 10, QueueUS: 20, ExecUS: 100, DeliveryUS: 20}, ServerUS: 100,
		Rows: 1, ReqBytes: 40, RespBytes: 61, Joined: true, JoinSource: "events_statements_history_long",
	}
}

func TestAppendJSONMatchesReference(t *testing.T) {
	pg := 3
	full := sample()
	full.Error = &Error{Code: 1064, State: "42000", Msg: "You have an error near '\"x\\' <>&\n\t\x01'"}
	full.PoolGroup = &pg
	full.Notes = []string{"tls: no sql text", "bad utf8 \xff\xfe", "js \u2028\u2029 é"}
	full.SendStallUS, full.ZeroWindowUS, full.Retransmits = 7, 8, 9
	full.Tags = map[string]string{"route": "/a", "app": "x"}
	full.Statements = []StatementPart{{Digest: "d", DigestText: "select ?", ServerUS: 5}, {ServerUS: 0}}
	full.Why, full.Outlier = UnexplainedDelivery, true
	negative := &Statement{ConnID: 1<<64 - 1, TReqFirst: -5, Rows: -1, Retransmits: -2, PoolGroup: new(int), LockUS: -3}
	for i, s := range []*Statement{full, {}, negative, sample(), {Known: KnowsLockUS | KnowsReqBytes}} {
		if got, want := string(s.AppendJSON(nil)), reference(t, s); got != want {
			t.Errorf("statement %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

// TestAppendJSONRandom compares with the reference on statements whose
// every field is filled by reflection.
func TestAppendJSONRandom(t *testing.T) {
	for seed := range uint64(500) {
		s := &Statement{}
		fill(reflect.ValueOf(s).Elem(), &rng{seed + 1})
		if got, want := string(s.AppendJSON(nil)), reference(t, s); got != want {
			t.Fatalf("seed %d:\n got %s\nwant %s", seed, got, want)
		}
		// encoding/json of a Statement (a value or a pointer, inside
		// another value) is the same form, HTML escaped.
		m, err := json.Marshal(struct{ S Statement }{*s})
		if err != nil {
			t.Fatal(err)
		}
		var round struct{ S Statement }
		if err := json.Unmarshal(m, &round); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if got, want := string(round.S.AppendJSON(nil)), string(s.AppendJSON(nil)); got != want {
			t.Fatalf("seed %d: encoding/json round trip:\n got %s\nwant %s", seed, got, want)
		}
	}
}

type rng struct{ s uint64 }

func (r *rng) next() uint64 {
	r.s ^= r.s << 13
	r.s ^= r.s >> 7
	r.s ^= r.s << 17
	return r.s
}

func (r *rng) str() string {
	const chars = "ab\"\\\n\x01<é\u2028"
	var b strings.Builder
	for range r.next() % 6 {
		rs := []rune(chars)
		b.WriteRune(rs[r.next()%uint64(len(rs))])
	}
	return b.String()
}

func fill(v reflect.Value, r *rng) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(r.str())
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(int64(r.next()%3) * int64(r.next()>>2) * []int64{1, -1}[r.next()%2])
	case reflect.Uint8:
		if v.Type() == reflect.TypeFor[Reason]() { // one of the named ones, or none
			v.SetUint(r.next() % uint64(reasonCount))
		} else if v.Type() == reflect.TypeFor[RowsSource]() {
			v.SetUint(r.next() % uint64(RowsFromServer+1))
		} else if v.Type() == reflect.TypeFor[TxnEnd]() {
			v.SetUint(r.next() % uint64(len(txnEndNames)))
		} else {
			v.SetUint(r.next() % 256)
		}
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
	case reflect.Map:
		n := int(r.next() % 3)
		v.Set(reflect.MakeMapWithSize(v.Type(), n))
		for range n {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(k, r)
			fill(e, r)
			v.SetMapIndex(k, e)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() { // what JSON sees
				fill(v.Field(i), r)
			}
		}
	default:
		panic(fmt.Sprintf("fill: unsupported kind %s; extend the test", v.Kind()))
	}
}

// keys returns the top-level keys of a JSON object.
func keys(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return m
}

// TestKnownZeroWritten: each source's known counters are written when 0,
// its unknown ones left out; reading the JSON back keeps which were known.
func TestKnownZeroWritten(t *testing.T) {
	cases := []struct {
		name            string
		s               Statement
		present, absent []string
	}{
		{"wire, not joined", Statement{Conn: "c", Cmd: "COM_QUERY"},
			[]string{"req_bytes"}, []string{"server_us", "lock_us", "rows_examined"}},
		{"wire, joined, server time under 1 µs", Statement{Conn: "c", Cmd: "COM_QUERY", Joined: true, JoinSource: "events_statements_history_long"},
			[]string{"req_bytes", "server_us"}, []string{"lock_us", "rows_examined"}},
		{"wire, split withheld", Statement{Conn: "c", Cmd: "COM_QUERY", JoinSource: "events_statements_history_long", Why: UnexplainedDelivery},
			[]string{"req_bytes", "server_us"}, []string{"lock_us", "rows_examined"}},
		{"server only (no capture)", Statement{Cmd: "COM_QUERY", Why: NoCapture},
			[]string{"server_us", "lock_us", "rows_examined"}, []string{"req_bytes"}},
		{"server only (unix socket)", Statement{Cmd: "COM_QUERY", Why: UnixSocket},
			[]string{"server_us", "lock_us", "rows_examined"}, []string{"req_bytes"}},
		{"slow log with every field", Statement{Cmd: "COM_QUERY", Known: KnowsServerUS | KnowsLockUS | KnowsRowsExamined | KnowsReqBytes},
			[]string{"server_us", "lock_us", "rows_examined", "req_bytes"}, nil},
		{"slow log without Bytes_received", Statement{Cmd: "COM_QUERY", Known: KnowsServerUS | KnowsLockUS | KnowsRowsExamined},
			[]string{"server_us", "lock_us", "rows_examined"}, []string{"req_bytes"}},
		{"nothing known", Statement{Cmd: "COM_QUERY"},
			nil, []string{"server_us", "lock_us", "rows_examined", "req_bytes"}},
	}
	for _, c := range cases {
		line := c.s.AppendLine(nil)
		m := keys(t, line)
		for _, k := range c.present {
			if v, ok := m[k]; !ok || v != 0.0 {
				t.Errorf("%s: %s = %v (present %v), want 0: %s", c.name, k, v, ok, line)
			}
		}
		for _, k := range c.absent {
			if v, ok := m[k]; ok {
				t.Errorf("%s: %s = %v, want it absent (unknown): %s", c.name, k, v, line)
			}
		}
		var back Statement
		v, err := DecodeLine(line, &back)
		if err != nil || v != SchemaVersion {
			t.Fatalf("%s: DecodeLine: v %d, %v", c.name, v, err)
		}
		if again := back.AppendLine(nil); !bytes.Equal(again, line) {
			t.Errorf("%s: read back and written again:\n got %s\nwant %s", c.name, again, line)
		}
	}
}

func TestDecodeLineVersion(t *testing.T) {
	var s Statement
	if v, err := DecodeLine([]byte(`{"conn":"c","cmd":"COM_PING","rows_examined":0}`), &s); err != nil || v != 0 ||
		!s.Knows(KnowsRowsExamined) || s.Knows(KnowsLockUS) || s.Cmd != "COM_PING" {
		t.Errorf("unversioned: v %d err %v %+v", v, err, s)
	}
	if _, err := DecodeLine([]byte(`{"conn":1}`), &s); err == nil {
		t.Error("a bad line decoded")
	}
}

func TestAppendLineNoAlloc(t *testing.T) {
	s := sample()
	buf := make([]byte, 0, 4096)
	if allocs := testing.AllocsPerRun(1000, func() { buf = s.AppendLine(buf[:0]) }); allocs != 0 {
		t.Errorf("AppendLine allocates %.1f times per statement, want 0", allocs)
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

func BenchmarkAppendLine(b *testing.B) {
	s := sample()
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		buf = s.AppendLine(buf[:0])
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
