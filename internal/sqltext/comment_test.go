package sqltext

import (
	"maps"
	"testing"
)

func TestComment(t *testing.T) {
	const tp = "00-5bd66ef5095369c7b0d1f8f4bd33716a-c532cb4098ac3dd2-01"
	cases := []struct {
		raw, comment string
		tags         map[string]string
	}{
		{"SELECT * FROM t WHERE id = 5 /*action='list',controller='users',traceparent='" + tp + "'*/",
			"/*action='list',controller='users',traceparent='" + tp + "'*/",
			map[string]string{"action": "list", "controller": "users", "traceparent": tp}},
		{"select 1 /*route='%2Fparam%2A%27d',db_driver='go%3Dmysql'*/ ;\n",
			"/*route='%2Fparam%2A%27d',db_driver='go%3Dmysql'*/",
			map[string]string{"route": "/param*'d", "db_driver": "go=mysql"}},
		{`select 1 /* k = 'it\'s' , j='' */`, `/* k = 'it\'s' , j='' */`, map[string]string{"k": "it's", "j": ""}},
		{"select 1 /* just a note */", "", nil},
		{"select 1 /*+ MAX_EXECUTION_TIME(1000) */", "", nil},
		{"select 1 /*!50000 a='b' */", "", nil},
		{"/* a='b' */ select 1", "", nil},
		{"select 1 /* a='b' */ from t", "", nil},
		{"select 1 /* a='unterminated */", "", nil},
		{"select 1 /* a=b */", "", nil},
		{"select '*/'", "", nil},
		{"", "", nil},
		{"*/", "", nil},
	}
	for _, c := range cases {
		comment, tags := Comment([]byte(c.raw))
		if comment != c.comment || !maps.Equal(tags, c.tags) {
			t.Errorf("Comment(%q) = %q %v, want %q %v", c.raw, comment, tags, c.comment, c.tags)
		}
	}
}

func FuzzComment(f *testing.F) {
	f.Add("select 1 /*a='b',c='d'*/")
	f.Add(`x /* k='\'' */`)
	f.Fuzz(func(t *testing.T, raw string) {
		comment, tags := Comment([]byte(raw))
		if (comment == "") != (tags == nil) {
			t.Fatalf("Comment(%q) = %q with tags %v", raw, comment, tags)
		}
	})
}
