"""Provider statements on plain values (``reconcile.provider_model``): parsing CSV and JSON
into records (a malformed file is refused with one line naming where), and matching by
reference, never by amount, with the clearing remainder per asset."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from reconcile.provider_model import (
    Match,
    OurRecord,
    Outcome,
    Reconciliation,
    StatementInvalid,
    StatementRecord,
    match,
    parse_statement,
    reconcile,
    remainders,
    whole_days,
)

T = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
HEADER = "provider,reference,direction,asset,amount_minor,occurred_at,chain,tx_hash\n"


def _theirs(ref: str, amount: int, direction: str = "in", asset: str = "ETH") -> StatementRecord:
    return StatementRecord("acme", ref, "in" if direction == "in" else "out", asset, amount, T)


def _ours(ref: str, net: int, asset: str = "ETH") -> OurRecord:
    return OurRecord(ref, asset, net, T, (1,))


class TestParse:
    def test_csv_records_and_the_whole_days_they_span(self) -> None:
        text = HEADER + ("acme,R1,in,ETH,1000,2026-12-01T10:00:00Z,dev,\n"
                         "acme,R2,out,USDC,5,2026-12-02T23:59:59+00:00,,0x" + "AB" * 32 + "\n")
        s = parse_statement(text, "csv")
        assert s.provider == "acme" and s.format == "csv"
        assert [(r.reference, r.direction, r.asset, r.amount_minor) for r in s.records] == [
            ("R1", "in", "ETH", 1000), ("R2", "out", "USDC", 5)]
        assert s.records[0].chain == "dev" and s.records[0].tx_hash is None
        assert s.records[1].tx_hash == "0x" + "ab" * 32 and s.records[1].signed_minor == -5
        assert (s.period_start, s.period_end) == (datetime(2026, 12, 1, tzinfo=UTC),
                                                  datetime(2026, 12, 3, tzinfo=UTC))

    def test_json_with_its_own_period(self) -> None:
        doc = {"provider": "acme", "period_start": "2026-12-01T00:00:00Z",
               "period_end": "2026-12-01T12:00:00Z",
               "records": [{"reference": "R1", "direction": "in", "asset": "ETH",
                            "amount_minor": str(2**100), "occurred_at": "2026-12-01T10:00:00Z"}]}
        s = parse_statement(json.dumps(doc), "json")
        assert s.records[0].amount_minor == 2**100
        assert s.period_end == datetime(2026, 12, 1, 12, tzinfo=UTC)

    @pytest.mark.parametrize(("text", "says"), [
        ("", "line 1: no header row"),
        ("provider,reference\n", "line 1: header misses direction"),
        (HEADER.replace("tx_hash", "memo"), "unknown columns memo"),
        (HEADER, "no records"),
        (HEADER + "acme,R1,in,ETH,1.5,2026-12-01T10:00:00Z,,\n", "line 2: amount_minor '1.5'"),
        (HEADER + "acme,R1,in,ETH,-3,2026-12-01T10:00:00Z,,\n", "not a whole number"),
        (HEADER + "acme,R1,in,ETH,0,2026-12-01T10:00:00Z,,\n", "above 0"),
        (HEADER + "acme,R1,sideways,ETH,1,2026-12-01T10:00:00Z,,\n", "direction must be"),
        (HEADER + "acme,R1,in,ETH,1,2026-12-01T10:00:00,,\n", "has no time zone"),
        (HEADER + "acme,R1,in,ETH,1,yesterday,,\n", "not an ISO 8601 time"),
        (HEADER + "acme,R1,in,ETH,1\n", "line 2: 8 fields expected"),
        (HEADER + "acme,R1,in,ETH,1,2026-12-01T10:00:00Z,,0x12\n", "not a transaction hash"),
        (HEADER + "acme,R1,in,ETH,1,2026-12-01T10:00:00Z,,\n"
         "other,R2,in,ETH,1,2026-12-01T10:00:00Z,,\n", "line 3: provider 'other' differs"),
        (HEADER + "acme,R1,in,ETH,1,2026-12-01T10:00:00Z,,\n"
         "acme,R1,in,ETH,2,2026-12-01T10:00:00Z,,\n", "reference 'R1' appears twice"),
    ])
    def test_a_malformed_csv_says_where_in_one_line(self, text: str, says: str) -> None:
        with pytest.raises(StatementInvalid) as raised:
            parse_statement(text, "csv")
        assert says in str(raised.value) and "\n" not in str(raised.value)

    @pytest.mark.parametrize(("doc", "says"), [
        ("[1", "line 1: not JSON"),
        ("[]", "must be an object"),
        ('{"provider": "acme"}', "records must be a list"),
        ('{"provider": "Acme Inc", "records": []}', "must be lower-case"),
        ('{"provider": "acme", "records": [{"reference": "R1", "direction": "in", '
         '"asset": "ETH", "amount_minor": 5, "occurred_at": "2026-12-01T10:00:00Z"}]}',
         "record 1: amount_minor must be a string"),
        ('{"provider": "acme", "period_start": "2026-12-02T00:00:00Z", '
         '"period_end": "2026-12-03T00:00:00Z", "records": [{"reference": "R1", '
         '"direction": "in", "asset": "ETH", "amount_minor": "5", '
         '"occurred_at": "2026-12-01T10:00:00Z"}]}', "outside the period"),
        ('{"provider": "acme", "records": [{"reference": "R1", "memo": "x"}]}',
         "unknown fields memo"),
    ])
    def test_a_malformed_json_says_why_in_one_line(self, doc: str, says: str) -> None:
        with pytest.raises(StatementInvalid) as raised:
            parse_statement(doc, "json")
        assert says in str(raised.value) and "\n" not in str(raised.value)

    def test_whole_days(self) -> None:
        start, end = whole_days([_theirs("a", 1)])
        assert (start, end) == (datetime(2026, 12, 1, tzinfo=UTC),
                                datetime(2026, 12, 2, tzinfo=UTC))


class TestMatch:
    def test_each_kind_of_outcome(self) -> None:
        found = match([_theirs("same", 100), _theirs("more", 105), _theirs("theirs", 7)],
                      [_ours("same", 100), _ours("more", 100), _ours("ours", 40)])
        assert [(m.reference, m.outcome) for m in found] == [
            ("more", Outcome.AMOUNT_MISMATCH), ("ours", Outcome.MISSING_AT_PROVIDER),
            ("same", Outcome.MATCHED), ("theirs", Outcome.MISSING_IN_LEDGER)]
        more = found[0]
        assert more.fields == ("amount",) and more.difference_minor == 5

    def test_never_by_amount(self) -> None:
        # Same amount under different references explains nothing.
        found = match([_theirs("A", 50)], [_ours("B", 50)])
        assert sorted(m.outcome for m in found) == [Outcome.MISSING_AT_PROVIDER,
                                                    Outcome.MISSING_IN_LEDGER]

    def test_direction_and_asset_differences_are_mismatches(self) -> None:
        (out,) = match([_theirs("R", 10, "out")], [_ours("R", 10)])
        assert (out.outcome, out.fields) == (Outcome.AMOUNT_MISMATCH, ("direction",))
        (usdc,) = match([_theirs("R", 10, asset="USDC")], [_ours("R", 10)])
        assert usdc.fields == ("asset",)

    def test_a_fully_reversed_record_of_ours_counts_as_absent(self) -> None:
        assert match([], [_ours("R", 0)]) == ()
        (m,) = match([_theirs("R", 3)], [_ours("R", 0)])
        assert m.outcome is Outcome.MISSING_IN_LEDGER

    def test_remainder_is_clearing_plus_what_is_unbooked(self) -> None:
        rec = reconcile([_theirs("same", 100), _theirs("more", 105), _theirs("theirs", 7),
                         _theirs("u", 9, asset="USDC")],
                        [_ours("same", 100), _ours("more", 100), _ours("ours", 40)],
                        {"ETH": 2, "BTC": 0})
        by_asset = {r.asset: r for r in rec.remainders}
        assert set(by_asset) == {"BTC", "ETH", "USDC"}
        assert (by_asset["ETH"].clearing_minor, by_asset["ETH"].unbooked_minor) == (2, 5 + 7 - 40)
        assert by_asset["ETH"].remainder_minor == 2 - 28
        assert by_asset["USDC"].remainder_minor == 9
        assert rec.count(Outcome.MATCHED) == 1 and rec.count(Outcome.MISSING_IN_LEDGER) == 2

    def test_everything_matched_leaves_no_remainder(self) -> None:
        matched = [Match(Outcome.MATCHED, "R", _theirs("R", 4), _ours("R", 4))]
        assert remainders(matched, {}) == ()


class TestFindings:
    def test_one_finding_per_unmatched_reference_with_a_stable_subject(self) -> None:
        from reconcile.provider import ProviderCheck

        two_assets = match([_theirs("R", 5)], [_ours("R", 5), _ours("R", 7, asset="USDC"),
                                                _ours("S", 3), _ours("S", 4, asset="USDC")])
        check = ProviderCheck("acme", 1, T, T, Reconciliation(two_assets))
        assert sorted((f.type, f.subject) for f in check.findings) == [
            ("provider_missing_at_provider", "provider:acme:R"),
            ("provider_missing_at_provider", "provider:acme:S:ETH"),
            ("provider_missing_at_provider", "provider:acme:S:USDC")]
