"""Dates a user gives: ISO 8601 text read as one instant (a time without a zone is UTC), the way `gatecfg
import`, `rebaseline --since` and `evaluate --date` all read them, and the date a written run is stamped
with (`evaluate --write --date`, the API's `date=`), which may not lie in the future."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from gatecfg.errors import InputError, Location
from gatecfg.records.values import shorten

# A CI runner's clock may run ahead of the one that stamps "now" here by this much: a date within it is
# not the future.
CLOCK_SKEW = timedelta(minutes=1)


def parse_date(raw: str, location: Location, dotted: str = "date") -> datetime:
    """`raw` as an aware UTC datetime; an InputError at `location` when it is no ISO 8601 date."""
    text = raw.strip()
    try:
        # Python reads any one character between the date and the time (`2024-01-01x02:30`, and a date
        # followed by ten thousand zeros): ISO 8601 separates them with a T, RFC 3339 also with a blank.
        date_part = 10 if text[4:5] == "-" else 8
        if len(text) > date_part and text[date_part] not in "Tt ":
            raise ValueError(text)
        value = datetime.fromisoformat(text)
        # Near the ends of time a zone's offset moves the instant out of datetime's range.
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    except OverflowError:
        raise InputError.at(
            location, f"`{shorten(text)}` is out of the range of dates", dotted=dotted, hint="check the year"
        ) from None
    except ValueError:
        raise InputError.at(
            location,
            f"`{shorten(text)}` is not an ISO 8601 date",
            dotted=dotted,
            hint="write e.g. 2024-05-01 or 2024-05-01T02:30:00Z (a time without a zone is read as UTC)",
        ) from None


def run_date(
    given: datetime | str, *, write: bool, where: str, needs: str, now: datetime | None = None
) -> datetime:
    """The time a written run is stamped with, from ISO text or an aware datetime (a naive one is refused:
    in Python it is usually local time, `datetime.now()`). An InputError at `where` (the flag or keyword
    argument that gave it) for a date beyond `now` plus `CLOCK_SKEW`, or without a write (`needs` names
    the entry point's: `--write`, `write=True`)."""
    if not write:
        raise InputError.at(where, f"only means something with {needs}", hint="a date stamps the stored run")
    if isinstance(given, str):
        value = parse_date(given, Location(where), dotted="")
    elif given.tzinfo is None or given.utcoffset() is None:
        raise InputError.at(
            where,
            f"{given.isoformat()} has no time zone",
            hint="give an aware datetime (datetime(..., tzinfo=UTC)) or ISO text, where no zone means UTC",
        )
    else:
        try:
            value = given.astimezone(UTC)
        except OverflowError:
            raise InputError.at(where, f"{given.isoformat()} is out of the range of dates") from None
    current = datetime.now(UTC) if now is None else now
    if value > current + CLOCK_SKEW:
        raise InputError.at(
            where,
            f"{value.isoformat()} is in the future (it is {current.replace(microsecond=0).isoformat()})",
            hint="a run is stamped with the time it ran: a backfill gives each run's own, past, date",
        )
    return value
