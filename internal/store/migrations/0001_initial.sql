-- 0001: the first schema. Migrations are append-only: never edit a file once
-- it has shipped; add the next number instead (a test holds their hashes).

CREATE TABLE runs (
    id       INTEGER PRIMARY KEY,
    start_us INTEGER NOT NULL,
    end_us   INTEGER NOT NULL DEFAULT 0,   -- 0 while running or after a kill
    command  TEXT    NOT NULL,
    dsn      TEXT    NOT NULL DEFAULT '',  -- redacted: never a password
    notes    TEXT    NOT NULL DEFAULT ''
);

-- statements: one row per statement event (docs/events.md), same names.
CREATE TABLE statements (
    id             INTEGER PRIMARY KEY,
    run_id         INTEGER NOT NULL,
    conn           TEXT    NOT NULL,
    conn_id        INTEGER NOT NULL DEFAULT 0,
    user           TEXT    NOT NULL DEFAULT '',
    db             TEXT    NOT NULL DEFAULT '',
    cmd            TEXT    NOT NULL,
    sql            TEXT    NOT NULL DEFAULT '',
    digest         TEXT    NOT NULL DEFAULT '',
    digest_text    TEXT    NOT NULL DEFAULT '',
    t_req_first    INTEGER NOT NULL,
    t_req_last     INTEGER NOT NULL,
    t_resp_first   INTEGER NOT NULL DEFAULT 0,
    t_resp_last    INTEGER NOT NULL DEFAULT 0,
    client_us      INTEGER NOT NULL DEFAULT 0,
    request_us     INTEGER NOT NULL DEFAULT 0,
    queue_us       INTEGER NOT NULL DEFAULT 0,
    exec_us        INTEGER NOT NULL DEFAULT 0,
    send_stall_us  INTEGER NOT NULL DEFAULT 0,
    delivery_us    INTEGER NOT NULL DEFAULT 0,
    server_us      INTEGER NOT NULL DEFAULT 0,
    rows           INTEGER NOT NULL DEFAULT 0,
    req_bytes      INTEGER NOT NULL DEFAULT 0,
    resp_bytes     INTEGER NOT NULL DEFAULT 0,
    error_code     INTEGER,                -- NULL when the statement succeeded
    error_state    TEXT,
    error_msg      TEXT,
    zero_window_us INTEGER NOT NULL DEFAULT 0,
    retransmits    INTEGER NOT NULL DEFAULT 0,
    pool_group     INTEGER,                -- NULL when unknown
    joined         INTEGER NOT NULL DEFAULT 0,
    notes          TEXT                    -- JSON array or NULL
);
CREATE INDEX statements_time ON statements (t_req_first);
CREATE INDEX statements_run ON statements (run_id);

CREATE TABLE samples (
    id     INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL,
    t_us   INTEGER NOT NULL,
    source TEXT    NOT NULL,
    name   TEXT    NOT NULL,
    value  REAL    NOT NULL,
    labels TEXT                            -- JSON object or NULL
);
CREATE INDEX samples_time ON samples (t_us);
CREATE INDEX samples_run ON samples (run_id);

CREATE TABLE findings (
    id       INTEGER PRIMARY KEY,
    run_id   INTEGER NOT NULL,
    t_us     INTEGER NOT NULL,
    code     TEXT    NOT NULL,
    severity TEXT    NOT NULL,
    summary  TEXT    NOT NULL,
    evidence TEXT    NOT NULL,             -- JSON object
    fix      TEXT    NOT NULL
);
CREATE INDEX findings_time ON findings (t_us);
CREATE INDEX findings_run ON findings (run_id);

-- probe_results: one canary round beside the concurrency it ran under.
CREATE TABLE probe_results (
    id                INTEGER PRIMARY KEY,
    run_id            INTEGER NOT NULL,
    t_us              INTEGER NOT NULL,
    name              TEXT    NOT NULL,
    calls             INTEGER NOT NULL,
    errors            INTEGER NOT NULL DEFAULT 0,
    min_us            INTEGER NOT NULL,
    avg_us            INTEGER NOT NULL,
    median_us         INTEGER NOT NULL,
    max_us            INTEGER NOT NULL,
    threads_connected INTEGER NOT NULL DEFAULT 0,
    threads_running   INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX probe_results_time ON probe_results (t_us);

-- plans: a plan caught while a statement ran, or the usual plan of a digest.
CREATE TABLE plans (
    id            INTEGER PRIMARY KEY,
    run_id        INTEGER NOT NULL,
    t_us          INTEGER NOT NULL,
    conn_id       INTEGER NOT NULL DEFAULT 0,
    digest        TEXT    NOT NULL DEFAULT '',
    digest_text   TEXT    NOT NULL DEFAULT '',
    source        TEXT    NOT NULL,        -- SHOW EXPLAIN FOR, EXPLAIN FOR CONNECTION, ...
    plan          TEXT    NOT NULL,
    exec_us       INTEGER NOT NULL DEFAULT 0,
    rows_examined INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX plans_time ON plans (t_us);
CREATE INDEX plans_digest ON plans (digest);
