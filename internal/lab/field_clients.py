"""gapscope lab field: the Python clients (python3-pymysql, python3-mysqldb).

Usage: python3 field_clients.py CONDITION JSON-SETTINGS

Each statement the client runs is printed as one JSON line:
  {"cond", "client", "conn_id", "cmd", "match", "start_us", "end_us",
   "client_us", "error"}
start_us/end_us are the host's wall clock around the call (what the
application's own timer would cover), client_us the monotonic time the call
took, error the server's error number (0: none).
"""

import json
import os
import sys
import tempfile
import threading
import time

COND = sys.argv[1]
CFG = json.loads(sys.argv[2])
_out = threading.Lock()


def emit(client, conn_id, cmd, match, run):
    """Times run() as an application would and prints the record."""
    err = 0
    start = time.time()
    p0 = time.perf_counter()
    try:
        run()
    except Exception as e:  # the server's error is part of the record
        code = e.args[0] if e.args and isinstance(e.args[0], int) else -1
        if code <= 0:
            raise
        err = code
    took = time.perf_counter() - p0
    end = time.time()
    rec = {"cond": COND, "client": client, "conn_id": conn_id, "cmd": cmd, "match": match,
           "start_us": int(start * 1e6), "end_us": int(end * 1e6),
           "client_us": int(took * 1e6), "error": err}
    with _out:
        print(json.dumps(rec), flush=True)


def pymysql_conn(host=None, **kw):
    import pymysql
    args = dict(host=host or CFG["host"], port=CFG["port"], user=CFG["user"],
                password=CFG["password"], database="field", autocommit=True)
    args.update(kw)
    return pymysql.connect(**args)


def mysqldb_conn(**kw):
    import MySQLdb
    args = dict(host=CFG["host"], port=CFG["port"], user=CFG["user"],
                password=CFG["password"], database="field", autocommit=True)
    args.update(kw)
    return MySQLdb.connect(**args)


def query(conn, sql):
    """Runs sql and reads every result set, as an application does."""
    def run():
        cur = conn.cursor()
        cur.execute(sql)
        while True:
            cur.fetchall()
            if not cur.nextset():
                break
        cur.close()
    return run


def sleeps(client, conn, n, sql="SELECT SLEEP(0.1)", cmd="COM_QUERY", match="SLEEP"):
    for _ in range(n):
        emit(client, conn.thread_id(), cmd, match, query(conn, sql))


def tls_pymysql():
    import ssl
    c = pymysql_conn(ssl={"ca": CFG["ca"]})
    if not isinstance(c._sock, ssl.SSLSocket):
        raise SystemExit("pymysql: the connection is not encrypted")
    sleeps("pymysql", c, 3)
    c.close()


def ipv6():
    c = pymysql_conn(host="::1")
    sleeps("pymysql", c, 3)
    c.close()


def timeout():
    c = pymysql_conn()
    for _ in range(2):
        emit("pymysql", c.thread_id(), "COM_QUERY", "SLEEP",
             query(c, "SET STATEMENT max_statement_time=0.1 FOR SELECT SLEEP(1)"))
    c.close()


def multi():
    from pymysql.constants import CLIENT
    c = pymysql_conn(client_flag=CLIENT.MULTI_STATEMENTS)
    for _ in range(3):
        emit("pymysql", c.thread_id(), "COM_QUERY", "SLEEP", query(c, "SELECT 1; SELECT SLEEP(0.1)"))
    c.close()


def load_data():
    rows = CFG.get("rows", 50000)
    fd, path = tempfile.mkstemp(suffix=".csv", dir=CFG.get("tmp"))
    with os.fdopen(fd, "w") as f:
        for i in range(rows):
            f.write("%d,row %d of the field lab's load\n" % (i + 1, i + 1))
    c = pymysql_conn(local_infile=True)
    emit("pymysql", c.thread_id(), "COM_QUERY", "LOAD",
         query(c, "LOAD DATA LOCAL INFILE '%s' INTO TABLE field.ld FIELDS TERMINATED BY ','" % path))
    c.close()
    os.unlink(path)


def big_insert():
    size = CFG.get("bytes", 20 * 1000 * 1000)
    c = pymysql_conn(max_allowed_packet=64 * 1024 * 1024)
    sql = "INSERT INTO field.big (id, b) VALUES (1, '" + "x" * size + "')"
    emit("pymysql", c.thread_id(), "COM_QUERY", "INSERT", query(c, sql))
    c.close()


def churn():
    """Connection per request, as PHP does: connect, 3 point selects, close;
    CFG["conns"] connections, CFG["parallel"] at a time."""
    conns, parallel = CFG.get("conns", 300), CFG.get("parallel", 3)
    left = list(range(conns))
    lock = threading.Lock()

    def worker(w):
        while True:
            with lock:
                if not left:
                    return
                i = left.pop()
            c = pymysql_conn()
            for k in range(3):
                emit("pymysql", c.thread_id(), "COM_QUERY", "FIELD.T",
                     query(c, "SELECT v FROM field.t WHERE id = %d" % (1 + (i * 3 + k) % 1000)))
            c.close()

    ts = [threading.Thread(target=worker, args=(w,)) for w in range(parallel)]
    started = time.time()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    took = time.time() - started
    print(json.dumps({"cond": COND, "summary": "%d connections in %.2f s (%.0f/s)" % (conns, took, conns / took)}), flush=True)


def call():
    c = mysqldb_conn()
    sleeps("MySQLdb", c, 3, sql="CALL field.slow_proc()", match="CALL")
    c.close()


def compressed():
    c = mysqldb_conn(compress=1)
    sleeps("MySQLdb", c, 3)
    emit("MySQLdb", c.thread_id(), "COM_QUERY", "SEQ_1_TO_20000", query(c, "SELECT seq, REPEAT('z', 40) FROM seq_1_to_20000"))
    c.close()


def change_user():
    c = mysqldb_conn()
    sleeps("MySQLdb", c, 1)
    emit("MySQLdb", c.thread_id(), "COM_CHANGE_USER", "",
         lambda: c.change_user(CFG["user2"], CFG["password2"], "field"))
    sleeps("MySQLdb", c, 1)
    c.close()


CONDITIONS = {
    "tls_pymysql": tls_pymysql, "ipv6": ipv6, "timeout": timeout, "multi_statement": multi,
    "load_data": load_data, "big_insert": big_insert, "churn": churn,
    "call": call, "compressed": compressed, "change_user": change_user,
}

if __name__ == "__main__":
    CONDITIONS[COND]()
