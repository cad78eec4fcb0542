"""The engine's one parser of decimal amount text: ``"12.5"`` at scale 6 is ``12_500_000``.

Every amount that arrives as text (configuration limits, fees and minimums; minor units in API
requests and provider notifications) goes through :func:`parse_decimal_amount`, so that one
grammar decides what an amount string is. It works on the digit string with integer arithmetic,
never through ``Decimal`` (whose default 28-digit context rounds silently) or ``float``, so it
is exact at every length it accepts, a 78-digit uint256 included.

The grammar is JSON's number grammar without sign, exponent or surrounding space: ASCII digits,
optionally a point followed by more digits (``"0"``, ``"007"``, ``"1.50"``). Everything else is
refused with :class:`AmountTextInvalid`, never rounded or tidied: more fractional digits than
the scale (even zeros), a sign (no text amount in the engine is negative), an exponent,
whitespace, an empty string, a point without digits on both sides (``".5"``, ``"0."``),
underscores (``int("1_0") == 10``) and non-ASCII digits (``int("١٢٣") == 123``).

The parser knows nothing of the ledger's 128-bit range: callers bound the value where they
must, and translate the error into their own (422 for the API, ConfigurationInvalid for the
configuration). It lives in ``config`` because both ``config`` and ``api`` use it and ``config``
imports no domain package.
"""

from __future__ import annotations

import re

from config.errors import CustodyError

#: The longest text accepted: far above a uint256 (78 digits) at the largest scale (77).
TEXT_MAX = 200

# [0-9] is a range of code points, so it matches the ASCII digits only (unlike \d); fullmatch
# leaves no room for a trailing newline (unlike $).
_AMOUNT = re.compile(r"(?P<whole>[0-9]+)(?:\.(?P<fraction>[0-9]+))?")


class AmountTextInvalid(CustodyError):
    """A text is not a decimal amount representable exactly at the required scale."""

    code = "amount_text_invalid"


def parse_decimal_amount(text: str, scale: int) -> int:
    """``text`` as an exact count of minor units of ``scale`` decimals, or AmountTextInvalid.

    ``parse_decimal_amount("1.6", 2) == 160``; ``"1.605"`` at scale 2 is refused, not rounded.
    """
    assert isinstance(scale, int) and scale >= 0, f"a scale is a non-negative int, got {scale!r}"
    if not isinstance(text, str):
        raise AmountTextInvalid(f"an amount must be a decimal string, got {type(text).__name__}")
    if len(text) > TEXT_MAX:
        raise AmountTextInvalid(f"an amount has at most {TEXT_MAX} characters, got {len(text)}")
    match = _AMOUNT.fullmatch(text)
    if match is None:
        raise AmountTextInvalid(f"{_shown(text)} is not a decimal amount: {_flaw(text)}")
    whole, fraction = match["whole"], match["fraction"] or ""
    if len(fraction) > scale:
        raise AmountTextInvalid(f"{_shown(text)} has {len(fraction)} decimals; at most {scale} "
                                "are allowed (an amount is never rounded)")
    return int(whole + fraction.ljust(scale, "0"))


def _shown(text: str) -> str:
    # Bounded, so that an API problem never echoes a large body back.
    return repr(text) if len(text) <= 50 else repr(text[:50]) + "..."


def _flaw(text: str) -> str:
    """Why ``text`` does not match the grammar, in words for the error message."""
    if not text:
        return "it is empty"
    if any(c.isspace() for c in text):
        return "it contains whitespace"
    if not text.isascii():
        return "only the ASCII digits 0-9 are digits here"
    if "_" in text:
        return "it contains an underscore"
    if text[0] in "+-":
        return "it has a sign (amounts are written without one)"
    if "e" in text or "E" in text:
        return "it has an exponent"
    if text.startswith(".") or text.endswith("."):
        return "a point needs digits on both sides"
    return "expected digits, optionally a point and more digits, like 12.5"
