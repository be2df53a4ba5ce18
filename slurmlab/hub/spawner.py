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

from slurmlab.hub.settings import JOB_NAME, MAX_GPUS, parse_form

__all__ = ["BATCH_SCRIPT", "SandboxSlurmSpawner"]


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

    @default("options_form")
    def _options_form_default(self) -> str:
        names = list(self.partitions) or [""]
        options = "".join(f'<option value="{html.escape(n)}">{html.escape(n)}</option>' for n in names)
        return (
            '<label for="ngpus">GPUs</label>'
            '<input class="form-control" id="ngpus" name="ngpus" type="number" min="0" '
            f'max="{MAX_GPUS}" value="1">'
            '<label for="runtime">Time (minutes or HH:MM:SS)</label>'
            '<input class="form-control" id="runtime" name="runtime" value="1:00:00">'
            '<label for="partition">Partition</label>'
            f'<select class="form-control" id="partition" name="partition">{options}</select>'
        )

    def options_from_form(self, formdata: dict[str, list[str]]) -> dict[str, str]:
        return parse_form(formdata, list(self.partitions))

    async def start(self) -> Any:
        # the REST API hands user_options unchecked (`POST /users/NAME/server` with a JSON body): check those
        # too, since they are written into the batch script
        asked: dict[str, Any] = dict(getattr(self, "user_options", None) or {})
        if asked:
            as_form = {key: [str(value)] for key, value in asked.items()}
            self.user_options = parse_form(as_form, list(self.partitions))
        return await super().start()
