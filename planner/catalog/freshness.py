"""How old the catalog's prices are, and the warning a plan or check carries when one is stale.

Prices move: GPU rental rates fell by half or more within a year more than once (H100 2023-2025),
and purchase prices follow launches. Every priced catalog entry states ``price_as_of``
(YYYY-MM or YYYY-MM-DD); a price older than ``PRICE_MAX_AGE_DAYS`` gives a warning note in the
cost of every plan and check that uses it. A YYYY-MM date counts from the first of the month (the
oldest day it may mean). Today is ``today()``: the ``PLANNER_TODAY`` environment variable
(YYYY-MM-DD) when set, so that runs and tests are reproducible, else the system date.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from datetime import date

from planner.errors import PlannerError

# One year: long enough that the shipped catalog, refreshed yearly, stays quiet; short enough to
# flag a price from before the last GPU launch cycle.
PRICE_MAX_AGE_DAYS = 365
TODAY_ENV = "PLANNER_TODAY"
_DATE = re.compile(r"^(\d{4})-(\d{2})(?:-(\d{2}))?$")


def today() -> date:
    """The date prices are judged against: $PLANNER_TODAY (YYYY-MM-DD) or the system date."""
    text = os.environ.get(TODAY_ENV)
    if text:
        try:
            return date.fromisoformat(text.strip())
        except ValueError:
            raise PlannerError(f"{TODAY_ENV}={text!r} is not a date YYYY-MM-DD") from None
    return date.today()


def price_date(as_of: str | None) -> date | None:
    """The day a YYYY-MM or YYYY-MM-DD ``price_as_of`` stands for (YYYY-MM: the 1st);
    None when missing or not in either form."""
    match = _DATE.match(str(as_of or "").strip())
    if not match:
        return None
    year, month, day = match.groups()
    try:
        return date(int(year), int(month), int(day or 1))
    except ValueError:
        return None


def price_age_days(as_of: str | None, *, on: date | None = None) -> int | None:
    """Days from ``as_of`` to ``on`` (default today()); None if the date cannot be read.
    A date in the future has a negative age."""
    when = price_date(as_of)
    if when is None:
        return None
    return ((on or today()) - when).days


def stale_price_notes(prices: Iterable[tuple[str, str | None]], *, on: date | None = None,
                      max_age_days: int = PRICE_MAX_AGE_DAYS) -> list[str]:
    """One warning per (what, price_as_of) whose price is older than ``max_age_days`` on
    ``on`` (default today()), or whose date cannot be read."""
    notes = []
    for what, as_of in prices:
        age = price_age_days(as_of, on=on)
        if age is None:
            notes.append(f"warning: price of {what} has no readable date ({as_of!r}; expected "
                         f"YYYY-MM or YYYY-MM-DD): its age is unknown")
        elif age > max_age_days:
            notes.append(f"warning: price of {what} as of {as_of} is {age:,} days old (more "
                         f"than {max_age_days}): check current prices")
    return notes
