-- overhead: one measured round of `gapscope overhead` (a workload run under
-- one instrumentation setting). position is the setting's place in the
-- rotation (0 = the baseline the others are compared with); round numbers the
-- rotation, so rows with the same run_id and round are a pair.
CREATE TABLE overhead (
    id         INTEGER PRIMARY KEY,
    run_id     INTEGER NOT NULL,
    t_us       INTEGER NOT NULL,
    config     TEXT    NOT NULL,
    position   INTEGER NOT NULL,
    round      INTEGER NOT NULL,
    tps        REAL    NOT NULL,
    qps        REAL    NOT NULL,
    lat_avg_us INTEGER NOT NULL,
    lat_p95_us INTEGER NOT NULL,
    errors     INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX overhead_run ON overhead (run_id, position, round);
