"""A TenantDeleter for a table of a SQLite file, written in Python against
the plugin protocol (docs/plugin-protocol.md) without the Go SDK.

    [[deleter]]
    name = "sqlite:notes"
    path = "/usr/lib/lifecycled/plugins/lifecycled-plugin-sqlite.pyz"
    [deleter.config]
    path = "/srv/notes.sqlite"   # the database file (it must exist)
    table = "notes"              # default "items"
    tenant_column = "tenant_id"  # default "tenant_id"
    batch_size = 500             # rows per transaction, default 500

What the Go SDK would do for it, it does itself: the tenant id checks of
sdk.CheckTenantID, error classes in ErrorInfo, field problems naming the
key, a partial count on every failed Delete, stopping at cancellation.
"""

import hashlib
import json
import os
import re
import sqlite3
import threading
import unicodedata
import urllib.parse

import goplugin
from goplugin import PluginError, abort, canceled, invalid_argument, invalid_config, log, plan_changed, unavailable
from lifecycled.plugin.v1 import plugin_pb2, plugin_pb2_grpc

VERSION = "0.1.0"
MAX_TENANT_ID_LENGTH = 255
UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def check_format(fmt):
    """The daemon's tenant_id_format: "uuid" (or empty), or a regular
    expression. Python's re is not Go's RE2: formats that use only common
    syntax (classes, repetition, alternation) mean the same in both."""
    if fmt in ("", "uuid"):
        return UUID_RE
    try:
        return re.compile(fmt)
    except re.error as e:
        raise invalid_config(("tenant_id_format", f"{fmt!r} is not a valid regular expression: {e}"))


def check_tenant_id(pattern, tenant):
    """sdk.CheckTenantID: refuse, permanently, an id the daemon would never
    send; a plugin does not rely on the daemon's check."""
    if not tenant:
        raise invalid_argument("empty tenant id")
    if len(tenant.encode()) > MAX_TENANT_ID_LENGTH:
        raise invalid_argument(f"tenant id is {len(tenant.encode())} bytes long (at most {MAX_TENANT_ID_LENGTH})")
    if any(unicodedata.category(ch) == "Cc" for ch in tenant):
        raise invalid_argument(f"tenant id {tenant!r} contains a control character")
    if not pattern.fullmatch(tenant):
        raise invalid_argument(f"tenant id {tenant!r} does not match tenant_id_format")


def quote(name):
    return '"' + name.replace('"', '""') + '"'


class Config:
    def __init__(self, raw):
        problems = []
        for key in raw:
            if key not in ("path", "table", "tenant_column", "batch_size"):
                problems.append((key, "unknown key"))
        self.path = raw.get("path")
        if not isinstance(self.path, str) or not os.path.isabs(self.path):
            problems.append(("path", "required: the absolute path of the SQLite file"))
        self.table = raw.get("table", "items")
        if not isinstance(self.table, str) or not IDENT_RE.fullmatch(self.table):
            problems.append(("table", "must be a plain table name (letters, digits, _)"))
        self.column = raw.get("tenant_column", "tenant_id")
        if not isinstance(self.column, str) or not IDENT_RE.fullmatch(self.column):
            problems.append(("tenant_column", "must be a plain column name (letters, digits, _)"))
        self.batch = raw.get("batch_size", 500)
        if isinstance(self.batch, float) and self.batch.is_integer():
            self.batch = int(self.batch)
        if not isinstance(self.batch, int) or isinstance(self.batch, bool) or not 1 <= self.batch <= 100000:
            problems.append(("batch_size", "must be a whole number from 1 to 100000"))
        if problems:
            raise invalid_config(*problems)


class SQLiteDeleter(plugin_pb2_grpc.TenantDeleterServicer):
    def __init__(self):
        self._lock = threading.Lock()
        self._cfg = None
        self._pattern = None

    def _connect(self, cfg):
        """A connection per call: a file that was moved or unmounted since
        must be an error (retryable), never an empty tenant. mode=rw: the
        file is never created."""
        if not os.path.isfile(cfg.path):
            raise unavailable(f"path: {cfg.path} is not there (not mounted?)")
        try:
            db = sqlite3.connect(f"file:{urllib.parse.quote(cfg.path)}?mode=rw", uri=True, timeout=10, isolation_level=None)
        except sqlite3.Error as e:
            raise unavailable(f"path: cannot open {cfg.path}: {e}")
        return db

    def Configure(self, request, context):
        try:
            try:
                raw = json.loads(request.config_json or b"{}")
            except ValueError as e:
                raise invalid_config(("config", f"not a JSON object: {e}"))
            if not isinstance(raw, dict):
                raise invalid_config(("config", "not a JSON object"))
            cfg = Config(raw)
            pattern = check_format(request.tenant_id_format)
            db = self._connect(cfg)
            try:
                warnings = self._check_schema(db, cfg)
            finally:
                db.close()
            with self._lock:
                self._cfg, self._pattern = cfg, pattern
            log.info("configured", name=request.name, table=cfg.table)
            return plugin_pb2.ConfigureResponse(plugin_version=VERSION, warnings=warnings)
        except PluginError as e:
            abort(context, e)

    def _check_schema(self, db, cfg):
        cols = {row[1]: row[2] for row in db.execute(f"PRAGMA table_info({quote(cfg.table)})")}
        if not cols:
            raise invalid_config(("table", f"no table {cfg.table!r} in {cfg.path}"))
        if cfg.column not in cols:
            raise invalid_config(("tenant_column", f"table {cfg.table} has no column {cfg.column!r}"))
        # SQLite converts a value to the column's affinity before comparing:
        # in an INTEGER or NUMERIC column "04" is stored, and compared, as 4,
        # so one tenant would have many spellings. Only TEXT affinity (a
        # declared type with CHAR, CLOB or TEXT) keeps ids as written.
        decl = (cols[cfg.column] or "").upper()
        if not any(word in decl for word in ("CHAR", "CLOB", "TEXT")):
            raise invalid_config(("tenant_column", f"{cfg.table}.{cfg.column} is declared {decl or 'without a type'}; "
                                  "it needs TEXT affinity (TEXT, VARCHAR, ...) to keep tenant ids as written"))
        try:
            db.execute(f"SELECT rowid FROM {quote(cfg.table)} LIMIT 0")
        except sqlite3.Error:
            raise invalid_config(("table", f"{cfg.table} is a WITHOUT ROWID table, which this deleter does not support"))
        indexed = False
        for idx in db.execute(f"PRAGMA index_list({quote(cfg.table)})").fetchall():
            first = db.execute(f"PRAGMA index_info({quote(idx[1])})").fetchone()
            if first and first[2] == cfg.column:
                indexed = True
        if not indexed:
            return [f"table {cfg.table} has no index leading with {cfg.column}: every delete batch scans the table "
                    f"(CREATE INDEX ON {quote(cfg.table)} ({quote(cfg.column)}))"]
        return []

    def _prepare(self, tenant):
        with self._lock:
            cfg, pattern = self._cfg, self._pattern
        if cfg is None:
            raise unavailable("not configured")
        check_tenant_id(pattern, tenant)
        return cfg

    # COLLATE BINARY overrides any collation the column was declared with
    # (NOCASE, RTRIM): tenant ids match byte for byte.
    def _where(self, cfg):
        return f"{quote(cfg.column)} = ? COLLATE BINARY"

    def Count(self, request, context):
        try:
            cfg = self._prepare(request.tenant_id)
            db = self._connect(cfg)
            try:
                (n,) = db.execute(f"SELECT COUNT(*) FROM {quote(cfg.table)} WHERE {self._where(cfg)}", (request.tenant_id,)).fetchone()
            except sqlite3.Error as e:
                raise unavailable(f"count: {e}")
            finally:
                db.close()
            return plugin_pb2.CountResponse(count=n, breakdown={cfg.table: n})
        except PluginError as e:
            abort(context, e)

    def _fingerprint(self, cfg, db):
        """The plan's fingerprint: a hash of the file (its real path: an
        approved plan is for this database, not another with the same
        table), the table, the tenant column and its declared type (read
        again, so a changed column shows), never the tenant or a count."""
        try:
            cols = {row[1]: row[2] for row in db.execute(f"PRAGMA table_info({quote(cfg.table)})")}
        except sqlite3.Error as e:
            raise unavailable(f"plan: {e}")
        if cfg.column not in cols:
            raise invalid_config(("tenant_column", f"table {cfg.table} has no column {cfg.column!r} any more"))
        basis = json.dumps(["sqlite plan 2", os.path.realpath(cfg.path), cfg.table, cfg.column, cols[cfg.column]])
        return "sha256:" + hashlib.sha256(basis.encode()).hexdigest()

    def Plan(self, request, context):
        """The deletion plan (optional in the protocol): one step, the table,
        with Count's count, under _fingerprint."""
        try:
            cfg = self._prepare(request.tenant_id)
            db = self._connect(cfg)
            try:
                fingerprint = self._fingerprint(cfg, db)
                (n,) = db.execute(f"SELECT COUNT(*) FROM {quote(cfg.table)} WHERE {self._where(cfg)}", (request.tenant_id,)).fetchone()
            except sqlite3.Error as e:
                raise unavailable(f"plan: {e}")
            finally:
                db.close()
            return plugin_pb2.PlanResponse(
                steps=[plugin_pb2.PlanStep(target=cfg.table, via=f"tenant column {cfg.column} (COLLATE BINARY)", expected=n)],
                fingerprint=fingerprint)
        except PluginError as e:
            abort(context, e)

    def Delete(self, request, context):
        """Deletes batch_size rows per transaction, reports progress after
        each, and stops at the next batch when the daemon cancels. When the
        daemon sends the fingerprint of the plan it checked, the file must
        still give it, or nothing is deleted (the store changed since)."""
        deleted = 0
        try:
            cfg = self._prepare(request.tenant_id)
            db = self._connect(cfg)
            try:
                if request.plan_fingerprint:
                    now = self._fingerprint(cfg, db)
                    if now != request.plan_fingerprint:
                        raise plan_changed(request.plan_fingerprint, now)
                stat = os.stat(cfg.path)
                q = (f"DELETE FROM {quote(cfg.table)} WHERE rowid IN "
                     f"(SELECT rowid FROM {quote(cfg.table)} WHERE {self._where(cfg)} LIMIT ?)")
                while True:
                    if not context.is_active():
                        raise canceled()
                    # The file must still be the one opened: one moved away
                    # (unmounted) is a failure, not a deletion that went on.
                    try:
                        now = os.stat(cfg.path)
                    except OSError:
                        now = None
                    if now is None or (now.st_dev, now.st_ino) != (stat.st_dev, stat.st_ino):
                        raise unavailable(f"path: {cfg.path} went away during the delete")
                    try:
                        n = db.execute(q, (request.tenant_id, cfg.batch)).rowcount
                    except sqlite3.Error as e:
                        raise unavailable(f"delete: {e}")
                    if n <= 0:
                        break
                    deleted += n
                    yield plugin_pb2.DeleteEvent(progress=plugin_pb2.DeleteProgress(deleted_so_far=deleted))
            finally:
                db.close()
            yield plugin_pb2.DeleteEvent(result=plugin_pb2.DeleteResult(deleted_count=deleted, breakdown={cfg.table: deleted}))
        except PluginError as e:
            abort(context, e.partial(deleted))


def main():
    goplugin.serve(lambda server: plugin_pb2_grpc.add_TenantDeleterServicer_to_server(SQLiteDeleter(), server))
