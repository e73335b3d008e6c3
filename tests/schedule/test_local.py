"""resolve_local and timezone loading: the one place the DST policy is implemented."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from onthedot.domain.errors import ScheduleError
from onthedot.schedule import resolve_local
from onthedot.schedule.local import load_timezone, wall_time

NEW_YORK = ZoneInfo("America/New_York")
LORD_HOWE = ZoneInfo("Australia/Lord_Howe")
APIA = ZoneInfo("Pacific/Apia")


def test_ordinary_time_is_read_with_its_offset() -> None:
    assert resolve_local(datetime(2026, 6, 22, 8, 0), ZoneInfo("Asia/Taipei")) == datetime(
        2026, 6, 22, 0, 0, tzinfo=UTC
    )


def test_result_is_aware_utc() -> None:
    result = resolve_local(datetime(2026, 1, 5, 9, 30), NEW_YORK)
    assert result.tzinfo is UTC
    assert result == datetime(2026, 1, 5, 14, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("naive", "expected_utc"),
    [
        # US spring forward 2026-03-08: 02:00 EST -> 03:00 EDT (07:00 UTC).
        (datetime(2026, 3, 8, 2, 0), datetime(2026, 3, 8, 7, 0, tzinfo=UTC)),
        (datetime(2026, 3, 8, 2, 30), datetime(2026, 3, 8, 7, 0, tzinfo=UTC)),
        (datetime(2026, 3, 8, 2, 59, 59, 999999), datetime(2026, 3, 8, 7, 0, tzinfo=UTC)),
        (datetime(2026, 3, 8, 3, 0), datetime(2026, 3, 8, 7, 0, tzinfo=UTC)),
        (datetime(2026, 3, 8, 1, 59), datetime(2026, 3, 8, 6, 59, tzinfo=UTC)),
    ],
)
def test_time_in_a_gap_fires_when_the_gap_ends(naive: datetime, expected_utc: datetime) -> None:
    assert resolve_local(naive, NEW_YORK) == expected_utc


def test_repeated_time_is_its_first_occurrence() -> None:
    # US fall back 2026-11-01: 01:30 happens at 05:30 UTC (EDT) and again at 06:30 UTC (EST).
    assert resolve_local(datetime(2026, 11, 1, 1, 30), NEW_YORK) == datetime(
        2026, 11, 1, 5, 30, tzinfo=UTC
    )


def test_fold_of_the_input_is_ignored() -> None:
    naive = datetime(2026, 11, 1, 1, 30, fold=1)
    assert resolve_local(naive, NEW_YORK) == datetime(2026, 11, 1, 5, 30, tzinfo=UTC)


def test_lord_howe_half_hour_gap_and_repeat() -> None:
    # Spring forward 2026-10-04 02:00 LHST (+10:30) -> 02:30 LHDT (+11), i.e. 15:30 UTC Oct 3.
    assert resolve_local(datetime(2026, 10, 4, 2, 10), LORD_HOWE) == datetime(
        2026, 10, 3, 15, 30, tzinfo=UTC
    )
    # Fall back 2026-04-05 02:00 LHDT -> 01:30 LHST: 01:45 first happens at 14:45 UTC Apr 4.
    assert resolve_local(datetime(2026, 4, 5, 1, 45), LORD_HOWE) == datetime(
        2026, 4, 4, 14, 45, tzinfo=UTC
    )


def test_apia_skipped_day_resolves_to_the_next_midnight() -> None:
    # Samoa jumped from 2011-12-29 23:59:59 (-10) to 2011-12-31 00:00 (+14) at 10:00 UTC.
    end_of_gap = datetime(2011, 12, 30, 10, 0, tzinfo=UTC)
    assert resolve_local(datetime(2011, 12, 30, 8, 0), APIA) == end_of_gap
    assert resolve_local(datetime(2011, 12, 30, 23, 59), APIA) == end_of_gap
    assert wall_time(end_of_gap, APIA) == datetime(2011, 12, 31, 0, 0)


def test_aware_input_is_refused() -> None:
    with pytest.raises(ValueError, match="naive"):
        resolve_local(datetime(2026, 1, 1, tzinfo=UTC), NEW_YORK)


def test_timezone_names_are_loaded_case_insensitively() -> None:
    assert load_timezone("asia/taipei").key == "Asia/Taipei"
    assert load_timezone(" UTC ").key == "UTC"


@pytest.mark.parametrize("name", ["Mars/Olympus", "America", "../etc/passwd", "", "+08:00"])
def test_unknown_timezone(name: str) -> None:
    with pytest.raises(ScheduleError) as info:
        load_timezone(name)
    assert info.value.code == "unknown_timezone"
    assert info.value.field == "job_params.timezone"
    assert info.value.expected == "an IANA timezone such as Asia/Taipei"
