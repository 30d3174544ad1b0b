"""What each rank of a multi-process run produces, told apart: the names both sides agree on.

Rank 0 is the run's own: its metrics are the run's series, under their own keys. Another
rank's metrics are stored only when the spec's ``metric_ranks`` asks for them, each as a
series of its own whose key carries the rank (``loss@rank3``), so every page that reads
the run's series (its charts, the compare view, the metrics API) shows them and none of
rank 0's changes. A file another rank writes for the run (its profiler trace) carries the
rank in its name the same way (``rank3-trace-1.json.gz``), and each line a rank's process
prints comes prefixed with its rank (``[rank3]: …``), which the log keeps as the line's
``rank`` too. Standard library only, Python 3.8: the runners and the platform both
import it.
"""

from __future__ import annotations

import re
from typing import List, Union

from workers.contract.devices import MAX_DEVICES
from workers.contract.gang import MAX_HOSTS

# The spec's key (training): the global ranks whose metrics are stored, or "all".
METRIC_RANKS = "metric_ranks"
ALL = "all"
DEFAULT_METRIC_RANKS = [0]
# The most ranks a run has (hosts × devices per host).
MAX_RANKS = MAX_HOSTS * MAX_DEVICES

# A metric key of rank N > 0: the key and this suffix. MLflow's own keys cannot hold '@',
# so a captured MLflow key never reads as a rank's.
RANK_SUFFIX = "@rank"
_RANKED = re.compile(r"^(?P<key>.+)@rank(?P<rank>[1-9][0-9]{0,5})$")

Ranks = Union[str, List[int]]


def clean_metric_ranks(value: object) -> Ranks:
    """``metric_ranks`` in canonical form: "all", or sorted distinct ranks, 0 among them.

    Rank 0's metrics are the run's own series and always stored, so 0 is added when a
    list leaves it out. ValueError says what is wrong.
    """
    if value == ALL:
        return ALL
    if not isinstance(value, list) or not value:
        raise ValueError('must be "all" or a list of global ranks such as [0, 8]')
    for rank in value:
        if type(rank) is not int or not 0 <= rank < MAX_RANKS:
            raise ValueError(f"{rank!r} is no global rank (0 to {MAX_RANKS - 1})")
    return sorted(set(value) | {0})


def ranks_problem(ranks: Ranks, world_size: int) -> str | None:
    """Why ``ranks`` (clean) does not fit a run of ``world_size`` ranks, or None."""
    if ranks == ALL:
        return None
    beyond = [rank for rank in ranks if rank >= world_size]
    if beyond:
        listed = ", ".join(str(rank) for rank in beyond)
        named = f"ranks {listed} are" if len(beyond) > 1 else f"rank {listed} is"
        return f"{named} beyond the run's {world_size} rank(s) (hosts × devices)"
    return None


def to_env(ranks: Ranks) -> str:
    """``metric_ranks`` as the runner hands it to the script (NPULAB_METRIC_RANKS)."""
    return ALL if ranks == ALL else ",".join(str(rank) for rank in ranks)


def from_env(value: str | None) -> Ranks:
    """NPULAB_METRIC_RANKS read back; unset or unreadable: rank 0 alone."""
    if not value:
        return list(DEFAULT_METRIC_RANKS)
    if value.strip() == ALL:
        return ALL
    try:
        return sorted({int(part) for part in value.split(",") if part.strip()} | {0})
    except ValueError:
        return list(DEFAULT_METRIC_RANKS)


def includes(ranks: Ranks, rank: int) -> bool:
    """Whether ``ranks`` (clean, or read from the environment) holds ``rank``."""
    return rank == 0 or ranks == ALL or rank in ranks


def rank_key(key: str, rank: int) -> str:
    """The series key of metric ``key`` logged by ``rank``: rank 0's is the key itself."""
    return key if rank == 0 else f"{key}{RANK_SUFFIX}{rank}"


def key_rank(key: str) -> tuple[str, int]:
    """(the metric's own key, the rank that logged it) of a series key."""
    found = _RANKED.match(key)
    if found is None:
        return key, 0
    return found.group("key"), int(found.group("rank"))


# A file of rank N > 0 (a profiler trace): this prefix and its name, so the ranks' files of
# one run never collide and each says whose it is.
_RANK_FILE = re.compile(r"^rank(?P<rank>[1-9][0-9]{0,5})-.")


def rank_file(name: str, rank: int) -> str:
    """The name of file ``name`` written by ``rank``: rank 0's is the name itself."""
    return name if rank == 0 else f"rank{rank}-{name}"


def file_rank(name: str) -> int:
    """The rank that wrote the file of this name (0 when the name carries none)."""
    found = _RANK_FILE.match(name)
    return int(found.group("rank")) if found else 0


# A line a rank printed carries its rank as a prefix (``[rank3]: …``,
# workers.contract.events.rank_prefix): torchrun's ranks' from their launcher
# (workers.training.rank_output), msrun's workers' from the training runner's relay. Only
# the global-rank form: torchrun's own ``[default0]:`` is a local rank.
_RANKED_LINE = re.compile(r"^\[rank([0-9]{1,6})\]: ")


def line_rank(line: str) -> int | None:
    """The rank a line of output is prefixed with, or None."""
    found = _RANKED_LINE.match(line)
    return int(found.group(1)) if found else None
