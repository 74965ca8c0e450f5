"""Stream Load data semantics (spec §5): headers → a load plan → typed rows with ``__op``.

A plan is compiled once per load channel (the first load of a (label, table)) because the real
BE requires every later load of the channel to carry identical parameters (``load request not
equal last.``). Row conversion is code-generated per plan so the hot loop is one Python call per
row, not one per cell: the ingest ceiling matters for the benchmarks built on the emulator.

Planning errors (bad ``columns``, a NOT NULL column that nothing fills) raise
:class:`LoadPlanError` (the BE answers ``ANALYSIS_ERROR``); header errors raise it with
``INVALID_ARGUMENT``; row-level problems only count filtered rows, checked against
``max_filter_ratio`` at prepare/commit.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from devstack.starrocks.catalog import TableSchema, split_top_level, unquote
from devstack.starrocks.coltypes import BAD, converter, default_value, fast_check
from devstack.starrocks.storage import OP_DELETE, OP_UPSERT, OpRow

# Headers whose values must be identical on every load of one channel (spec §2.2).
PLAN_HEADERS = (
    "format",
    "columns",
    "where",
    "column_separator",
    "row_delimiter",
    "partitions",
    "temporary_partitions",
    "negative",
    "strict_mode",
    "timezone",
    "jsonpaths",
    "json_root",
    "strip_outer_array",
    "partial_update",
    "partial_update_mode",
    "merge_condition",
    "max_filter_ratio",
)
MAX_ERROR_LINES = 100
_OPS = {"0": OP_UPSERT, "1": OP_DELETE, "upsert": OP_UPSERT, "delete": OP_DELETE}
_MISSING: Any = object()


class LoadPlanError(Exception):
    """The load cannot be planned; ``status`` is the BE status name to answer with."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message

    def __reduce__(self) -> tuple[type[LoadPlanError], tuple[str, str]]:
        return (type(self), (self.status, self.message))


@dataclass
class LoadResult:
    """What one load body produced."""

    rows: list[OpRow] = field(default_factory=list)
    total: int = 0
    filtered: int = 0
    unselected: int = 0
    errors: list[str] = field(default_factory=list)


def plan_key(headers: Mapping[str, str]) -> tuple[str | None, ...]:
    """The parameter fingerprint compared across loads of one channel."""
    return tuple(headers.get(h) for h in PLAN_HEADERS)


def _decode_sep(value: str) -> str:
    r"""Decode StarRocks separator notation (``\x01`` hex, ``\t``, ``\n``)."""
    if value.lower().startswith("\\x") and len(value) > 2:
        try:
            return bytes.fromhex(value[2:]).decode("latin-1")
        except ValueError:
            return value
    return value.replace("\\t", "\t").replace("\\n", "\n").replace("\\r", "\r")


@dataclass(frozen=True)
class _Expr:
    """A ``columns`` entry ``target = expr``: a constant or a reference to a source field."""

    target: str
    source: str | None
    constant: Any


def _parse_columns(text: str) -> list[str | _Expr]:
    out: list[str | _Expr] = []
    for item in split_top_level(text):
        if "=" not in item:
            out.append(unquote(item))
            continue
        target, expr = (p.strip() for p in item.split("=", 1))
        target = unquote(target)
        if re.fullmatch(r"'[^']*'|\"[^\"]*\"", expr):
            out.append(_Expr(target, None, expr[1:-1]))
        elif re.fullmatch(r"-?\d+(\.\d+)?", expr):
            out.append(_Expr(target, None, expr))
        elif re.fullmatch(r"(?i)now\(\)|current_timestamp(\(\))?", expr):
            out.append(_Expr(target, None, "CURRENT_TIMESTAMP"))
        elif re.fullmatch(r"`?[\w$]+`?", expr):
            out.append(_Expr(target, unquote(expr), None))
        else:
            msg = f"The emulator does not support the column expression: {item}"
            msg_0 = "ANALYSIS_ERROR"
            raise LoadPlanError(msg_0, msg)
    return out


def _parse_jsonpath(path: str) -> list[str]:
    path = path.strip()
    if path == "$":
        return []
    if not path.startswith("$."):
        msg = f"Invalid json path: {path}"
        msg_0 = "ANALYSIS_ERROR"
        raise LoadPlanError(msg_0, msg)
    return [p.strip("'\"") for p in path[2:].split(".")]


class LoadPlan:
    """The compiled mapping from one load body to typed table rows."""

    def __init__(self, schema: TableSchema, headers: Mapping[str, str]) -> None:
        self.schema = schema
        self.key = plan_key(headers)
        fmt = (headers.get("format") or "csv").strip().lower()
        if fmt not in ("csv", "json"):
            if fmt in ("gzip", "bzip2", "lz4", "deflate", "zstd"):
                msg = f"The emulator does not support compressed format, format={fmt}"
            else:
                msg = f"unknown data format, format={headers.get('format')}"
            msg_0 = "INVALID_ARGUMENT"
            raise LoadPlanError(msg_0, msg)
        self.format = fmt
        strict = headers.get("strict_mode")
        if strict is not None and strict.lower() not in ("true", "false"):
            msg_0 = "INVALID_ARGUMENT"
            raise LoadPlanError(msg_0, "Invalid strict mode format. Must be bool type")
        self.strict = (strict or "").lower() == "true"
        try:
            self.max_filter_ratio = float(headers.get("max_filter_ratio") or 0)
        except ValueError as e:
            msg = f"Invalid max_filter_ratio: {headers.get('max_filter_ratio')}"
            msg_0 = "INVALID_ARGUMENT"
            raise LoadPlanError(msg_0, msg) from e
        self.strip_outer_array = (headers.get("strip_outer_array") or "").lower() == "true"
        self.json_root = _parse_jsonpath(headers["json_root"]) if headers.get("json_root") else None
        self.column_separator = _decode_sep(headers.get("column_separator") or "\t")
        self.row_delimiter = _decode_sep(headers.get("row_delimiter") or "\n")
        columns = _parse_columns(headers["columns"]) if headers.get("columns") else None
        jsonpaths: list[list[str]] | None = None
        if headers.get("jsonpaths"):
            try:
                raw = json.loads(headers["jsonpaths"])
            except ValueError as e:
                msg = f"Invalid jsonpaths: {headers['jsonpaths']}"
                msg_0 = "ANALYSIS_ERROR"
                raise LoadPlanError(msg_0, msg) from e
            if not isinstance(raw, list):
                msg = f"Invalid jsonpaths: {headers['jsonpaths']}"
                msg_0 = "ANALYSIS_ERROR"
                raise LoadPlanError(msg_0, msg)
            jsonpaths = [_parse_jsonpath(str(p)) for p in raw]
        self._build(columns, jsonpaths)

    def _build(self, columns: list[str | _Expr] | None, jsonpaths: list[list[str]] | None) -> None:
        schema = self.schema
        has_op = schema.is_primary
        if columns is None:
            sources: list[str] = [c.name for c in schema.columns]
            if jsonpaths is not None:
                sources = sources[: len(jsonpaths)]
            elif self.format == "json" and has_op:
                sources = [*sources, "__op"]
            exprs: list[_Expr] = []
        else:
            sources = [c for c in columns if isinstance(c, str)]
            exprs = [c for c in columns if isinstance(c, _Expr)]
        self.sources = sources
        self.jsonpaths = jsonpaths
        # target column -> ("src", index in sources) | ("const", value)
        binding: dict[str, tuple[str, Any]] = {}
        for i, s in enumerate(sources):
            col = schema.column(s)
            if col is not None:
                binding[col.name] = ("src", i)
            elif s.lower() == "__op":
                binding["__op"] = ("src", i)
        for e in exprs:
            col = schema.column(e.target)
            target = col.name if col is not None else e.target
            if col is None and e.target.lower() != "__op":
                msg = f"Unknown column '{e.target}' in '{schema.name}'"
                msg_0 = "ANALYSIS_ERROR"
                raise LoadPlanError(msg_0, msg)
            if e.source is not None:
                idx = next((i for i, s in enumerate(sources) if s.lower() == e.source.lower()), -1)
                if idx < 0:
                    msg = f"Unknown column '{e.source}' in '{schema.name}'"
                    msg_0 = "ANALYSIS_ERROR"
                    raise LoadPlanError(msg_0, msg)
                binding["__op" if col is None else target] = ("src", idx)
            else:
                binding["__op" if col is None else target] = ("const", e.constant)
        if columns is not None or jsonpaths is not None:
            for c in schema.columns:
                if c.name not in binding and not c.nullable and c.default is None:
                    msg = f"Column '{c.name}' has no default value and is not nullable"
                    msg_0 = "ANALYSIS_ERROR"
                    raise LoadPlanError(msg_0, msg)
        self._compile(binding)

    def _compile(self, binding: dict[str, tuple[str, Any]]) -> None:
        """Generate the row function ``f(v) -> row`` for this plan.

        ``v`` is the JSON object itself in simple JSON mode (no intermediate list per row),
        else a list indexed by source position.
        """
        ns: dict[str, Any] = {"BAD": BAD, "MISSING": _MISSING, "CI": _key_ci}
        by_key = self._by_key = self.format == "json" and self.jsonpaths is None
        sources = self.sources

        def access(idx: int) -> str:
            if not by_key:
                return f"v[{idx}]"
            # Column names are case-insensitive in StarRocks, JSON keys included; the exact
            # spelling is the fast path, any other spelling the slow one.
            name = sources[idx]
            return f"(v[{name!r}] if {name!r} in v else CI(v, {name!r}))"

        parts = []
        not_null: list[int] = []
        to_null: list[int] = []
        for i, c in enumerate(self.schema.columns):
            ns[f"c{i}"] = converter(c)
            ns[f"d{i}"] = default_value(c)
            kind, arg = binding.get(c.name, ("const", _MISSING))
            if kind == "src":
                slow = f"(d{i} if x is MISSING else c{i}(x))"
                fast = fast_check(c, f"f{i}")
                if fast is None:
                    parts.append(f"(d{i} if (x := {access(arg)}) is MISSING else c{i}(x))")
                else:
                    ns.update(fast[1])
                    parts.append(
                        f"(x if ((x := {access(arg)}) is not None and {fast[0]}) else {slow})"
                    )
            elif arg is _MISSING:
                parts.append(f"d{i}")
            else:
                ns[f"k{i}"] = ns[f"c{i}"](
                    default_value(c)
                    if arg == "CURRENT_TIMESTAMP" and c.type_name == "DATETIME"
                    else arg
                )
                parts.append(f"k{i}")
            if not c.nullable:
                not_null.append(i)
            if not self.strict and c.type_name not in ("VARCHAR", "CHAR"):
                to_null.append(i)
        row_src = "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
        self._not_null = tuple(not_null)
        self._to_null = tuple(to_null)
        op_bind = binding.get("__op")
        self._op_const = None
        if op_bind and op_bind[0] == "const":
            self._op_const = _OPS.get(str(op_bind[1]).strip().lower())
            if self._op_const is None:
                msg = f"Invalid __op value: {op_bind[1]}"
                status = "ANALYSIS_ERROR"
                raise LoadPlanError(status, msg)
        self._use_op = self.schema.is_primary
        self._key_idx = tuple(
            i for i, c in enumerate(self.schema.columns) if c.name in self.schema.key_columns
        )
        op_src = access(op_bind[1]) if op_bind and op_bind[0] == "src" else None
        self._compile_loop(row_src, op_src, ns)

    # -- parsing ---------------------------------------------------------------------------

    def parse(self, body: bytes) -> LoadResult:
        """Turn one load body into rows (filtered rows counted, never raised)."""
        res = LoadResult()
        if self.format == "json":
            values_iter = self._json_values(body, res)
        else:
            values_iter = self._csv_values(body, res)
        self._convert(values_iter, res)
        return res

    def _json_values(self, body: bytes, res: LoadResult) -> list[Any]:
        if not body.strip():
            return []
        try:
            doc = _loads(body)
        except ValueError as e:
            res.total += 1
            res.filtered += 1
            res.errors.append(f"Error: Parse json data failed. {e}")
            return []
        if self.json_root is not None:
            doc = _walk(doc, self.json_root)
        docs = doc if self.strip_outer_array and isinstance(doc, list) else [doc]
        out: list[Any] = []
        if self.jsonpaths is not None:
            paths = self.jsonpaths
            for d in docs:
                out.append([_walk(d, p) for p in paths] if isinstance(d, dict) else None)
            return out
        return [d if d.__class__ is dict else None for d in docs]

    def _csv_values(self, body: bytes, res: LoadResult) -> list[Any]:
        text = body.decode("utf-8", errors="replace")
        lines = text.split(self.row_delimiter)
        if lines and lines[-1] == "":
            lines.pop()
        n = len(self.sources)
        sep = self.column_separator
        out: list[Any] = []
        for line in lines:
            fields = line.split(sep)
            if len(fields) != n:
                res.total += 1
                res.filtered += 1
                if len(res.errors) < MAX_ERROR_LINES:
                    res.errors.append(
                        f"Error: Value count does not match column count. Expect {n}, "
                        f"but got {len(fields)}. Row: {line[:200]}"
                    )
                continue
            out.append([None if f == "\\N" else f for f in fields])
        return out

    def _convert(self, values_iter: list[Any], res: LoadResult) -> None:
        self._loop(values_iter, res, self)

    def _compile_loop(self, row_src: str, op_src: str | None, ns: dict[str, Any]) -> None:
        """Generate the whole per-row loop, so a well-formed row costs no Python call at all.

        Rows with a BAD value, a NULL, a non-object or an invalid ``__op`` take the slow path
        (:meth:`_slow_row`), which also records the error line.
        """
        op_default = OP_UPSERT if self._op_const is None else self._op_const
        if op_src is None or not self._use_op:
            op_code = f"op = {op_default if self._use_op else OP_UPSERT}"
        else:
            op_code = "\n        ".join(
                [
                    f"raw = {op_src}",
                    "if raw is MISSING or raw is None:",
                    f"    op = {op_default}",
                    "elif raw == 0 or raw == 1:",
                    "    op = int(raw)",
                    "else:",
                    "    op = OPS.get(str(raw).strip().lower(), -1)",
                    "    if op < 0:",
                    "        filtered += 1",
                    "        plan._note(res, f'Error: Invalid __op value {raw!r}')",
                    "        continue",
                ]
            )
        code = f"""
def loop(values, res, plan):
    append = res.rows.append
    filtered = 0
    total = 0
    for v in values:
        total += 1
        if v is None:
            filtered += 1
            plan._note(res, "Error: The json row is not an object.")
            continue
        row = {row_src}
        {op_code}
        if BAD in row or None in row:
            row = plan._slow_row(row, v, res, op)
            if row is None:
                filtered += 1
                continue
        append((op, row))
    res.total += total
    res.filtered += filtered
"""
        ns["OPS"] = _OPS
        exec(compile(code, "<loadplan-loop>", "exec"), ns)  # noqa: S102  # fixed template
        self._loop = ns["loop"]

    def _note(self, res: LoadResult, line: str) -> None:
        if len(res.errors) < MAX_ERROR_LINES:
            res.errors.append(line)

    def _slow_row(self, row: tuple[Any, ...], v: Any, res: LoadResult, op: int) -> Any:
        """BAD values become NULL (non-strict) or filter the row; then the NOT NULL check.

        A delete only needs its key; other NOT NULL columns may be absent.
        """
        if BAD in row:
            fixed = list(row)
            for i, x in enumerate(fixed):
                if x is BAD:
                    if i not in self._to_null:
                        self._note(
                            res, f"Error: Value does not fit the column type. Row: {v!r:.200}"
                        )
                        return None
                    fixed[i] = None
            row = tuple(fixed)
        required = self._key_idx if op == OP_DELETE and self._use_op else self._not_null
        if any(row[i] is None for i in required):
            self._note(res, f"Error: NULL value in non-nullable column. Row: {v!r:.200}")
            return None
        return row


# orjson parses a load body in half the stdlib's time. It reads an integer beyond 64 bits as
# a double and refuses what the stdlib takes (NaN, a lone surrogate, a BOM, UTF-16), so a body
# with 19 digits in a row, or one it refuses, is the stdlib's: same values, same error text.
# (Digits found by translate + find: a regex takes twice as long as the parse.)
_DIGITS_AS_ZERO = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
_LONG_DIGITS = b"0" * 19


def _loads(body: bytes) -> Any:
    if body.translate(_DIGITS_AS_ZERO).find(_LONG_DIGITS) < 0:
        try:
            return orjson.loads(body)
        except orjson.JSONDecodeError:
            pass
    return json.loads(body)


def _key_ci(obj: dict[str, Any], name: str) -> Any:
    """``obj[name]`` matched case-insensitively, or the MISSING marker."""
    low = name.lower()
    for key, value in obj.items():
        if key.lower() == low:
            return value
    return _MISSING


def _walk(doc: Any, path: list[str]) -> Any:
    for p in path:
        if not isinstance(doc, dict):
            return None
        doc = doc.get(p)
    return doc
