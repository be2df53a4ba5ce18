"""The request of a provisioned kernel: the kernel spec's fields, one kernel's changes, the salloc tokens."""

from __future__ import annotations

import json

import pytest

from slurmlab.core.request.pipeline import check_request
from slurmlab.errors import RequestError
from slurmlab.provisioner import KernelRequest, request_from_config, request_override


def test_fields_become_salloc_tokens_the_pipeline_reads() -> None:
    request = request_from_config(
        {
            "gpus": 2,
            "gpu_type": "h100",
            "time": 60,
            "partition": "gpu",
            "account": "research",
            "options": ["--constraint=nvlink"],
        }
    )
    assert request.tokens() == [
        "--gpus=h100:2",
        "--time=60",
        "--partition=gpu",
        "--account=research",
        "--constraint=nvlink",
    ]
    checked = check_request(request.tokens(), None)
    assert checked.partition == "gpu" and checked.account == "research"
    assert request.describe() == "2 GPUs (h100), 60 min, partition gpu, account research, --constraint=nvlink"


def test_shards_and_mig() -> None:
    assert KernelRequest(shards=2, time=5).tokens() == ["--gres=shard:2", "--time=5"]
    assert KernelRequest(mig="1g.10gb").tokens() == ["--gpus=1g.10gb:1"]
    assert KernelRequest(mig="1g.10gb", gpus=2).describe() == "2 × MIG 1g.10gb"
    assert KernelRequest().tokens() == [] and KernelRequest().describe() == "Slurm's defaults"


def test_one_kernel_changes_fields_of_the_spec() -> None:
    spec = request_from_config({"gpus": 2, "time": 60, "partition": "gpu"})
    changed = spec.changed(request_override('{"gpus": 1, "partition": null}'))
    assert changed == KernelRequest(gpus=1, time=60)
    assert spec.changed(request_override(None, {"time": "30"})).time == 30
    assert request_override("") == {} and request_override(None) == {}


def test_config_round_trips() -> None:
    spec = request_from_config({"gpus": 1, "time": 60, "options": ["--exclusive"]})
    assert spec.to_config() == {"gpus": 1, "time": 60, "options": ["--exclusive"]}
    assert request_from_config(spec.to_config()) == spec


@pytest.mark.parametrize(
    ("config", "said"),
    [
        ({"gpus": "two"}, "gpus must be a whole number, not 'two'"),
        ({"gpus": True}, "gpus must be a whole number, not True"),
        ({"gpus": -1}, "gpus must be zero or more, not -1"),
        ({"time": 0}, "time must be positive, not 0"),
        ({"partition": "a b"}, "partition must be one name"),
        ({"gpu_type": "h100,a100"}, "gpu_type must be one name"),
        ({"options": "--exclusive"}, "options must be a list of salloc tokens"),
        ({"gpu": 1}, "unknown field 'gpu'"),
    ],
)
def test_a_wrong_field_is_named(config: dict[str, object], said: str) -> None:
    with pytest.raises(RequestError) as caught:
        request_from_config(config)
    assert said in str(caught.value) and "fields: gpus" in str(caught.value)


def test_every_wrong_field_at_once() -> None:
    with pytest.raises(RequestError) as caught:
        request_from_config({"gpus": "x", "time": -5})
    assert "gpus must be" in str(caught.value) and "time must be" in str(caught.value)


@pytest.mark.parametrize(
    ("text", "said"),
    [("{gpus: 2}", "SLURMLAB_KERNEL_REQUEST is not JSON"), ("[2]", "must be a JSON object, not list")],
)
def test_a_malformed_override_says_what_to_write(text: str, said: str) -> None:
    with pytest.raises(RequestError) as caught:
        request_override(text)
    assert said in str(caught.value) and '{"gpus": 2, "time": 30}' in str(caught.value)


def test_a_given_override_must_be_a_mapping() -> None:
    with pytest.raises(RequestError, match="slurm_request must be a mapping"):
        request_override(None, ["--gpus=2"])


def test_a_notebooks_metadata_changes_the_request() -> None:
    from slurmlab.provisioner import notebook_override

    notebook = {
        "cells": [],
        "metadata": {"slurmlab": {"kernel_request": {"gpus": 1, "time": 5}}},
        "nbformat": 4,
    }
    assert notebook_override(json.dumps(notebook), "a.ipynb") == {"gpus": 1, "time": 5}
    assert notebook_override(json.dumps({"metadata": {}}), "a.ipynb") == {}
    assert notebook_override("not a notebook", "a.ipynb") == {}
    assert notebook_override("[1]", "a.ipynb") == {}
    with pytest.raises(
        RequestError, match=r"a.ipynb: metadata.slurmlab.kernel_request must be an object, not list"
    ):
        notebook_override(json.dumps({"metadata": {"slurmlab": {"kernel_request": [2]}}}), "a.ipynb")
