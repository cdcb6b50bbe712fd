-- A top-up's refunds and dispute holds are found by the top-up they reference (src/top-ups/service.ts);
-- without an index that was a scan of every ledger entry, one per request served. Partial: usage
-- entries carry no reference, so the journal's inserts do not touch it.
CREATE INDEX ledger_entries_by_reference ON ledger_entries (reference) WHERE reference IS NOT NULL;
-- Written for every usage entry and read by no query: a request's usage is found in usage_records.
DROP INDEX ledger_entries_by_request;
