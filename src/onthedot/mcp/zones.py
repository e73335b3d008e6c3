"""A ``timezone`` argument must name a place: abbreviations and fixed offsets are refused.

A model told "9am EST" tends to pass ``timezone: "EST"``. tzdata knows that name, but as
UTC-05:00 all year: a New Yorker's 09:00 task would fire at 10:00 local time all summer,
silently. "CST" is the US, China and Cuba at once; "GMT+8" exists only as ``Etc/GMT-8``, sign
inverted; "BST", "IST", "PST" are not zones at all. A task has to follow its user's daylight
saving rules, which only a region zone (``America/New_York``) carries, so these are refused
with the region zones that match (code ``ambiguous_timezone``, the candidates in the error).
UTC is the one fixed zone accepted: choosing it is never a mistake about daylight saving.

This is the MCP tools' rule (a model is the caller); the REST API takes any IANA name.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from onthedot.mcp.registry import ToolError

# Abbreviation -> the region zones people using it most likely mean, most likely first.
ABBREVIATIONS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("EST", "EDT", "ET"), ("America/New_York", "America/Toronto")),
    **dict.fromkeys(("CST", "CDT", "CT"), ("America/Chicago", "America/Mexico_City",
                                           "Asia/Shanghai", "Asia/Taipei", "America/Havana")),
    **dict.fromkeys(("MST", "MDT", "MT"), ("America/Denver", "America/Phoenix",
                                           "America/Edmonton")),
    **dict.fromkeys(("PST", "PDT", "PT"), ("America/Los_Angeles", "America/Vancouver",
                                           "Asia/Manila")),
    **dict.fromkeys(("AKST", "AKDT"), ("America/Anchorage",)),
    **dict.fromkeys(("HST", "HDT"), ("Pacific/Honolulu",)),
    **dict.fromkeys(("AST", "ADT"), ("America/Halifax", "America/Puerto_Rico", "Asia/Riyadh")),
    **dict.fromkeys(("NST", "NDT"), ("America/St_Johns",)),
    **dict.fromkeys(("GMT", "BST"), ("Europe/London", "Europe/Dublin", "UTC")),
    "IST": ("Asia/Kolkata", "Europe/Dublin", "Asia/Jerusalem"),
    **dict.fromkeys(("WET", "WEST"), ("Europe/Lisbon",)),
    **dict.fromkeys(("CET", "CEST", "MET", "MEST"), ("Europe/Paris", "Europe/Berlin",
                                                     "Europe/Rome", "Europe/Madrid")),
    **dict.fromkeys(("EET", "EEST"), ("Europe/Athens", "Europe/Helsinki", "Africa/Cairo")),
    "MSK": ("Europe/Moscow",),
    "TRT": ("Europe/Istanbul",),
    "GST": ("Asia/Dubai",),
    "PKT": ("Asia/Karachi",),
    "ICT": ("Asia/Bangkok", "Asia/Ho_Chi_Minh"),
    "WIB": ("Asia/Jakarta",),
    "SGT": ("Asia/Singapore",),
    "HKT": ("Asia/Hong_Kong",),
    "PHT": ("Asia/Manila",),
    "JST": ("Asia/Tokyo",),
    "KST": ("Asia/Seoul",),
    **dict.fromkeys(("AEST", "AEDT"), ("Australia/Sydney", "Australia/Melbourne",
                                       "Australia/Brisbane")),
    **dict.fromkeys(("ACST", "ACDT"), ("Australia/Adelaide", "Australia/Darwin")),
    "AWST": ("Australia/Perth",),
    **dict.fromkeys(("NZST", "NZDT"), ("Pacific/Auckland",)),
    "SAST": ("Africa/Johannesburg",),
    "WAT": ("Africa/Lagos",),
    "CAT": ("Africa/Maputo",),
    "EAT": ("Africa/Nairobi",),
    "BRT": ("America/Sao_Paulo",),
    "ART": ("America/Argentina/Buenos_Aires",),
}
UTC_NAMES = frozenset({"UTC", "ETC/UTC", "UCT", "ETC/UCT", "UNIVERSAL", "ETC/UNIVERSAL", "ZULU",
                       "ETC/ZULU"})
# "GMT+8", "UTC+08:00", "utc-5", "+0530", "UTC−3" (a Unicode minus), and tzdata's Etc/GMT-8.
OFFSET = re.compile(r"^(?:UTC|GMT|Z)?\s*(?P<sign>[+\-\u2212])\s*(?P<hours>\d{1,2})"
                    r"(?::?(?P<minutes>\d{2}))?$", re.IGNORECASE)
ETC_OFFSET = re.compile(r"^Etc/GMT(?P<sign>[+-])(?P<hours>\d{1,2})$", re.IGNORECASE)
# Where a fixed offset's candidates come from: one or two large places per offset in use.
REGIONS = (
    "Pacific/Honolulu", "America/Anchorage", "America/Los_Angeles", "America/Denver",
    "America/Phoenix", "America/Chicago", "America/Mexico_City", "America/New_York",
    "America/Bogota", "America/Halifax", "America/St_Johns", "America/Sao_Paulo",
    "America/Argentina/Buenos_Aires", "Atlantic/Azores", "Europe/London", "Europe/Lisbon",
    "Africa/Lagos", "Europe/Paris", "Europe/Berlin", "Africa/Johannesburg", "Europe/Athens",
    "Africa/Cairo", "Europe/Moscow", "Europe/Istanbul", "Africa/Nairobi", "Asia/Riyadh",
    "Asia/Tehran", "Asia/Dubai", "Asia/Kabul", "Asia/Karachi", "Asia/Kolkata",
    "Asia/Kathmandu", "Asia/Dhaka", "Asia/Yangon", "Asia/Bangkok", "Asia/Jakarta",
    "Asia/Shanghai", "Asia/Taipei", "Asia/Singapore", "Asia/Hong_Kong", "Australia/Perth",
    "Asia/Tokyo", "Asia/Seoul", "Australia/Darwin", "Australia/Adelaide", "Australia/Brisbane",
    "Australia/Sydney", "Pacific/Noumea", "Pacific/Auckland", "Pacific/Tongatapu",
    "Pacific/Kiritimati",
)
EXPECTED = "an IANA region timezone such as America/New_York or Asia/Taipei, or UTC"


def check_region(name: str, now: datetime) -> None:
    """Refuse ``name`` when it is an abbreviation or a fixed offset other than UTC, naming the
    region zones that may be meant (``now`` decides which zones are at that offset)."""
    key = name.strip()
    if key.upper() in UTC_NAMES:
        return
    candidates = ABBREVIATIONS.get(key.upper())
    if candidates is not None:
        raise _refusal(name, "an abbreviation", candidates)
    offset = _fixed_offset(key)
    if offset is not None:
        raise _refusal(name, f"a fixed offset (UTC{_format(offset)})", _at_offset(offset, now))


def _fixed_offset(name: str) -> timedelta | None:
    etc = ETC_OFFSET.match(name)
    if etc is not None:  # POSIX-style: Etc/GMT-8 is eight hours *ahead* of UTC
        hours = int(etc["hours"])
        return timedelta(hours=hours if etc["sign"] == "-" else -hours)
    match = OFFSET.match(name)
    if match is None:
        return None
    size = timedelta(hours=int(match["hours"]), minutes=int(match["minutes"] or 0))
    return -size if match["sign"] in "-\u2212" else size


def _format(offset: timedelta) -> str:
    minutes = int(offset.total_seconds()) // 60
    sign = "-" if minutes < 0 else "+"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def _at_offset(offset: timedelta, now: datetime) -> tuple[str, ...]:
    """The listed regions at ``offset``: those that are all year first, then those that are
    now, then those that will be in half a year."""
    def hits(zone: str) -> tuple[bool, bool]:
        tz = ZoneInfo(zone)
        return (now.astimezone(tz).utcoffset() == offset,
                (now + timedelta(days=182)).astimezone(tz).utcoffset() == offset)

    ranked = sorted((zone for zone in REGIONS if any(hits(zone))),
                    key=lambda zone: {(True, True): 0, (True, False): 1}.get(hits(zone), 2))
    if not offset:  # UTC+00:00 may well mean UTC itself
        ranked.insert(0, "UTC")
    return tuple(ranked[:4])


def _refusal(name: str, what: str, candidates: tuple[str, ...]) -> ToolError:
    if candidates:
        advice = "use the user's region zone: " + " or ".join(candidates)
    else:
        advice = "use the user's region zone (an IANA name such as Europe/Paris)"
    return ToolError(
        f"timezone {name!r} is {what}, not a place, so the task would not follow daylight "
        f"saving time; {advice}", code="ambiguous_timezone", field="timezone",
        expected=EXPECTED, extra={"candidates": list(candidates)})


__all__ = ["check_region"]
