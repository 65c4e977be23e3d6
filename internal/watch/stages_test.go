package watch

import (
	"reflect"
	"testing"
)

// The stages that run on goroutines of their own (the wire statements
// stage on the capture's, the poller and its readers on its own) must
// hold no engine: what
// they share with the others is in their own fields, typed by what is safe
// to share. A field that reaches the engine, directly or through a struct
// or pointer, would let a stage touch another stage's state again. (A
// function value is not followed: a closure over the engine would pass.)
func TestStagesHoldNoEngine(t *testing.T) {
	engineType := reflect.TypeOf(engine{})
	for _, stage := range []any{wireStage{}, poller{}, statusReader{}, historyReader{}, targetReader{}, connReader{}, lockReader{}} {
		typ := reflect.TypeOf(stage)
		if path, ok := reaches(typ, engineType, map[reflect.Type]bool{}); ok {
			t.Errorf("%s reaches the engine through %s", typ.Name(), path)
		}
	}
}

// reaches reports whether typ holds target through its fields, pointers,
// slices, maps or channels, and the path of field names that does.
func reaches(typ, target reflect.Type, seen map[reflect.Type]bool) (string, bool) {
	if typ == target {
		return typ.Name(), true
	}
	if seen[typ] {
		return "", false
	}
	seen[typ] = true
	switch typ.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Chan:
		return reaches(typ.Elem(), target, seen)
	case reflect.Map:
		if p, ok := reaches(typ.Key(), target, seen); ok {
			return p, true
		}
		return reaches(typ.Elem(), target, seen)
	case reflect.Struct:
		if typ.Name() != "" && typ.PkgPath() != engineTypePkg() {
			return "", false // other packages' types cannot hold this package's engine
		}
		for i := range typ.NumField() {
			f := typ.Field(i)
			if p, ok := reaches(f.Type, target, seen); ok {
				return f.Name + "." + p, true
			}
		}
	}
	return "", false
}

func engineTypePkg() string { return reflect.TypeOf(engine{}).PkgPath() }
