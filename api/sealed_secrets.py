"""The rotation of the secrets key: every stored secret re-wrapped under the current key.

The secrets stored sealed (``config.encryption``): webhook endpoints' signing secrets (current
and previous), the console's cookie key, and the stored idempotent answers that carry a new
webhook secret. A rotation without downtime:

1. Every process runs with the new key as ``CUSTODY_SECRETS_KEY`` and the previous one as
   ``CUSTODY_SECRETS_KEY_OLD``: both open, new values are sealed under the new one.
2. ``custody secrets rotate-key`` (``rotate_key``) re-wraps, in bounded batches each committed
   on its own, every data key still wrapped under another key; the secrets themselves do not
   change, so signing goes on throughout (a receiver notices nothing). Safe to run again, and
   beside the engine: a row whose secret changed meanwhile (an endpoint rotated) is left to the
   next run, which finds it only if it is still under the old key.
3. When it reports nothing left under another key, drop ``CUSTODY_SECRETS_KEY_OLD``.

A value under a key the process does not have stops the run with ``secret_unreadable``: it
names the key id, and nothing of that batch is written.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.engine import Engine

from api.repository import console as console_repo
from api.repository import idempotency as idempotency_repo
from api.repository import outbox as outbox_repo
from config.encryption import (
    CONSOLE_PURPOSE,
    Keyring,
    keyring,
    purpose_of_answer,
    purpose_of_endpoint,
)
from config.uow import UnitOfWork


@dataclass
class RotationReport:
    """What ``rotate_key`` re-wrapped, and what it left (changed meanwhile: run it again)."""

    key_id: str
    endpoints: int = 0
    console: int = 0
    answers: int = 0
    skipped: int = 0

    @property
    def rewrapped(self) -> int:
        """Values re-wrapped in all."""
        return self.endpoints + self.console + self.answers


def rotate_key(engine: Engine, *, keys: Keyring | None = None, batch_max: int = 200,
               batches_max: int = 10_000) -> RotationReport:
    """Re-wrap every stored secret not under the current key (``keys``: this process's),
    ``batch_max`` rows per committed batch, at most ``batches_max`` batches per table."""
    keys = keys or keyring()
    report = RotationReport(keys.current.id)
    _endpoints(engine, keys, report, batch_max, batches_max)
    _console(engine, keys, report)
    _answers(engine, keys, report, batch_max, batches_max)
    return report


def _endpoints(engine: Engine, keys: Keyring, report: RotationReport, batch_max: int,
               batches_max: int) -> None:
    after = 0
    for _ in range(batches_max):
        with UnitOfWork(engine) as uow:
            rows = outbox_repo.endpoints_sealed_elsewhere(uow.conn, keys.current.id, after,
                                                          batch_max)
            for endpoint_id, secret, previous in rows:
                purpose = purpose_of_endpoint(endpoint_id)
                now = (keys.rewrap(secret, purpose),
                       None if previous is None else keys.rewrap(previous, purpose))
                if outbox_repo.rewrap_endpoint(uow.conn, endpoint_id, (secret, previous), now):
                    report.endpoints += 1
                else:
                    report.skipped += 1
            uow.commit()
        if len(rows) < batch_max:
            return
        after = rows[-1][0]


def _console(engine: Engine, keys: Keyring, report: RotationReport) -> None:
    with UnitOfWork(engine) as uow:
        # The row lock: a process storing the first secret at the same time waits for us.
        sealed = console_repo.sealed_signing_secret(uow.conn)
        if sealed is None or keys.is_current(sealed):
            return
        console_repo.rewrap_signing_secret(uow.conn, keys.rewrap(sealed, CONSOLE_PURPOSE))
        uow.commit()
    report.console += 1


def _answers(engine: Engine, keys: Keyring, report: RotationReport, batch_max: int,
             batches_max: int) -> None:
    for _ in range(batches_max):
        done = 0
        with UnitOfWork(engine) as uow:
            rows = idempotency_repo.sealed_answers_elsewhere(uow.conn, keys.current.id,
                                                             batch_max)
            for client_id, operation, key, body in rows:
                sealed = keys.rewrap(body, purpose_of_answer(client_id, operation, key))
                if idempotency_repo.rewrap_answer(uow.conn, client_id, operation, key, body,
                                                  sealed):
                    done += 1
            uow.commit()
        report.answers += done
        # An answer is never re-sealed by anyone else: a batch that re-wrapped nothing made
        # no progress (the rows went away meanwhile), and stopping bounds the loop.
        if len(rows) < batch_max or done == 0:
            return


def stored_under_other_keys(engine: Engine, *, keys: Keyring | None = None) -> int:
    """How many stored secrets are still sealed under another key than the current one."""
    keys = keys or keyring()
    with UnitOfWork(engine) as uow:
        endpoints = outbox_repo.endpoints_sealed_elsewhere(uow.conn, keys.current.id, 0,
                                                           1_000_000)
        sealed = console_repo.signing_secret_stored(uow.conn)
        answers = idempotency_repo.sealed_answers_elsewhere(uow.conn, keys.current.id,
                                                            1_000_000)
    console = 0 if sealed is None or keys.is_current(sealed) else 1
    return len(endpoints) + console + len(answers)
