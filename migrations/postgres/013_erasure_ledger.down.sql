DROP TABLE IF EXISTS lifecycle.erasure_reverify;
DROP TABLE IF EXISTS lifecycle.erasure_resurrections;
DROP TABLE IF EXISTS lifecycle.erasure_ledger;
