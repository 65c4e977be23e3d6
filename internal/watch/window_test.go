package watch

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/gapscope/gapscope/internal/event"
)

// TestStmtRing checks the window keeps the newest statements in arrival
// order across chunk boundaries and wrap-arounds, for sizes on both sides
// of a chunk.
func TestStmtRing(t *testing.T) {
	for _, size := range []int{1, 7, ringChunk - 1, ringChunk, ringChunk + 1, 2*ringChunk + 300} {
		for _, added := range []int{0, 1, size - 1, size, size + 1, 3*size + 5} {
			r := newStmtRing(size)
			for i := range added {
				r.add(&event.Statement{Parts: event.Parts{ClientUS: int64(i)}})
			}
			held := min(added, size)
			if r.len() != held {
				t.Fatalf("size %d after %d: len %d, want %d", size, added, r.len(), held)
			}
			all := r.last(size + 10)
			if len(all) != held {
				t.Fatalf("size %d after %d: last returned %d, want %d", size, added, len(all), held)
			}
			for j, s := range all {
				if want := int64(added - held + j); s.ClientUS != want {
					t.Fatalf("size %d after %d: statement %d is #%d, want #%d", size, added, j, s.ClientUS, want)
				}
			}
			if tail := r.last(3); len(tail) > 0 && tail[len(tail)-1].ClientUS != int64(added-1) {
				t.Fatalf("size %d after %d: newest is #%d, want #%d", size, added, tail[len(tail)-1].ClientUS, added-1)
			}
			if got := len(r.chunks); got > (size+ringChunk-1)/ringChunk {
				t.Fatalf("size %d: %d chunks", size, got)
			}
		}
	}
}

// TestWindowKeeps checks what a statement taken back from the window
// holds: every field of event.Statement is either kept as it was or one
// the window leaves out by design (windowStmt). A field added to
// event.Statement fails here until it is one or the other.
func TestWindowKeeps(t *testing.T) {
	left := map[string]bool{"TReqLast": true, "TRespFirst": true, "TransitUS": true, "LockUS": true,
		"RowsExamined": true, "ZeroWindows": true, "Fingerprint": true, "TextHash": true, "Tags": true, "Statements": true}
	var s event.Statement
	v := reflect.ValueOf(&s).Elem()
	for i := range v.NumField() {
		if v.Type().Field(i).IsExported() { // the block a statement came from is no field of its
			fillField(t, v.Type().Field(i).Name, v.Field(i), int64(i+1))
		}
	}
	r := newStmtRing(4)
	r.add(&s)
	got := r.last(1)[0]
	g := reflect.ValueOf(got)
	for i := range v.NumField() {
		name := v.Type().Field(i).Name
		if !v.Type().Field(i).IsExported() {
			continue
		}
		switch kept := reflect.DeepEqual(g.Field(i).Interface(), v.Field(i).Interface()); {
		case left[name] && !g.Field(i).IsZero():
			t.Errorf("%s: left out, but the window gave %v", name, g.Field(i).Interface())
		case !left[name] && !kept:
			t.Errorf("%s: %v, want %v", name, g.Field(i).Interface(), v.Field(i).Interface())
		}
	}
}

// fillField sets f to a value that is not its zero (n distinguishes
// fields of one kind).
func fillField(t *testing.T, name string, f reflect.Value, n int64) {
	t.Helper()
	switch f.Kind() {
	case reflect.String:
		f.SetString(fmt.Sprintf("%s-%d", name, n))
	case reflect.Int, reflect.Int64, reflect.Int32:
		f.SetInt(n)
	case reflect.Uint64, reflect.Uint8, reflect.Uint16, reflect.Uint32:
		f.SetUint(uint64(n))
	case reflect.Bool:
		f.SetBool(true)
	case reflect.Pointer:
		p := reflect.New(f.Type().Elem())
		if p.Elem().Kind() == reflect.Struct {
			fillField(t, name, p.Elem().Field(0), n)
		} else {
			fillField(t, name, p.Elem(), n)
		}
		f.Set(p)
	case reflect.Slice:
		sl := reflect.MakeSlice(f.Type(), 1, 1)
		fillField(t, name, sl.Index(0), n)
		f.Set(sl)
	case reflect.Map:
		m := reflect.MakeMap(f.Type())
		k, e := reflect.New(f.Type().Key()).Elem(), reflect.New(f.Type().Elem()).Elem()
		fillField(t, name, k, n)
		fillField(t, name, e, n)
		m.SetMapIndex(k, e)
		f.Set(m)
	case reflect.Struct:
		for i := range f.NumField() {
			fillField(t, name+"."+f.Type().Field(i).Name, f.Field(i), n*100+int64(i))
		}
	default:
		t.Fatalf("%s: a field of kind %s", name, f.Kind())
	}
}
