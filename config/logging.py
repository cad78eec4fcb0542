"""Logs: one JSON object per line on stderr, a correlation id on every line, no secret in any.

- ``setup_logging`` configures the root logger once per process (the CLI entry points and the
  API's worker processes call it): JSON lines by default, or text for humans with
  ``--log-format text`` or ``CUSTODY_LOG_FORMAT=text``; the level from ``CUSTODY_LOG_LEVEL``
  (default INFO) for the engine's own loggers (``ENGINE_LOGGERS``), WARNING for every
  library (DEBUG shows theirs too), so that ``custody watch`` or the demo print no library's
  info or debug lines.
- Every line has ``time`` (UTC, ISO 8601), ``level``, ``logger``, ``message``, the
  ``correlation_id`` when one is set, and the record's context fields (``extra={...}``). The
  correlation id lives in a context variable: the API sets the request id for a request
  (``X-Request-ID``), the scheduler a fresh id for each job step, and every line written under
  it carries it, the ledger's ``posted`` line with the transaction id included: that is how a
  request or a job step is followed to the ledger transaction it wrote.
- Redaction is applied to the finished line, whatever logged it: the values of the secrets the
  configuration names (``register_secret``: seed phrases, hot-wallet keys, signer URLs, RPC
  URLs with credentials), the values of environment variables whose names say they hold a
  secret, and patterns that are secret wherever they appear (API keys ``cust_<prefix>_<secret>``,
  ``Authorization: Bearer ...``, webhook secrets ``whsec_...``, the password of a URL).
"""

from __future__ import annotations

import contextvars
import json
import logging
import os
import re
import sys
import threading
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import fields, is_dataclass
from datetime import UTC, datetime
from typing import IO, Any

FORMAT_ENV = "CUSTODY_LOG_FORMAT"
LEVEL_ENV = "CUSTODY_LOG_LEVEL"
FORMATS = ("json", "text")
REDACTED = "[redacted]"
#: Secrets shorter than this are not registered: replacing "1" everywhere would garble logs
#: and protect nothing.
SECRET_CHARS_MIN = 8

correlation_id: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "custody_correlation_id", default=None)
#: Context fields added to every line written under ``correlated`` (the job's name...).
_context: contextvars.ContextVar[Mapping[str, Any] | None] = contextvars.ContextVar(
    "custody_log_context", default=None)

#: Attributes every LogRecord has; anything else on a record is a context field.
_RECORD_FIELDS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message", "asctime", "taskName"}
#: (a lower-case marker, the pattern, its replacement): a pattern runs only on a line holding
#: its marker (a substring test costs a fraction of a regex scan of the line).
_PATTERNS = (
    # API keys: cust_<12 hex prefix>_<secret>; the prefix is public and kept.
    ("cust_", re.compile(r"\b(cust_[0-9a-f]{12}_)[A-Za-z0-9_\-]+"), r"\1" + REDACTED),
    ("bearer", re.compile(r"(?i)\b(bearer\s+)[^\s\"',;]+"), r"\1" + REDACTED),
    ("authorization",
     re.compile(r"(?i)(authorization[\"']?\s*[:=]\s*[\"']?)(?!bearer\s)[^\s\"',;]+"),
     r"\1" + REDACTED),
    ("whsec_", re.compile(r"\bwhsec_[A-Za-z0-9]+"), "whsec_" + REDACTED),
    # user:password@ in any URL (database URLs, RPC URLs with basic credentials).
    ("://", re.compile(r"(\b[a-z][a-z0-9+.\-]*://[^:/@\s\"']+:)[^@\s\"']+@"),
     r"\1" + REDACTED + "@"),
)
#: Environment variables whose values are secrets by their name.
_SECRET_ENV_NAME = re.compile(
    r"(?i)(secret|mnemonic|seed|private|passw|token|credential|api_?key|signer_url|_key$"
    r"|database_url)")


class _Secrets:
    """The secret values to scrub from every line (thread-safe; grows, never shrinks)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: tuple[str, ...] = ()

    def add(self, value: str | None) -> None:
        if not value or len(value) < SECRET_CHARS_MIN:
            return
        forms = {value, json.dumps(value)[1:-1]}
        with self._lock:
            # Longest first, so that a secret containing another is replaced whole.
            self._values = tuple(sorted(set(self._values) | forms, key=len, reverse=True))

    @property
    def values(self) -> tuple[str, ...]:
        return self._values


_secrets = _Secrets()


def register_secret(value: str | None) -> None:
    """Never let ``value`` appear in a log line (it is replaced by ``[redacted]``)."""
    _secrets.add(value)


def register_environment_secrets(environ: Mapping[str, str] | None = None) -> None:
    """Register the values of the environment variables whose names say they hold a secret."""
    for name, value in (os.environ if environ is None else environ).items():
        if _SECRET_ENV_NAME.search(name):
            register_secret(value)


def register_configured_secrets(configs: Iterable[object],
                                environ: Mapping[str, str] | None = None) -> None:
    """Register the values of every environment variable that ``configs`` name in a field
    ending in ``_env`` (``mnemonic_env``, ``key_env``, ``signer_url_env``, ``rpc_url_env``...):
    the configuration only ever names secrets that way (README, "Settings")."""
    source = os.environ if environ is None else environ
    for name in _env_names(configs, depth=6):
        register_secret(source.get(name))


def _env_names(objects: Iterable[object], depth: int) -> Iterator[str]:
    for obj in objects:
        if depth <= 0 or obj is None or isinstance(obj, str | int | float | bool | bytes):
            continue
        if isinstance(obj, Mapping):
            yield from _env_names(obj.values(), depth - 1)
            continue
        if isinstance(obj, list | tuple | set | frozenset):
            yield from _env_names(obj, depth - 1)
            continue
        if is_dataclass(obj) and not isinstance(obj, type):
            items = [(f.name, getattr(obj, f.name, None)) for f in fields(obj)]
        elif hasattr(obj, "model_fields"):  # pydantic
            items = [(n, getattr(obj, n, None)) for n in type(obj).model_fields]
        else:
            continue
        for name, value in items:
            if name.endswith("_env") and isinstance(value, str):
                yield value
            elif name.endswith("_url") and isinstance(value, str) and _carries_credential(value):
                # An RPC URL read from its *_env variable keeps no trace of the variable's
                # name: an API key in its path or query is a secret all the same.
                register_secret(value)
            else:
                yield from _env_names([value], depth - 1)


def _carries_credential(url: str) -> bool:
    """Whether a URL may hold a credential: user info, a query, or a path (node providers
    put the API key there); ``http://127.0.0.1:8545`` does not."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return bool(parts.username or parts.password or parts.query or parts.path.strip("/"))


def redact(text: str) -> str:
    """``text`` without any registered secret or secret-looking pattern."""
    for value in _secrets.values:
        if value in text:
            text = text.replace(value, REDACTED)
    lower = text.lower()
    for marker, pattern, replacement in _PATTERNS:
        if marker in lower:
            text = pattern.sub(replacement, text)
    return text


def new_correlation_id() -> str:
    """A fresh correlation id (32 hex digits, as the API's request ids)."""
    return uuid.uuid4().hex


@contextmanager
def correlated(value: str | None = None, **fields: Any) -> Iterator[str]:
    """Set the correlation id (a fresh one unless given), and context ``fields`` added to every
    line, for the duration of the block."""
    value = value or new_correlation_id()
    token = correlation_id.set(value)
    context_token = _context.set({**(_context.get() or {}), **fields}) if fields else None
    try:
        yield value
    finally:
        if context_token is not None:
            _context.reset(context_token)
        correlation_id.reset(token)


def context_fields(record: logging.LogRecord) -> dict[str, Any]:
    """The record's context fields: what the caller passed with ``extra``, then those of the
    enclosing ``correlated`` block."""
    found = {k: v for k, v in vars(record).items() if k not in _RECORD_FIELDS}
    for key, value in (_context.get() or {}).items():
        found.setdefault(key, value)
    return found


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, correlation_id, context fields,
    and the traceback as ``exception``; redacted."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(
                timespec="milliseconds"),
            "level": record.levelname, "logger": record.name, "message": record.getMessage()}
        cid = getattr(record, "correlation_id", None) or correlation_id.get()
        if cid is not None:
            doc["correlation_id"] = cid
        for key, value in context_fields(record).items():
            doc.setdefault(key, value)
        if record.exc_info:
            doc["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            doc["exception"] = record.exc_text
        if record.stack_info:
            doc["stack"] = self.formatStack(record.stack_info)
        return redact(json.dumps(doc, default=str, ensure_ascii=False))


class TextFormatter(logging.Formatter):
    """``time level logger [correlation id] message key=value...``, for humans; redacted."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        extra = context_fields(record)
        cid = extra.pop("correlation_id", None) or correlation_id.get()
        if extra:
            line += " " + " ".join(f"{k}={v}" for k, v in extra.items())
        if cid is not None:
            line += f" correlation_id={cid}"
        return redact(line)


def formatter_for(fmt: str) -> logging.Formatter:
    """The formatter of ``fmt`` (``json`` or ``text``)."""
    if fmt not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    return JsonFormatter() if fmt == "json" else TextFormatter()


_HANDLER_NAME = "custody"
#: The engine's own loggers: they log at the chosen level (INFO for the services).
ENGINE_LOGGERS = ("custody", "outgoing", "sweeps", "withdrawals")
#: Libraries that log every statement, request or job run (SQLAlchemy's statements and their
#: parameters, httpx's requests, APScheduler's runs, Alembic's plugins): warnings only, even
#: at DEBUG.
QUIET_LIBRARIES = ("sqlalchemy", "httpx", "httpcore", "apscheduler", "urllib3", "web3",
                   "asyncio", "multipart", "alembic", "pgserver", "eth_utils", "eth_account")


def setup_logging(fmt: str | None = None, *, level: str | None = None,
                  stream: IO[str] | None = None) -> logging.Handler:
    """Send every log line of this process to ``stream`` (stderr) in ``fmt`` (argument, else
    ``$CUSTODY_LOG_FORMAT``, else json), replacing the handler of an earlier call; registers
    the environment's secrets. Returns the handler."""
    fmt = fmt or os.environ.get(FORMAT_ENV) or "json"
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(formatter_for(fmt))
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(old)
    root.addHandler(handler)
    chosen = logging.getLevelNamesMapping().get(
        (level or os.environ.get(LEVEL_ENV) or "INFO").upper(), logging.INFO)
    # Every other library (web3, asyncio, pgserver, ...) speaks at WARNING and above: their
    # INFO lines are noise beside the engine's. Asking for DEBUG shows theirs too, but the
    # quiet ones'.
    root.setLevel(chosen if chosen <= logging.DEBUG else max(logging.WARNING, chosen))
    for name in ENGINE_LOGGERS:
        logging.getLogger(name).setLevel(chosen)
    # Our own lines say what a request did (with its id); uvicorn's access line would repeat
    # each request without it.
    logging.getLogger("uvicorn.access").disabled = True
    for name in QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(max(logging.WARNING, chosen))
    register_environment_secrets()
    return handler


def engine_level() -> str:
    """The level the engine's own loggers log at (what ``setup_logging`` chose)."""
    return logging.getLevelName(logging.getLogger(ENGINE_LOGGERS[0]).getEffectiveLevel())


def ensure_logging(level: str = "INFO") -> logging.Handler:
    """``setup_logging`` unless it ran already in this process (the ``custody`` callback's
    ``--log-format`` wins): what each command that runs the engine calls first, so that it logs
    the same when its Typer group is run on its own."""
    for handler in logging.getLogger().handlers:
        if handler.get_name() == _HANDLER_NAME:
            return handler
    return setup_logging(level=os.environ.get(LEVEL_ENV) or level)
