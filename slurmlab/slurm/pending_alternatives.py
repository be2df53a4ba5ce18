"""What change would let a pending job start sooner, asked of Slurm: each variant of the job's own request
(:func:`slurmlab.core.diagnosis.alternatives.variants`) through ``sbatch --test-only … --wrap=true``, which
submits nothing and answers when and where it would start.

API::

    ask_test_only(options, runner=None, timeout=10.0) -> StartEstimate      one request
    pending_alternatives(job, runner=None, *, nodes=None, partitions=None) -> (sooner, rest)

Each call has its own timeout; a refusal keeps Slurm's words, an answer that cannot be read is recorded as
such (one bad answer never takes the others down).
"""

from __future__ import annotations

from collections.abc import Sequence

from slurmlab.core.diagnosis.alternatives import Alternative, StartEstimate, parse_test_only, rank, variants
from slurmlab.core.slurm.models import Job, Node, Partition
from slurmlab.errors import ControllerDownError, MungeError, ParseError, SlurmError
from slurmlab.slurm.failures import classify_failure
from slurmlab.slurm.node_queries import list_nodes, list_partitions
from slurmlab.slurm.runner import Runner, get_runner

__all__ = ["TEST_ONLY_TIMEOUT", "ask_test_only", "pending_alternatives"]

TEST_ONLY_TIMEOUT = 10.0


def ask_test_only(options: Sequence[str], runner: Runner | None = None,
                  timeout: float = TEST_ONLY_TIMEOUT) -> StartEstimate:
    """``sbatch --test-only OPTIONS --wrap=true``: when Slurm would start that request, or its refusal.

    Raises ControllerDownError / MungeError when Slurm cannot be asked at all (the same for every variant),
    ParseError when the answer says neither a start nor a refusal."""
    runner = runner or get_runner()
    argv = ["sbatch", "--test-only", "-o", "/dev/null", *options, "--wrap=true"]
    result = runner.run(argv, check=False, timeout=min(runner.timeout, timeout))
    said = result.stdout + "\n" + result.stderr
    if result.returncode != 0:
        failure = classify_failure(argv, result.returncode, result.stderr or result.stdout)
        if isinstance(failure, (ControllerDownError, MungeError)):
            raise failure
    return parse_test_only(said, result.returncode)


def pending_alternatives(job: Job, runner: Runner | None = None, *, nodes: Sequence[Node] | None = None,
                         partitions: Sequence[Partition] | None = None,
                         ) -> tuple[list[Alternative], list[Alternative]]:
    """(the changes that start sooner than the job's expected start, best first; the others: later, refused).

    ``nodes``/``partitions``: the cluster's, when the caller has them already."""
    runner = runner or get_runner()
    nodes = list(nodes) if nodes is not None else list(list_nodes(runner))
    partitions = list(partitions) if partitions is not None else list(list_partitions(runner))
    found = []
    for v in variants(job, nodes, partitions):
        try:
            answer = ask_test_only(v.options, runner)
        except ParseError as exc:
            answer = StartEstimate(refused=exc.message, unreadable=True)
        except (ControllerDownError, MungeError):
            raise
        except SlurmError as exc:
            answer = StartEstimate(refused=exc.message)
        found.append(Alternative(v, answer))
    return rank(found, job.expected_start)
