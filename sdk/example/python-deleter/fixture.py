"""Test helper for conformance_test.go: seeds and reads the SQLite file with
Python's own sqlite3, never through the plugin. One JSON request per line
on stdin, one JSON answer per line on stdout."""

import hashlib
import json
import sqlite3
import sys


def main():
    db = None
    for line in sys.stdin:
        req = json.loads(line)
        op = req["op"]
        try:
            if op == "create":
                db = sqlite3.connect(req["path"], timeout=30, isolation_level=None)
                db.executescript("""
                    CREATE TABLE items (id INTEGER PRIMARY KEY, tenant_id TEXT NOT NULL, payload TEXT);
                    CREATE INDEX items_tenant ON items (tenant_id);""")
                out = {}
            elif op == "seed":
                db.execute("BEGIN")
                db.executemany("INSERT INTO items (tenant_id, payload) VALUES (?, ?)",
                               ((req["tenant"], f"item {i} of {req['tenant']!r}") for i in range(req["n"])))
                db.execute("COMMIT")
                out = {"n": req["n"]}
            elif op == "remaining":
                (n,) = db.execute("SELECT COUNT(*) FROM items WHERE tenant_id = ? COLLATE BINARY", (req["tenant"],)).fetchone()
                out = {"n": n}
            elif op == "checksum":
                h = hashlib.sha256()
                for row in db.execute("SELECT id, tenant_id, payload FROM items WHERE tenant_id = ? COLLATE BINARY ORDER BY id", (req["tenant"],)):
                    h.update(repr(row).encode())
                out = {"sum": h.hexdigest()}
            else:
                out = {"error": "unknown op " + op}
        except sqlite3.Error as e:
            out = {"error": str(e)}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


main()
