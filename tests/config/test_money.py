"""The one parser of decimal amount text, at its edges (pure: no database)."""

from __future__ import annotations

import pytest

from config.money import TEXT_MAX, AmountTextInvalid, parse_decimal_amount
from ledger.model import AMOUNT_LIMIT, format_amount

BIG = AMOUNT_LIMIT - 1  # 2^127 - 1 = 170141183460469231731687303715884105727 (39 digits)
UINT256_MAX = 2**256 - 1  # 78 digits


class TestExact:
    @pytest.mark.parametrize(("text", "scale", "minor"), [
        ("0", 0, 0),
        ("0", 18, 0),
        ("0.0", 1, 0),
        ("1.6", 2, 160),
        ("1.60", 2, 160),
        ("007", 0, 7),
        ("007.50", 2, 750),
        ("0.000001", 6, 1),
    ])
    def test_small_values(self, text: str, scale: int, minor: int) -> None:
        assert parse_decimal_amount(text, scale) == minor

    def test_the_issue_example_is_not_rounded(self) -> None:
        # 29 significant digits: Decimal's default 28-digit context gave ...345680.
        assert (parse_decimal_amount("12345678901.123456789012345678", 18)
                == 12_345678901_123456789_012345678)

    @pytest.mark.parametrize("digits", [27, 28, 29, 30, 31])
    def test_the_28_digit_context_boundary(self, digits: int) -> None:
        text = "9" * digits
        assert parse_decimal_amount(text, 0) == 10**digits - 1
        assert parse_decimal_amount(text[:-1] + "." + text[-1], 1) == 10**digits - 1
        assert parse_decimal_amount("1" + "0" * (digits - 1) + ".1", 1) == 10**digits + 1

    def test_largest_amount_at_scale_0(self) -> None:
        assert parse_decimal_amount(str(BIG), 0) == BIG

    def test_largest_amount_at_scale_38(self) -> None:
        # 2^127 is about 1.7e38: at scale 38 the whole part is at most 1.
        text = "1.70141183460469231731687303715884105727"
        assert parse_decimal_amount(text, 38) == BIG
        assert parse_decimal_amount("0." + "0" * 37 + "1", 38) == 1

    def test_uint256_values(self) -> None:
        assert len(str(UINT256_MAX)) == 78
        assert parse_decimal_amount(str(UINT256_MAX), 0) == UINT256_MAX
        text = str(UINT256_MAX)
        assert parse_decimal_amount(text[:-18] + "." + text[-18:], 18) == UINT256_MAX
        assert parse_decimal_amount(text, 77) == UINT256_MAX * 10**77

    def test_fewer_decimals_than_the_scale_are_padded(self) -> None:
        assert parse_decimal_amount("1.5", 18) == 15 * 10**17


class TestRefused:
    @pytest.mark.parametrize(("text", "why"), [
        ("", "empty"),
        (" 1", "whitespace"),
        ("1 ", "whitespace"),
        ("1\n", "whitespace"),
        ("1\u00a0", "whitespace"),
        ("\u0661\u0662\u0663", "ASCII"),  # Arabic-Indic 123: int() takes it
        ("\u06f1\u06f2", "ASCII"),  # Extended Arabic-Indic (Persian) 12
        ("\uff11", "ASCII"),  # fullwidth 1
        ("1_0", "underscore"),
        ("+1", "sign"),
        ("-1", "sign"),
        ("-0", "sign"),
        ("1e3", "exponent"),
        ("1E3", "exponent"),
        ("1.5e-1", "exponent"),
        ("0.", "both sides"),
        (".5", "both sides"),
        (".", "both sides"),
        ("1.2.3", "expected digits"),
        ("1,5", "expected digits"),
        ("0x10", "expected digits"),
        ("NaN", "expected digits"),
        ("Infinity", "expected digits"),
    ])
    def test_malformed(self, text: str, why: str) -> None:
        with pytest.raises(AmountTextInvalid, match=why):
            parse_decimal_amount(text, 18)

    @pytest.mark.parametrize(("text", "scale"), [
        ("1.605", 2),
        ("1.60", 1),  # even a trailing zero: the text says more than the scale holds
        ("0.5", 0),
        ("5.0", 0),
        ("0." + "0" * 38 + "1", 38),
    ])
    def test_more_decimals_than_the_scale(self, text: str, scale: int) -> None:
        with pytest.raises(AmountTextInvalid, match="never rounded"):
            parse_decimal_amount(text, scale)

    @pytest.mark.parametrize("value", [1, 1.5, None, b"1", True])
    def test_not_a_string(self, value: object) -> None:
        with pytest.raises(AmountTextInvalid, match="decimal string"):
            parse_decimal_amount(value, 0)  # type: ignore[arg-type]

    def test_too_long(self) -> None:
        assert parse_decimal_amount("1" * TEXT_MAX, 0) == int("1" * TEXT_MAX)
        with pytest.raises(AmountTextInvalid, match="at most"):
            parse_decimal_amount("1" * (TEXT_MAX + 1), 0)

    def test_the_message_is_bounded(self) -> None:
        with pytest.raises(AmountTextInvalid) as caught:
            parse_decimal_amount("x" * TEXT_MAX, 0)
        assert len(caught.value.message) < 200

    def test_code(self) -> None:
        assert AmountTextInvalid.code == "amount_text_invalid"


class TestRoundTrip:
    """``format_amount`` renders what ``parse_decimal_amount`` reads, exactly, at the edges."""

    @pytest.mark.parametrize(("minor", "scale", "text"), [
        (BIG, 0, "170141183460469231731687303715884105727"),
        (BIG, 38, "1.70141183460469231731687303715884105727"),
        (1, 38, "0." + "0" * 37 + "1"),
        (0, 38, "0." + "0" * 38),
        (160, 2, "1.60"),
        (10**28 + 1, 18, "10000000000.000000000000000001"),
    ])
    def test_format_then_parse(self, minor: int, scale: int, text: str) -> None:
        assert format_amount(minor, scale) == text
        assert parse_decimal_amount(text, scale) == minor

    def test_negative_largest_amount_renders(self) -> None:
        assert format_amount(-BIG, 38) == "-1.70141183460469231731687303715884105727"
