"""The flexible window: each job's fixed offset (ids.flexible_offset) and the schedule its
runs follow (ShiftedSchedule). Deterministic, inside the window, spread across it."""

from __future__ import annotations

import itertools
from collections import Counter
from datetime import UTC, datetime, timedelta

from onthedot.domain.ids import flexible_offset, new_ulid
from onthedot.domain.models import JobParams
from onthedot.schedule import compile_schedule, with_flexible_window

EIGHT = datetime(2026, 6, 22, 8, 0, tzinfo=UTC)
NOW = datetime(2026, 6, 22, 0, 0, tzinfo=UTC)


def daily_at_eight() -> object:
    return compile_schedule(JobParams(type="recurring", schedule="0 8 * * *"), anchor=NOW,
                            now=NOW, min_interval_seconds=60)


def test_the_offset_is_stable_per_job_and_inside_the_window() -> None:
    ids = [new_ulid(NOW) for _ in range(200)]
    for job_id in ids:
        offset = flexible_offset(job_id, 600)
        assert offset == flexible_offset(job_id, 600)  # same job, same slot, every time
        assert timedelta(0) <= offset < timedelta(seconds=600)
    assert flexible_offset(ids[0], 0) == timedelta(0)


def test_a_thousand_jobs_due_at_eight_spread_evenly_over_the_window() -> None:
    # ULIDs made in the same millisecond differ only in their last characters: the hash
    # must still scatter them.
    offsets = [flexible_offset(new_ulid(NOW), 600).total_seconds() for _ in range(1000)]
    per_minute = Counter(int(o // 60) for o in offsets)
    assert sorted(per_minute) == list(range(10))
    # 100 expected per minute; a binomial spread of about 9.5, so 60..140 is over 4 sigma.
    assert all(60 <= n <= 140 for n in per_minute.values()), per_minute
    # Uniform throws of 1,000 into 600 seconds fill about 600 * (1 - e^(-5/3)) = 487 of them.
    assert len({int(o) for o in offsets}) > 420
    assert max(per_minute.values()) < 1000 / 4


def test_every_occurrence_keeps_the_jobs_offset() -> None:
    job_id = new_ulid(NOW)
    offset = flexible_offset(job_id, 600)
    shifted = with_flexible_window(daily_at_eight(), job_id, 600)
    runs = shifted.upcoming(NOW, 3)
    assert runs == [EIGHT + timedelta(days=d) + offset for d in range(3)]
    # Asked from a run's own (effective) time, the next run is the next day's slot.
    assert shifted.next_after(runs[0]) == runs[1]
    assert shifted.next_at_or_after(runs[0]) == runs[0]
    # Between the nominal time and the effective one, the run is still ahead.
    assert shifted.next_at_or_after(EIGHT) == runs[0]


def test_a_window_longer_than_the_period_keeps_the_period() -> None:
    every_minute = compile_schedule(JobParams(type="recurring", schedule="* * * * *"),
                                    anchor=NOW, now=NOW, min_interval_seconds=60)
    shifted = with_flexible_window(every_minute, "01J0000000000000000000000", 3600)
    runs = shifted.upcoming(NOW, 5)
    assert [b - a for a, b in itertools.pairwise(runs)] == [timedelta(minutes=1)] * 4


def test_a_one_time_job_fires_once_at_its_offset() -> None:
    job_id = new_ulid(NOW)
    once = compile_schedule(JobParams(type="one-time", time="2026-06-22T08:00:00Z"),
                            anchor=NOW, now=NOW, min_interval_seconds=60)
    shifted = with_flexible_window(once, job_id, 900)
    first = shifted.next_after(datetime.min.replace(tzinfo=UTC))
    assert first == EIGHT + flexible_offset(job_id, 900)
    assert first is not None
    assert shifted.next_after(first) is None


def test_no_window_is_the_schedule_itself() -> None:
    schedule = daily_at_eight()
    assert with_flexible_window(schedule, "any", 0) is schedule
