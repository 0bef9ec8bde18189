-- One row per process start, keyed by its owner name (unique: it holds host, pid and a nonce),
-- not one per slot: two clusters on one store, or one per machine, each have a replica 0.
CREATE TABLE processes_by_owner (
  role TEXT NOT NULL, idx INTEGER NOT NULL, pid INTEGER NOT NULL, owner TEXT PRIMARY KEY,
  started_ms BIGINT NOT NULL, exited_ms BIGINT
);
INSERT INTO processes_by_owner (role, idx, pid, owner, started_ms, exited_ms)
SELECT role, idx, pid, owner, started_ms, exited_ms FROM processes;
DROP TABLE processes;
ALTER TABLE processes_by_owner RENAME TO processes;
