package plans

import "testing"

func TestClassifyRefusesWrites(t *testing.T) {
	// Every one of these must get neither a live plan nor an EXPLAIN.
	refused := []string{
		"INSERT INTO t VALUES (1)",
		"insert into t select * from u",
		"/* app */ InSeRt   INTO t (a) VALUES (1)",
		"UPDATE t SET a = 1 WHERE id = 2",
		"  -- leading comment\n  uPdAtE t SET a = SLEEP(1)",
		"# hash comment\nDELETE FROM t WHERE id = 1",
		"/*+ MAX_EXECUTION_TIME(1) */ delete from t",
		"REPLACE INTO t VALUES (1)",
		"replace t set a = 1",
		"CALL p()",
		"call   p(1, 'x')",
		"SELECT * FROM t WHERE id = 1 FOR UPDATE",
		"select * from t where id = 1 for update nowait",
		"SELECT * FROM t FOR SHARE",
		"SELECT * FROM t LOCK IN SHARE MODE",
		"SELECT a INTO @x FROM t LIMIT 1",
		"SELECT a FROM t INTO OUTFILE '/tmp/x'",
		"select * into dumpfile '/tmp/y' from t",
		"SELECT 1; DELETE FROM t",
		"SELECT 1;DELETE FROM t;",
		"select 1 ; select 2",
		"WITH c AS (SELECT 1) DELETE FROM t",
		"WITH c AS (SELECT id FROM t) UPDATE t SET a = 1",
		"SELECT @a := 1",
		"SELECT /*! 1; DELETE FROM t */",
		"/*!50000 UPDATE t SET a = 1 */",
		"(SELECT 1) ; insert into t values (1)",
		"SET @a = 1",
		"DO SLEEP(1)",
		"HANDLER t READ FIRST",
		"LOAD DATA INFILE 'x' INTO TABLE t",
		"TRUNCATE t",
		"EXPLAIN SELECT 1",
		"SHOW TABLES",
		"",
		"   ",
		"/* only a comment */",
		"SELECT * FROM t PROCEDURE ANALYSE()",
	}
	for _, q := range refused {
		if v := Classify(q); v.ReadOnly || v.Explainable {
			t.Errorf("Classify(%q) = %+v, want refused", q, v)
		}
	}
}

func TestClassifyAcceptsSelects(t *testing.T) {
	ok := []string{
		"SELECT 1",
		"select * from t where id = 1",
		"  /* app=shop */ SeLeCt a FROM t",
		"(SELECT a FROM t) UNION (SELECT a FROM u)",
		"SELECT 'delete; update' FROM t WHERE c = 'x;y'",
		`SELECT "INSERT INTO x" AS s`,
		"SELECT REPLACE(name, 'a', 'b'), INSERT(name, 1, 2, 'x') FROM t",
		"SELECT `update`, `into` FROM t",
		"WITH c AS (SELECT id FROM t) SELECT * FROM c JOIN u USING (id)",
		"SELECT * FROM t FOR SYSTEM_TIME AS OF TIMESTAMP '2024-01-01 00:00:00'",
		"SELECT a FROM t;",
		"SELECT 'it''s' FROM t -- trailing; comment",
		"SELECT 'a\\'; DELETE' FROM t",
		"select * from t where a = 1 order by b limit 10",
	}
	for _, q := range ok {
		if v := Classify(q); !v.ReadOnly || !v.Explainable {
			t.Errorf("Classify(%q) = %+v, want explainable", q, v)
		}
	}
}

func TestClassifySideEffectFunctions(t *testing.T) {
	// Read-only, so a live plan is fine, but never EXPLAINed: the optimizer
	// may evaluate constant expressions while it plans.
	for _, q := range []string{
		"SELECT SLEEP(3)",
		"select id from t where sleep(0.1) = 0",
		"SELECT GET_LOCK('x', 10)",
		"SELECT BENCHMARK(1000, MD5('x'))",
		"SELECT NEXTVAL(s)",
		"SELECT a FROM t WHERE id = ?",
	} {
		v := Classify(q)
		if !v.ReadOnly || v.Explainable {
			t.Errorf("Classify(%q) = %+v, want read-only and not explainable", q, v)
		}
	}
}

func FuzzClassify(f *testing.F) {
	for _, s := range []string{"SELECT 1", "/*! x */", "'unterminated", "`a", "-- x", "SELECT a INTO @x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v := Classify(s)
		if v.Explainable && !v.ReadOnly {
			t.Fatalf("explainable but not read-only: %q", s)
		}
	})
}
