package sqltext

import (
	"fmt"
	"strings"
	"testing"
)

var normalizeCases = []struct{ in, want string }{
	// literals
	{"SELECT * FROM t WHERE id = 42", "select * from t where id = ?"},
	{"select * from t where id=42", "select * from t where id = ?"},
	{"SELECT a FROM t WHERE s = 'it''s' AND d = \"say \\\"hi\\\"\"", "select a from t where s = ? and d = ?"},
	{`SELECT 'a\'b', 'c\\', 'd'`, "select ?, ?, ?"},
	{"SELECT 1e-5, .5, 1.5E+10, 0x1F, X'1F', x'aa', b'0101', 0b11, 3.", "select ?, ?, ?, ?, ?, ?, ?, ?, ?"},
	{"SELECT N'abc', _utf8mb4'abc', _binary\"x\"", "select ?, ?, ?"},
	{"SELECT -1, +2, a-1, a - -1, (-3)", "select ?, ?, a - ?, a - ?, (?)"},
	{"SELECT x FROM t LIMIT -1", "select x from t limit ?"},
	{"SELECT 1abc, t1.c2, 0x1g FROM t1", "select 1abc, t1.c2, 0x1g from t1"},
	{"SELECT NULL, TRUE, false FROM t WHERE a IS NULL", "select null, true, false from t where a is null"},
	{"SELECT * FROM t WHERE a = ?", "select * from t where a = ?"},
	{"SELECT a FROM t LIMIT 10", "select a from t limit ?"},
	{"SELECT a FROM t LIMIT 10, 20", "select a from t limit ?, ?"},
	{"SELECT a FROM t LIMIT 10 OFFSET 5", "select a from t limit ? offset ?"},
	{"SELECT 'unterminated", "select ?"},
	{"SELECT `unterminated", "select `unterminated"},
	// comments
	{"SELECT /* c */ 1 # tail\n FROM dual -- x\n WHERE 1", "select ? from dual where ?"},
	{"SELECT 1 --1", "select ? - ?"},
	{"SELECT 1--", "select ?"},
	{"SELECT 1 /* unterminated", "select ?"},
	{"/*!40101 SET NAMES utf8mb4 */", "set names utf8mb4"},
	{"CREATE TABLE /*!32312 IF NOT EXISTS*/ t (a INT)", "create table if not exists t(a int)"},
	{"SELECT /*M!100301 1, */ 2", "select ?, ?"},
	{"SELECT /*+ MAX_EXECUTION_TIME(1000) */ a FROM t", "select a from t"},
	{"/* gapscope */ SELECT 1", "select ?"},
	// identifiers and case
	{"SELECT `id`, `Order`, `my col`, `a``b` FROM `Shop`.`Users`", "select id, order, `my col`, `a``b` from shop.users"},
	{"SELECT `1x` FROM t", "select `1x` from t"},
	{"SELECT COUNT(*), Max(a), t.* FROM t GROUP BY b", "select count(*), max(a), t.* from t group by b"},
	{"select count( * ) from t", "select count(*) from t"},
	{"SELECT @a, @@session.sql_mode, @@GLOBAL.x", "select @a, @@session.sql_mode, @@global.x"},
	{"SET @a := 5", "set @a := ?"},
	{"GRANT SELECT ON db.* TO 'u'@'h'", "grant select on db.* to ?@?"},
	{"SELECT a->>'$.x', a->'$.y' FROM t", "select a ->> ?, a -> ? from t"},
	{"SELECT a <=> b, a<>b, a!=b, a<=b, a>=b, a<<1, a||b, a&&b FROM t",
		"select a <=> b, a <> b, a != b, a <= b, a >= b, a << ?, a || b, a && b from t"},
	// whitespace
	{"  SELECT\n\t a ,b\r\nFROM   t ;  ", "select a, b from t"},
	{"SELECT 1;;", "select ?"},
	{"SELECT 1; SELECT 2;", "select ?; select ?"},
	{"", ""},
	{"   -- only a comment\n", ""},
	// IN lists
	{"SELECT * FROM t WHERE id IN (1, 2, 3)", "select * from t where id in (...)"},
	{"SELECT * FROM t WHERE id IN(1)", "select * from t where id in (...)"},
	{"SELECT * FROM t WHERE id in (?,?,?) AND s NOT IN ('a','b')", "select * from t where id in (...) and s not in (...)"},
	{"SELECT * FROM t WHERE (a,b) IN ((1,2),(3,4))", "select * from t where (a, b) in (...)"},
	{"SELECT * FROM t WHERE a IN (1, NULL, -2)", "select * from t where a in (...)"},
	{"SELECT * FROM t WHERE a IN (SELECT b FROM u WHERE c = 1)", "select * from t where a in (select b from u where c = ?)"},
	{"SELECT * FROM t WHERE a IN (b, 1)", "select * from t where a in (b, ?)"},
	{"SELECT * FROM t WHERE a IN ()", "select * from t where a in ()"},
	{"SELECT * FROM t WHERE a IN (1, 2", "select * from t where a in (?, ?"},
	// VALUES
	{"INSERT INTO t (a, b) VALUES (1, 'x')", "insert into t(a, b) values (...)"},
	{"INSERT INTO t(a,b) VALUES (1,'x'),(2,'y'), (3, 'z')", "insert into t(a, b) values (...)"},
	{"INSERT INTO t VALUES (1, NOW()), (2, CONCAT('a', ')'))", "insert into t values (...)"},
	{"insert into t value (1)", "insert into t value (...)"},
	{"INSERT INTO t (a) VALUES (1) ON DUPLICATE KEY UPDATE a = VALUES(a) + 1, b = VALUES(b)",
		"insert into t(a) values (...) on duplicate key update a = values(a) + ?, b = values(b)"},
	{"REPLACE INTO t VALUES (1),(2)", "replace into t values (...)"},
	{"INSERT INTO t VALUES (1, 2", "insert into t values (?, ?"},
	{"VALUES (1, 2), (3, 4)", "values (...)"},
	// USE and misc
	{"USE shop", "use ?"},
	{"use `my db`;", "use ?"},
	{"CALL proc(1, 'a')", "call proc(?, ?)"},
	{"SELECT * FROM t WHERE d > DATE '2020-01-01' - INTERVAL 1 DAY", "select * from t where d > date ? - interval ? day"},
	{"SELECT CASE WHEN a = 1 THEN -1 ELSE 0 END FROM t", "select case when a = ? then ? else ? end from t"},
	{"SELECT * FROM t WHERE a BETWEEN 1 AND 10", "select * from t where a between ? and ?"},
	{"SELECT * FROM (SELECT 1) AS x JOIN u ON (x.a = u.a)", "select * from (select ?) as x join u on (x.a = u.a)"},
	{"SELECT 'é', naïve FROM t", "select ?, naïve from t"},
	{"select ... from x", "select ... from x"},
	{"SELECT a . . . b", "select a. . .b"},
}

func TestNormalize(t *testing.T) {
	n := NewNormalizer(0)
	for _, c := range normalizeCases {
		got, digest := n.Normalize([]byte(c.in))
		if got != c.want {
			t.Errorf("Normalize(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
		if digest != Digest(c.want) || len(digest) != 16 {
			t.Errorf("Normalize(%q) digest %q, want %q", c.in, digest, Digest(c.want))
		}
		// Normalizing the digest text again changes nothing.
		if again, _ := n.Normalize([]byte(got)); again != got {
			t.Errorf("Normalize(%q) not idempotent: %q -> %q", c.in, got, again)
		}
	}
}

func TestSameShapeSameDigest(t *testing.T) {
	n := NewNormalizer(16)
	groups := [][]string{
		{"SELECT * FROM t WHERE id = 1", "select *  from t where id=2 -- c", "SELECT * FROM `t` WHERE `id` = '3'", "/* x */SELECT * FROM t WHERE id = ?"},
		{"INSERT INTO t VALUES (1)", "INSERT INTO t VALUES (1),(2),(3)", "insert into t values(?)"},
		{"SELECT a FROM t WHERE b IN (1)", "SELECT a FROM t WHERE b IN (1,2,3,4,5,6,7,8,9,10)"},
	}
	seen := map[string]int{}
	for gi, g := range groups {
		_, want := n.Normalize([]byte(g[0]))
		for _, s := range g[1:] {
			if _, d := n.Normalize([]byte(s)); d != want {
				t.Errorf("%q: digest %s, want %s (same shape as %q)", s, d, want, g[0])
			}
		}
		if prev, dup := seen[want]; dup {
			t.Errorf("groups %d and %d share digest %s", prev, gi, want)
		}
		seen[want] = gi
	}
}

func TestDigestStable(t *testing.T) {
	// FNV-1a 64 test vectors: the digest must not change between releases,
	// since stores and users keep it.
	for text, want := range map[string]string{
		"":  "cbf29ce484222325",
		"a": "af63dc4c8601ec8c",
	} {
		if got := Digest(text); got != want {
			t.Errorf("Digest(%q) = %s, want %s", text, got, want)
		}
	}
}

func TestCacheBounded(t *testing.T) {
	n := NewNormalizer(8)
	for i := range 100 {
		n.Normalize(fmt.Appendf(nil, "SELECT %d", i))
		if n.Len() > 8 {
			t.Fatalf("cache holds %d entries, bound is 8", n.Len())
		}
	}
	// Recent entries are still answered correctly, evicted ones are recomputed.
	for _, i := range []int{0, 50, 99} {
		if got, _ := n.Normalize(fmt.Appendf(nil, "SELECT %d", i)); got != "select ?" {
			t.Errorf("SELECT %d -> %q", i, got)
		}
	}
}

func TestCachedNoAlloc(t *testing.T) {
	n := NewNormalizer(100)
	raw := []byte("SELECT c FROM sbtest1 WHERE id = 4711")
	want, _ := n.Normalize(raw)
	allocs := testing.AllocsPerRun(1000, func() {
		if got, _ := n.Normalize(raw); got != want {
			t.Fatal("cached result changed")
		}
	})
	if allocs != 0 {
		t.Errorf("cached Normalize allocates %.1f times per call, want 0", allocs)
	}
}

func TestKnownShapeNoAlloc(t *testing.T) {
	// A new raw text of an already-seen shape (new literals) reuses the
	// interned digest text: nothing allocated once buffers are warm.
	n := NewNormalizer(64)
	raws := make([][]byte, 64)
	for i := range raws {
		raws[i] = fmt.Appendf(nil, "SELECT c FROM sbtest1 WHERE id = %d AND k IN (%d, %d)", i, i, i+1)
	}
	for _, r := range raws {
		n.Normalize(r)
	}
	i := 64
	allocs := testing.AllocsPerRun(500, func() {
		r := raws[i%64]
		// Overwrite the literal in place: a raw text the cache has not seen.
		r[len("SELECT c FROM sbtest1 WHERE id = ")] = byte('1' + i%9)
		i++
		n.Normalize(r)
	})
	if allocs != 0 {
		t.Errorf("uncached Normalize of a known shape allocates %.1f times per call, want 0", allocs)
	}
}

func TestMaxDigestText(t *testing.T) {
	var b strings.Builder
	b.WriteString("SELECT * FROM t WHERE ")
	for i := range 5000 {
		fmt.Fprintf(&b, "a%d = %d OR ", i, i)
	}
	b.WriteString("b = 1;")
	n := NewNormalizer(0)
	got, _ := n.Normalize([]byte(b.String()))
	if len(got) > MaxDigestText || len(got) < MaxDigestText-64 {
		t.Fatalf("digest text of %d bytes, want just under %d", len(got), MaxDigestText)
	}
	if !strings.HasPrefix(got, "select * from t where a0 = ? or a1 = ? or") {
		t.Errorf("cut text starts %q", got[:60])
	}
	if again, _ := n.Normalize([]byte(got)); again != got {
		t.Errorf("cut text not idempotent")
	}
}

func TestIsOwn(t *testing.T) {
	for raw, want := range map[string]bool{
		"/* gapscope */ SELECT 1":                      true,
		" \n/* gapscope */ SELECT 1":                   true,
		"SELECT /* gapscope */ NOW(6)":                 false, // gapscope's statements start with it
		"SELECT 1":                                     false,
		"SELECT '/* gapscape */'":                      false,
		"/* gapscope: calibrate */ SELECT UNIX_TIME()": false,
	} {
		if got := IsOwn([]byte(raw)); got != want {
			t.Errorf("IsOwn(%q) = %v, want %v", raw, got, want)
		}
	}
}

func TestHugeStatement(t *testing.T) {
	// A 16 MB multi-row INSERT collapses to a short text; the Normalizer
	// does not keep its token list afterwards.
	var b strings.Builder
	b.WriteString("INSERT INTO t (a, b) VALUES ")
	for i := 0; b.Len() < 16<<20; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "(%d, 'row %d with (parens) and \\'quotes\\'')", i, i)
	}
	b.WriteString(" ON DUPLICATE KEY UPDATE b = VALUES(b)")
	n := NewNormalizer(0)
	got, _ := n.Normalize([]byte(b.String()))
	if want := "insert into t(a, b) values (...) on duplicate key update b = values(b)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if cap(n.toks) > keepTokens {
		t.Errorf("kept %d tokens of scratch", cap(n.toks))
	}
}
