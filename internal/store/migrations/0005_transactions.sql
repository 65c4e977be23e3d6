-- 0005: transactions and lock waits (docs/events.md, "Transactions").
--
-- statements: where the statement ran in its connection's transactions and
-- the lock wait inside its exec. lock_wait_us is NULL when no lock wait is
-- known (0: one is known and took no time); the blocker_* columns and
-- root_conn_id are NULL when no blocker was named, and are there to be
-- queried (which connection blocked most); blocked_by keeps the whole
-- blocker as the events file writes it (JSON: conn, digest, sql redacted
-- as sql is, held_us, idle_us, source, evidence, root), so that a reader
-- gets back what watch knew.
ALTER TABLE statements ADD COLUMN txn                INTEGER NOT NULL DEFAULT 0;  -- 0: outside a transaction
ALTER TABLE statements ADD COLUMN txn_end            TEXT    NOT NULL DEFAULT ''; -- commit, rollback, implicit, open
ALTER TABLE statements ADD COLUMN txn_idle_before_us INTEGER NOT NULL DEFAULT 0;
ALTER TABLE statements ADD COLUMN txn_start          INTEGER NOT NULL DEFAULT 0;
ALTER TABLE statements ADD COLUMN lock_wait_us       INTEGER;
ALTER TABLE statements ADD COLUMN blocker_conn_id    INTEGER;
ALTER TABLE statements ADD COLUMN blocker_kind       TEXT;                        -- row, metadata, table
ALTER TABLE statements ADD COLUMN blocker_state      TEXT;                        -- running, idle_in_transaction, '' unknown
ALTER TABLE statements ADD COLUMN blocker_confidence TEXT;                        -- certain, high, low
ALTER TABLE statements ADD COLUMN root_conn_id       INTEGER;                     -- the head of a lock chain, NULL: none
ALTER TABLE statements ADD COLUMN blocked_by         TEXT;                        -- JSON object or NULL

-- digest_minutes: the lock waits of every statement counted (kept or not):
-- lock_waits counts the calls with a known wait over 0, lock_wait_us sums
-- those waits (part of exec_us).
ALTER TABLE digest_minutes ADD COLUMN lock_waits   INTEGER NOT NULL DEFAULT 0;
ALTER TABLE digest_minutes ADD COLUMN lock_wait_us INTEGER NOT NULL DEFAULT 0;

-- transactions: one row per finished transaction (or one still open when
-- its connection closed or the run ended: "end" = 'open'), the same names
-- as watch --txns writes. route is the route tag of tags, for queries.
CREATE TABLE transactions (
    id           INTEGER PRIMARY KEY,
    run_id       INTEGER NOT NULL,
    conn         TEXT    NOT NULL,
    conn_id      INTEGER NOT NULL DEFAULT 0,
    user         TEXT    NOT NULL DEFAULT '',
    db           TEXT    NOT NULL DEFAULT '',
    txn          INTEGER NOT NULL,
    t_start      INTEGER NOT NULL,
    t_end        INTEGER NOT NULL,
    "end"        TEXT    NOT NULL,          -- commit, rollback, implicit, open
    statements   INTEGER NOT NULL DEFAULT 0,
    open_us      INTEGER NOT NULL DEFAULT 0,
    joined       INTEGER NOT NULL DEFAULT 0,
    server_us    INTEGER NOT NULL DEFAULT 0,
    in_app_us    INTEGER NOT NULL DEFAULT 0,
    max_idle_us  INTEGER NOT NULL DEFAULT 0,
    lock_wait_us INTEGER NOT NULL DEFAULT 0,
    first_digest TEXT    NOT NULL DEFAULT '',
    first_sql    TEXT    NOT NULL DEFAULT '',
    lead_digest  TEXT    NOT NULL DEFAULT '',
    lead_sql     TEXT    NOT NULL DEFAULT '',
    route        TEXT    NOT NULL DEFAULT '',
    tags         TEXT,                      -- JSON object or NULL
    blocked      INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX transactions_time ON transactions (t_start);
CREATE INDEX transactions_run ON transactions (run_id);
CREATE INDEX transactions_idle ON transactions (max_idle_us);
