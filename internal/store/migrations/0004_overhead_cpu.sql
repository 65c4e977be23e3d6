-- 0004: the CPU time (server and gapscope's process) each overhead round
-- used per transaction, in nanoseconds; 0 where it was not measured (a
-- server that is not a sandbox, or a round stored before this column).
-- overhead decides its verdicts on it where every pair has it, so a
-- report rebuilt from the store decides as the run did.
ALTER TABLE overhead ADD COLUMN cpu_per_tx_ns INTEGER NOT NULL DEFAULT 0;
