package event

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// Every reason has a distinct name and a sentence, and survives JSON.
func TestReasonNamesRoundTrip(t *testing.T) {
	seen := map[string]Reason{}
	for r := NoResponse; r < reasonCount; r++ {
		name := r.String()
		if name == "" || r.Text() == "" {
			t.Errorf("reason %d has no name or text", r)
		}
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
	if b, _ := json.Marshal(Statement{}); strings.Contains(string(b), `"reason"`) {
		t.Errorf("a statement without a reason writes one: %s", b)
	}
	if err := json.Unmarshal([]byte(`{"reason":"no_such_reason"}`), &Statement{}); err == nil {
		t.Error("an unknown reason name was accepted")
	}
}

// docs/events.md lists every reason by its name.
func TestReasonsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/events.md")
	if err != nil {
		t.Fatal(err)
	}
	for r := NoResponse; r < reasonCount; r++ {
		if !strings.Contains(string(doc), "`"+r.String()+"`") {
			t.Errorf("docs/events.md does not list the reason %q", r)
		}
	}
}
