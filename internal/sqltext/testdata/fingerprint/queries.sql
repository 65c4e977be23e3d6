SELECT c FROM sbtest1 WHERE id=5021;
SELECT c FROM sbtest12 WHERE id BETWEEN 4992 AND 5091;
SELECT SUM(k) FROM sbtest3 WHERE id BETWEEN 1 AND 100;
SELECT c FROM sbtest2 WHERE id BETWEEN 10 AND 109 ORDER BY c;
SELECT DISTINCT c FROM sbtest4 WHERE id BETWEEN 10 AND 109 ORDER BY c ASC;
UPDATE sbtest1 SET k=k+1 WHERE id=4999;
UPDATE sbtest1 SET c='83868641912-28773972837-60736120486' WHERE id=5010;
DELETE FROM sbtest1 WHERE id=5002;
INSERT INTO sbtest1 (id, k, c, pad) VALUES (5002, 4989, '0386-83868641912', '3434');
INSERT INTO t (a,b) VALUES (1,'x'),(2,'y'),(3,'z');
insert ignore into t values(1),(2) , (3);
REPLACE INTO t VALUES (1, "two");
BEGIN;
COMMIT;
select * from t where a in (1, 2, 3) and b in ('a','b');
SELECT * FROM t WHERE x = NULL OR y IS NULL AND z = TRUE and w=false;
SELECT /* hello */ 1 -- trailing
;
select a from t order by a asc, b ASC, c desc, ascore;
SELECT a FROM t LIMIT 10, 20;
SELECT a FROM t LIMIT 10 OFFSET 20;
select a from t1 union select a from t1 union all select a from t1;
CALL myproc(1, 'a');
call db.p2();
use sbtest;
USE `my db`;
SELECT 0xFF, X'0A', b'101', 1.5e10, -3, +4;
SELECT "it\"s", 'it\'s', 'a''b';
SELECT /*!40001 SQL_NO_CACHE */ * FROM `t`;
SELECT * FROM t /*db.tbl:1/2*/ WHERE 1;
SELECT col1, md5col FROM t_5f4dcc3b5aa765d61d8327deb882cf99 WHERE a = 'b';
SELECT * FROM  t
   WHERE   a = 1
	AND b = 2;
SELECT * FROM t WHERE d = '2024-01-01 10:00:00' AND e IN (SELECT id FROM u WHERE v IN (1,2));
insert into t values (1,2);
INSERT INTO t SELECT * FROM u WHERE a IN (1,2);
select values(a) from t;
SELECT a FROM t WHERE name LIKE 'abc%' ORDER BY a DESC LIMIT 5;
SET NAMES utf8mb4;
SHOW /*!50002 GLOBAL */ STATUS;
SELECT * FROM t WHERE a = 'x' -- it's a comment
;
SELECT * FROM t WHERE a=1 # hash comment
;
SELECT 1/*c*/+2;
SELECT a-1, a - 1, a--1 FROM t;
SELECT a FROM t WHERE b IN ( 1 , 2 ) , (3);
select * from x where y in(
 1,
 2);
select 1 union select 1;
SELECT 'unterminated;
select "a" "b" 'c';
SELECT a FROM t ORDER BY a ASC LIMIT 1 , 2;
select * from `sbtest1` where c = 'x' /* comment */ /*! executed */;
INSERT INTO t(a) VALUE (1), (2);
SELECT 1e-5, .5, 5., 0b1, -0x1f FROM t;
SELECT ÄÖÜ FROM Täble WHERE x = 'Ü';
