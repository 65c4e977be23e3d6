-- 0003: what a bounded store keeps for its whole retention, and what it
-- removed. digest_minutes: every statement counted per digest and minute
-- (statement rows themselves are sampled and trimmed first); kept is how
-- many of its calls have a statement row. trims: each removal of old rows,
-- so a report says from when the store holds what.
CREATE TABLE digest_minutes (
    run_id        INTEGER NOT NULL,
    minute_us     INTEGER NOT NULL,
    digest        TEXT    NOT NULL,
    digest_text   TEXT    NOT NULL DEFAULT '',
    calls         INTEGER NOT NULL,
    kept          INTEGER NOT NULL DEFAULT 0,
    errors        INTEGER NOT NULL DEFAULT 0,
    joined        INTEGER NOT NULL DEFAULT 0,
    client_us     INTEGER NOT NULL DEFAULT 0,
    max_client_us INTEGER NOT NULL DEFAULT 0,
    queue_us      INTEGER NOT NULL DEFAULT 0,
    exec_us       INTEGER NOT NULL DEFAULT 0,
    send_stall_us INTEGER NOT NULL DEFAULT 0,
    server_us     INTEGER NOT NULL DEFAULT 0,
    "rows"        INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, minute_us, digest)
);
CREATE INDEX digest_minutes_time ON digest_minutes (minute_us);

CREATE TABLE trims (
    id        INTEGER PRIMARY KEY,
    t_us      INTEGER NOT NULL,
    reason    TEXT    NOT NULL,            -- age or size
    before_us INTEGER NOT NULL,            -- statements older than this are gone
    "rows"    INTEGER NOT NULL
);
