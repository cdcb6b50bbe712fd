-- Money movements (every kind but usage, which comes from the hot path) commit here first and are then
-- applied to the hot path (Redis or memory). applied_at says the hot path took one; a movement whose
-- hot-path step failed (Redis down after the commit) stays NULL until the movement sweeper applies it.
ALTER TABLE ledger_entries ADD COLUMN applied_at timestamptz;
-- Entries written before this column were applied by their writers (or counted by a seed).
UPDATE ledger_entries SET applied_at = created_at WHERE kind <> 'usage';
CREATE INDEX ledger_entries_hot_pending ON ledger_entries (id) WHERE applied_at IS NULL AND kind <> 'usage';
