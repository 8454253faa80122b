DROP TABLE erasure_reverify;
DROP TABLE erasure_resurrections;
DROP TABLE erasure_ledger;
