"""Reading the small part of iCalendar (RFC 5545) text that a recurring job needs.

Accepted: a bare rule ("RRULE:FREQ=..." or "FREQ=..."), a VEVENT block (optionally inside a
VCALENDAR), or bare content lines ("DTSTART:...\\nRRULE:..."). Lines may be separated by newlines
or, as chat assistants often write them, by spaces on one line. Only DTSTART, RRULE, RDATE and
EXDATE carry meaning here; descriptive properties (SUMMARY, UID, DTEND, ...) and VTIMEZONE blocks
are ignored because zones are always taken from IANA names (TZID). EXRULE is refused rather than
ignored, since ignoring it would fire on dates the user excluded.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from onthedot.domain.errors import ScheduleError
from onthedot.schedule.limits import MAX_DATES, MAX_RULES, SCHEDULE_FIELD, too_complex

VEVENT_EXAMPLE = (
    "BEGIN:VEVENT\\nDTSTART;TZID=Asia/Taipei:20260622T080000\\n"
    "RRULE:FREQ=WEEKLY;BYDAY=MO,WE,FR\\nEXDATE;TZID=Asia/Taipei:20260624T080000\\nEND:VEVENT"
)

# Property names that may start a new content line when a model writes a whole VEVENT on one line.
_KNOWN_PROPERTIES = (
    "BEGIN|END|DTSTART|DTEND|DTSTAMP|DURATION|RRULE|RDATE|EXDATE|EXRULE|UID|SUMMARY|DESCRIPTION"
    "|LOCATION|STATUS|SEQUENCE|CREATED|LAST-MODIFIED|TRANSP|CLASS|PRIORITY|CATEGORIES|ORGANIZER"
    "|ATTENDEE|URL|VERSION|PRODID|CALSCALE|METHOD|TZID|TZOFFSETFROM|TZOFFSETTO|TZNAME"
    "|X-[A-Z0-9-]+"
)
# Only at the start of a whitespace run, and possessive: tried at every position of a long run
# of spaces, the plain "\s+(?=...)" was quadratic (4,000 spaces: 3.7 s).
_INLINE_BREAK = re.compile(rf"(?<!\s)\s++(?=(?:{_KNOWN_PROPERTIES})[;:])", re.IGNORECASE)
_DATETIME = re.compile(r"(\d{4})(\d{2})(\d{2})(?:T(\d{2})(\d{2})(\d{2})?)?(Z)?")


@dataclass(frozen=True)
class CalDateTime:
    """A DATE or DATE-TIME value as written: naive, plus how to read it."""

    value: datetime
    is_date: bool = False
    is_utc: bool = False
    tzid: str | None = None


@dataclass
class CalendarText:
    """The recurrence-relevant properties of one event."""

    dtstart: CalDateTime | None = None
    rrules: list[str] = field(default_factory=list)
    rdates: list[CalDateTime] = field(default_factory=list)
    exdates: list[CalDateTime] = field(default_factory=list)


def invalid(message: str, expected: str | None = None) -> ScheduleError:
    return ScheduleError(
        message,
        code="invalid_schedule",
        field=SCHEDULE_FIELD,
        expected=expected or f"an RFC 5545 VEVENT such as {VEVENT_EXAMPLE}",
    )


def looks_like_calendar(text: str) -> bool:
    """True when ``text`` is RRULE/VEVENT text rather than cron."""
    head = text.lstrip().upper()
    if head.startswith(("FREQ=", "RRULE:", "BEGIN:", "DTSTART")):
        return True
    return re.search(r"(^|\s)(RRULE|DTSTART)[;:]", text, re.IGNORECASE) is not None


def parse_calendar_text(text: str) -> CalendarText:
    """The DTSTART, RRULE, RDATE and EXDATE properties of ``text`` (see the module docstring)."""
    stripped = text.strip()
    if stripped.upper().startswith("FREQ="):
        stripped = "RRULE:" + stripped
    result = CalendarText()
    events = 0
    skipping: str | None = None  # name of a component whose content we ignore (VTIMEZONE, VALARM)
    for line in _content_lines(stripped):
        name, params, value = _split_line(line)
        if skipping is not None:
            if name == "END" and value.upper() == skipping:
                skipping = None
            continue
        if name == "BEGIN":
            component = value.upper()
            if component == "VEVENT":
                events += 1
                if events > 1:
                    raise invalid("a schedule holds exactly one VEVENT")
            elif component != "VCALENDAR":
                skipping = component
        elif name == "DTSTART":
            if result.dtstart is not None:
                raise invalid("DTSTART appears more than once")
            result.dtstart = parse_cal_datetime(value, params, what="DTSTART")
        elif name == "RRULE":
            result.rrules.append(value)
            if len(result.rrules) > MAX_RULES:
                raise too_complex(f"a schedule holds at most {MAX_RULES} RRULE lines")
        elif name in ("RDATE", "EXDATE"):
            if params.get("VALUE") == "PERIOD":
                raise invalid(f"{name} periods are not supported; list start times instead")
            target = result.rdates if name == "RDATE" else result.exdates
            items = [item for item in value.split(",") if item]
            if len(target) + len(items) > MAX_DATES:
                raise too_complex(f"a schedule holds at most {MAX_DATES} {name} values")
            target.extend(parse_cal_datetime(item, params, what=name) for item in items)
        elif name == "EXRULE":
            raise invalid("EXRULE is not supported (RFC 5545 deprecated it); use EXDATE")
    if not result.rrules and not result.rdates:
        raise invalid("a recurring schedule needs an RRULE")
    return result


def _content_lines(text: str) -> list[str]:
    # RFC 5545 folding: a line starting with a space or tab continues the previous one.
    unfolded = re.sub(r"\r?\n[ \t]", "", text)
    lines: list[str] = []
    for raw in unfolded.splitlines():
        lines.extend(part.strip() for part in _INLINE_BREAK.split(raw.strip()) if part.strip())
    return lines


def _split_line(line: str) -> tuple[str, dict[str, str], str]:
    """``NAME;PARAM=VALUE:content`` -> (NAME, {PARAM: VALUE}, content); a quoted value may hold
    ``:`` or ``;``."""
    head: list[str] = []
    quoted = False
    for index, char in enumerate(line):
        if char == '"':
            quoted = not quoted
        elif char == ":" and not quoted:
            value = line[index + 1 :].strip()
            break
        head.append(char)
    else:
        raise invalid(f"cannot read the line {line!r}: expected NAME:VALUE")
    name, *raw_params = "".join(head).split(";")
    params: dict[str, str] = {}
    for raw in raw_params:
        key, sep, param_value = raw.partition("=")
        if not sep:
            raise invalid(f"cannot read the parameter {raw!r} in {line!r}")
        params[key.strip().upper()] = param_value.strip().strip('"')
    if "VALUE" in params:
        params["VALUE"] = params["VALUE"].upper()
    return name.strip().upper(), params, value


def parse_cal_datetime(
    text: str, params: dict[str, str] | None = None, *, what: str
) -> CalDateTime:
    """A DATE (``20260622``) or DATE-TIME (``20260622T080000``, ``...Z``) value.

    The ISO 8601 extended spelling (``2026-06-22T08:00:00``) is accepted too, because models
    write it; numeric UTC offsets are not (use ``Z`` or a TZID).
    """
    params = params or {}
    compact = text.strip().replace("-", "").replace(":", "")
    match = _DATETIME.fullmatch(compact)
    expected = f"{what} like 20260622T080000, 20260622T000000Z or 20260622 (with VALUE=DATE)"
    if match is None:
        raise invalid(f"cannot read {what} value {text!r}", expected)
    year, month, day, hour, minute, second, zulu = match.groups()
    is_date = hour is None
    if params.get("VALUE") == "DATE" and not is_date:
        raise invalid(f"{what} has VALUE=DATE but a time of day: {text!r}", expected)
    try:
        value = datetime(
            int(year), int(month), int(day), int(hour or 0), int(minute or 0), int(second or 0)
        )
    except ValueError as exc:
        raise invalid(f"{what} value {text!r} is not a real date: {exc}", expected) from exc
    if zulu and is_date:
        raise invalid(f"{what} value {text!r}: a DATE cannot be in UTC", expected)
    tzid = params.get("TZID")
    if zulu and tzid:
        raise invalid(f"{what} value {text!r} has both a TZID and a UTC 'Z'", expected)
    return CalDateTime(value=value, is_date=is_date, is_utc=bool(zulu), tzid=tzid)
