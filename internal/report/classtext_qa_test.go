package report

import (
	"strings"
	"testing"
)

// A command without text (COM_QUIT, COM_PING) has an empty sample: no
// "slowest call" heading over nothing.
func TestClassDetailNoEmptySample(t *testing.T) {
	r := &ProfileResult{Metric: "client", Statements: 1, Classes: 1, TotalUS: 1,
		Digests: []DigestRow{{Digest: "a52c592f10aeac29", DigestText: "(COM_QUIT)", Calls: 1, Sample: &Sample{DB: "fx"}}}}
	var b strings.Builder
	if err := WriteClassReport(&b, r, ClassTextOptions{Details: -1}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "slowest call") {
		t.Errorf("empty sample shown:\n%s", b.String())
	}
}
