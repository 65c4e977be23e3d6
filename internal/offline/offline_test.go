package offline

import (
	"strings"
	"testing"
)

func TestClassify(t *testing.T) {
	for head, want := range map[string]string{
		"\xd4\xc3\xb2\xa1\x02\x00\x04\x00":                                "capture",
		"# Time: 2024-05-06T07:08:09\n# User@Host: a[a] @ localhost []\n": "slowlog",
		"SQLite format 3\x00":                                             "",
		`{"v":1,"digest":"x"}` + "\n":                                     "",
	} {
		if got := Classify([]byte(head)); got.Format != want {
			t.Errorf("Classify(%q) = %+v, want format %q", head, got, want)
		}
	}
	if k := Classify([]byte("SQLite format 3\x00")); !strings.Contains(k.Advice(), "report --store") {
		t.Errorf("an SQLite file's advice: %q", k.Advice())
	}
	if k := Classify([]byte{0, 1, 2}); k.What != "binary data" || k.Advice() != "" {
		t.Errorf("binary: %+v", k)
	}
	if k := Classify([]byte("a\nb\n")); k.What != "text (2 lines)" {
		t.Errorf("text: %+v", k)
	}
}

func TestClientHost(t *testing.T) {
	for conn, want := range map[string]string{
		"10.0.0.5:51234>10.0.0.1:3306":   "10.0.0.5",
		"[fe80::1]:51234>[fe80::2]:3306": "fe80::1",
		"":                               "",
	} {
		if got := clientHost(conn); got != want {
			t.Errorf("clientHost(%q) = %q, want %q", conn, got, want)
		}
	}
}
