"""Asking a rate-limiting or slow controller less often (issue 27): the back-off the pollers share.

What a throttled Slurm command does, measured on 24.11 and 26.05 with ``SlurmctldParameters=rl_enable`` (a bucket
of 3 requests, 1 more a second; ``tests/data/slurm/<version>/rate_limit/``): slurmctld answers a refused request
with "back off", and the client sleeps and asks again, N seconds after the N-th refusal of one request (six in a
row: 1 + 2 + ... + 6 = 21 s), printing nothing unless run with ``-v`` ("squeue: RPC rate limited 3 time(s).
Sleeping then trying again."), until it is let through: it exits 0 with the right answer, only later (squeue 3 s
each in a row of six, 0.04 to 24 s for eight at once). So a throttled answer is a slow answer, never an empty or
failed one, unless slurmlab stops the command first (its timeout: eight refusals in a row already take 36 s),
which reads as an error, never as an answer.

A poller that keeps asking at its usual rate while its answers come slowly adds to the very load the controller
is refusing, so a :class:`Backoff` stretches its intervals: each slow answer (one that took ``slow_after``
seconds: a refused client's sleep is a whole second, a brief ``squeue`` of a few jobs takes 5-40 ms) or
failed one doubles a factor, up to ``max_factor``; ``calm_after`` quick answers in a row halve it again. The first
slow answer of an episode returns the note to say, once: :data:`RATE_LIMITED_NOTE` where Slurm's words show it
(a ``-v`` client or a stopped command's stderr: :func:`slurmlab.slurm.failures.rate_limited`), else
:data:`SLOW_NOTE`; the end of the episode returns :data:`CALM_NOTE`, once. An episode ends only when the factor is
back to 1 and the answers have stayed quick for ``calm_for`` seconds (:func:`calm_window`), so that a bucket that
refills now and then under a steady load does not make the pollers say "rate-limiting" and "answers quickly
again" by turns. While an episode runs, :meth:`Backoff.words` is the line a panel or the sidebar shows.

``scontrol ping`` is refused like any request, and it does not ask again: it prints "Slurmctld(primary) at …
is DOWN" and exits 1 at once (recorded as ``ping_*``), the words of a dead controller. Where the site's
slurm.conf turns the limit on (:func:`controller_rate_limits`), such a ping proves nothing.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from slurmlab.slurm.failures import rate_limited

__all__ = [
    "CALM_FOR_S",
    "CALM_NOTE",
    "CALM_ROUNDS",
    "RATE_LIMITED_NOTE",
    "SLOW_ANSWER_S",
    "SLOW_NOTE",
    "Backoff",
    "calm_window",
    "controller_rate_limits",
]

SLOW_ANSWER_S = 1.0  # a refused client sleeps one whole second before it asks again
RATE_LIMITED_NOTE = "the controller is rate-limiting your requests; slurmlab asks less often until it stops"
SLOW_NOTE = "the controller is slow to answer; slurmlab asks less often until it answers quickly again"
CALM_NOTE = "the controller answers quickly again; slurmlab asks at its usual rate"
# How long answers must stay quick before an episode ends. Slurm's limit is a token bucket per user
# (rl_bucket_size tokens, refilled by rl_refill_rate every rl_refill_period): under a steady load above the
# refill rate it stays empty, but a poller that has stretched its waits lets a few tokens pile up between two of
# its rounds, so its next answers come quickly while nothing has changed (the 24.11 root said "rate-limiting" and
# "answers quickly again" by turns within seconds). A minute is several stretched rounds of the kernel's poller
# (8 s at most) and two of the server's usual ones (30 s), and many times the few seconds a refill lasts; a load
# that has really stopped costs at most that minute at the usual rate, said late, never a wrong state. A poller
# whose usual interval is long (the server's 30 s) waits CALM_ROUNDS of its usual rounds instead: three quick
# answers at its stretched interval fit between two refills' worth of held-back polls.
CALM_FOR_S = 60.0
CALM_ROUNDS = 5


def calm_window(interval: float) -> float:
    """How long the answers of a poller whose usual wait is ``interval`` must stay quick to end an episode."""
    return max(CALM_FOR_S, CALM_ROUNDS * interval)


@dataclass
class Backoff:
    """How much longer than usual a poller waits between two rounds, from how its last answers came."""

    slow_after: float = SLOW_ANSWER_S
    max_factor: float = 8.0
    calm_after: int = 3
    calm_for: float = CALM_FOR_S  # an episode ends after quick answers for this long (see CALM_FOR_S)
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)  # the poller's clock
    factor: float = 1.0  # the usual interval times this
    rate_limited: bool = False  # Slurm's words said so in this episode
    quick_in_a_row: int = 0
    quick_since: float | None = None  # when the first quick answer since the last slow one came
    said: str | None = None  # the note said in this episode (None: none running)

    @property
    def backing_off(self) -> bool:
        return self.factor > 1.0

    @property
    def in_episode(self) -> bool:
        """Whether a slow episode runs: said, and not yet over (it may outlast the stretched waits)."""
        return self.said is not None

    def stretch(self, interval: float) -> float:
        """``interval`` as the poller should wait it now."""
        return interval * self.factor

    def words(self, interval: float) -> str | None:
        """While an episode runs, the line a panel or the sidebar shows (``interval``: the poller's usual wait,
        stretched here); else None."""
        if self.said is None:
            return None
        every = f"{self.stretch(interval):.0f}"
        if self.rate_limited:
            return f"Slurm is rate-limiting this user's queries: updates come every {every} s"
        return f"Slurm is slow to answer: updates come every {every} s"

    def answered(self, seconds: float, stderr: str = "", *, site_limits: bool = False) -> str | None:
        """Take in an answer that took ``seconds`` (``stderr``: what the command printed, when known;
        ``site_limits``: the site's slurm.conf turns the rate limit on, so a slow answer is most likely held back
        by it). Returns the note to say now (at the start and the end of an episode), else None."""
        if seconds >= self.slow_after or rate_limited(stderr):
            self.rate_limited = self.rate_limited or site_limits
            return self._slow(stderr)
        now = self.clock()
        if self.quick_since is None:
            self.quick_since = now
        self.quick_in_a_row += 1
        if self.backing_off and self.quick_in_a_row >= self.calm_after:
            self.factor = max(1.0, self.factor / 2)
            self.quick_in_a_row = 0
        # the factor is back to 1 after calm_after quick answers at least; the episode ends only once they have
        # lasted calm_for too (a refilled bucket's few quick answers do not end it)
        if self.said is not None and not self.backing_off and now - self.quick_since >= self.calm_for:
            self.rate_limited, self.said = False, None
            return CALM_NOTE
        return None

    def failed(self, stderr: str = "") -> str | None:
        """Take in a command that gave no answer (stopped at its timeout, a controller that refused): a failure
        asks for a longer wait too, never for a quicker one."""
        return self._slow(stderr)

    def _slow(self, stderr: str) -> str | None:
        self.quick_in_a_row, self.quick_since = 0, None
        self.factor = min(self.max_factor, self.factor * 2)
        self.rate_limited = self.rate_limited or rate_limited(stderr)
        note = RATE_LIMITED_NOTE if self.rate_limited else SLOW_NOTE
        if self.said == note:
            return None
        self.said = note
        return note


DEFAULT_CONF = "/etc/slurm/slurm.conf"
_RL_ENABLE = re.compile(r"^\s*slurmctldparameters\s*=\s*(\S+)", re.IGNORECASE | re.MULTILINE)
_conf_cache: dict[str, tuple[float, bool]] = {}
_conf_lock = threading.Lock()


def controller_rate_limits(conf: str | None = None) -> bool:
    """Whether the slurm.conf at ``conf`` (None: ``$SLURM_CONF``, else Slurm's default path) turns slurmctld's
    per-user rate limit on (``SlurmctldParameters=…rl_enable…``). Read from the file every user may read, so
    that it costs the controller nothing (re-read when the file changes); False where there is no such file
    (a configless client: the limit is then learnt only from slow answers)."""
    path = conf or os.environ.get("SLURM_CONF") or DEFAULT_CONF
    try:
        mtime = os.stat(path).st_mtime
        with _conf_lock:
            cached = _conf_cache.get(path)
        if cached is not None and cached[0] == mtime:
            return cached[1]
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return False
    values = (m.group(1).split("#", 1)[0] for m in _RL_ENABLE.finditer(text))
    limits = any("rl_enable" in (item.strip().lower() for item in v.split(",")) for v in values)
    with _conf_lock:
        _conf_cache[path] = (mtime, limits)
    return limits
