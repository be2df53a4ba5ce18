"""The hub's spawner: batchspawner's SlurmSpawner as a site runs it, with a form for GPUs, time and partition.

Imported only by JupyterHub (the hub's configuration names it by its dotted path), never by slurmlab itself:
``import slurmlab`` needs neither JupyterHub nor batchspawner.

It is batchspawner's ``MultiSlurmSpawner``: the sandbox runs several slurmd on one machine (Slurm's
``--enable-multiple-slurmd`` shape), so the node name squeue reports is mapped to the address that node listens
on (``daemon_resolver``), as a site maps node names its hub cannot resolve.
"""

from __future__ import annotations

import html
from typing import Any

from batchspawner import MultiSlurmSpawner
from traitlets import Dict, Unicode, default

from slurmlab.hub.settings import JOB_NAME, MAX_GPUS, parse_form, with_settings

__all__ = ["BATCH_SCRIPT", "SandboxSlurmSpawner", "options_form_html"]


# ``{{cmd}}`` is batchspawner-singleuser + jupyterhub-singleuser; ``srun`` runs it as the job's first step, as
# batchspawner does by default (the server is then a task of a step: its GPUs and cgroup are the job's)
BATCH_SCRIPT = (
    """#!/bin/bash
#SBATCH --job-name="""
    + JOB_NAME
    + """
#SBATCH --output={{homedir}}/.slurmlab-hub-%j.log
#SBATCH --chdir={{homedir}}
#SBATCH --export={{keepvars}}
{% if partition %}#SBATCH --partition={{partition}}
{% endif %}{% if runtime %}#SBATCH --time={{runtime}}
{% endif %}{% if ngpus and ngpus != "0" %}#SBATCH --gpus={{ngpus}}
{% endif %}{% if reservation %}#SBATCH --reservation={{reservation}}
{% endif %}
trap 'echo SIGTERM received' TERM
{% if srun %}{{srun}} {% endif %}{{cmd}}
echo "jupyterhub-singleuser ended"
"""
)


class SandboxSlurmSpawner(MultiSlurmSpawner):  # type: ignore[misc]
    """SlurmSpawner with a form (GPUs, time, partition) whose server listens on its node's address only."""

    # batchspawner starts every server on its ``ip`` trait's *default* (0.0.0.0 there): loopback here
    ip = Unicode("127.0.0.1").tag(config=True)
    partitions = Dict(help="partition name -> True, in the form's order (the first is the default)").tag(
        config=True
    )
    batch_script = Unicode(BATCH_SCRIPT).tag(config=True)
    form_settings = Dict(
        help="the teacher's prefilled or locked fields: {field: {'value': V, 'locked': bool}} (a workshop's)"
    ).tag(config=True)

    @default("options_form")
    def _options_form_default(self) -> str:
        return options_form_html(list(self.partitions), self.form_settings)

    def _reservations(self) -> tuple[str, ...]:
        entry = self.form_settings.get("reservation")
        return (str(entry["value"]),) if entry else ()

    def options_from_form(self, formdata: dict[str, list[str]]) -> dict[str, str]:
        return parse_form(
            with_settings(formdata, self.form_settings), list(self.partitions), self._reservations()
        )

    async def start(self) -> Any:
        # the REST API hands user_options unchecked (`POST /users/NAME/server` with a JSON body): check those
        # too, since they are written into the batch script; the teacher's locked fields hold there as well
        asked: dict[str, Any] = dict(getattr(self, "user_options", None) or {})
        if asked or self.form_settings:
            as_form = {key: [str(value)] for key, value in asked.items()}
            self.user_options = parse_form(
                with_settings(as_form, self.form_settings), list(self.partitions), self._reservations()
            )
        return await super().start()


def options_form_html(partitions: list[str], settings: dict[str, Any]) -> str:
    """The spawn form: GPUs, time, partition, each prefilled from ``settings`` (else 1 GPU, an hour, the first
    partition) and read-only where the teacher locked it (the spawner applies locked values whatever comes)."""

    def value(name: str, default: str) -> str:
        return html.escape(str((settings.get(name) or {}).get("value", default)))

    def locked(name: str) -> str:
        return " readonly" if (settings.get(name) or {}).get("locked") else ""

    names = list(partitions) or [""]
    chosen = (settings.get("partition") or {}).get("value", names[0])
    if locked("partition"):
        partition = f'<input class="form-control" id="partition" name="partition" value="{value("partition", "")}" readonly>'
    else:
        options = "".join(
            f'<option value="{html.escape(n)}"{" selected" if n == chosen else ""}>{html.escape(n)}</option>'
            for n in names
        )
        partition = f'<select class="form-control" id="partition" name="partition">{options}</select>'
    return (
        '<label for="ngpus">GPUs</label>'
        '<input class="form-control" id="ngpus" name="ngpus" type="number" min="0" '
        f'max="{MAX_GPUS}" value="{value("ngpus", "1")}"{locked("ngpus")}>'
        '<label for="runtime">Time (minutes or HH:MM:SS)</label>'
        f'<input class="form-control" id="runtime" name="runtime" value="{value("runtime", "1:00:00")}"'
        f"{locked('runtime')}>"
        '<label for="partition">Partition</label>' + partition
    )
