"""Each NVLink's state from `nvidia-smi nvlink -s`: real captures parse healthy, a degraded link (made by editing a
capture's text) shows in the summary, and the mistakes of joining the wrong files are told plainly."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from shared_paths import require_shared
from shared_paths import smi_capture as read

import slurmlab
from slurmlab.core.gpu.nvlink import link_states
from slurmlab.core.gpu.smi import parse_nvlink_status, parse_topo_matrix
from slurmlab.core.gpu.smi.nvlink import read_nvlink_status
from slurmlab.core.gpu.topology import Topology
from slurmlab.errors import ParseError

H100_TOPO = "topo-8x-h100-sxm-nv18-no-nics-spaces.txt"
H100_NVLINK = "nvlink-status-i0-h100-80gb-hbm3.txt"
A100_TOPO = "topo-4x-a100-sxm4-80gb-nv12-ansi-underline-header.txt"
A100_NVLINK = "nvlink-status-4x-a100-sxm4-80gb.txt"


def degrade(text: str, gpu: int, inactive: tuple[int, ...] = (), slow: tuple[int, ...] = ()) -> str:
    """The capture with some links of one GPU edited to <inactive> or to half speed."""
    out, current = [], None
    for line in text.splitlines():
        m = re.match(r"^GPU (\d+):", line)
        if m:
            current = int(m.group(1))
        link = re.match(r"^(\s*Link (\d+): )([\d.]+) GB/s$", line)
        if link and current == gpu and int(link.group(2)) in inactive:
            line = link.group(1) + "<inactive>"
        elif link and current == gpu and int(link.group(2)) in slow:
            line = f"{link.group(1)}{float(link.group(3)) / 2:.3f} GB/s"
        out.append(line)
    return "\n".join(out) + "\n"


@pytest.mark.parametrize(
    ("name", "gpus", "links"),
    [
        (H100_NVLINK, [0], 18),
        (A100_NVLINK, [0, 1, 2, 3], 12),
        ("nvlink-status-2x-rtx3090-nv4.txt", [0, 1], 4),
    ],
)
def test_real_captures_are_healthy(name: str, gpus: list[int], links: int) -> None:
    states = link_states(parse_nvlink_status(read(name)))
    assert [s.gpu for s in states] == gpus
    assert all(
        s.healthy and s.total == links and s.active == links and s.fault_label() is None for s in states
    )


def test_degraded_links_show_in_the_summary_and_cut_the_switched_bandwidth() -> None:
    bad = degrade(read(H100_NVLINK), 0, inactive=(4, 9))
    t = parse_topo_matrix(read(H100_TOPO)).with_nvlink_status(parse_nvlink_status(bad))
    state = t.link_state(0)
    assert state is not None and state.inactive == (4, 9) and state.fault_label() == "2 of 18 links inactive"
    text = t.summary()
    assert "GPU0: 2 of 18 links inactive (inactive: link 4, 9)" in text and "reseat the GPU" in text
    # on the switch GPU0 brings 16 links: every pair with it is held to 16 x 25 GB/s, the others keep 450
    assert "GPU0: only 16 links x 25 GB/s = 400 GB/s per direction" in text
    assert t.bandwidth_gbps(0, 5) == 400.0 and t.bandwidth_gbps(1, 5) == 450.0
    # the nvlink -s names the model the topo -m capture did not
    assert (
        t.gpu_model == "NVIDIA H100 80GB HBM3" and t.gpu(0).uuid == "GPU-5a10e6e5-95f7-2785-ed63-6f6147f304f7"
    )
    healthy = parse_topo_matrix(read(H100_TOPO)).with_nvlink_status(parse_nvlink_status(read(H100_NVLINK)))
    assert (
        "GPU 0: all 18 links active at 26.562 GB/s" in healthy.summary()
        and "inactive" not in healthy.summary()
    )


def test_a_slow_link_is_told_with_its_speed_and_the_expected_one() -> None:
    bad = degrade(read(A100_NVLINK), 2, slow=(7,))
    t = parse_topo_matrix(read(A100_TOPO)).with_nvlink_status(parse_nvlink_status(bad))
    text = t.summary()
    assert "GPU2: 1 of 12 links slow (slow: link 7 at 12.5 GB/s (expected 25 GB/s))" in text
    assert "GPU 0, 1, 3: all 12 links active at 25 GB/s" in text


def test_zero_speed_is_inactive_and_an_unknown_model_is_judged_by_its_fastest_link() -> None:
    text = "GPU 0: Some GPU (UUID: GPU-1)\n  Link 0: 20 GB/s\n  Link 1: 0 GB/s\n  Link 2: 10 GB/s\n"
    (state,) = link_states(parse_nvlink_status(text))
    assert state.inactive == (1,) and state.slow == ((2, 10.0),) and state.expected_gbps == 20.0


def test_library_joins_the_two_files(tmp_path: Path) -> None:
    nv = tmp_path / "nvlink-s.txt"
    nv.write_text(degrade(read(H100_NVLINK), 0, inactive=(17,)))
    nt = slurmlab.topology(require_shared("nvidia-smi", H100_TOPO), nvlink=nv)
    assert "link state from nvidia-smi nvlink -s saved in" in nt.summary()
    assert "GPU0: 1 of 18 links inactive" in nt.summary()


def test_nvlink_s_alone_is_pointed_to_nvlink_argument() -> None:
    with pytest.raises(ParseError) as err:
        slurmlab.topology(require_shared("nvidia-smi", H100_NVLINK))
    assert "looks like `nvlink-s` output" in str(err.value)
    assert "slurmlab.topology('topo-m.txt', nvlink=" in str(err.value.hint)


def test_wrong_file_as_nvlink_is_refused_saying_what_it_is() -> None:
    with pytest.raises(ParseError) as err:
        slurmlab.topology(
            require_shared("nvidia-smi", H100_TOPO), nvlink=require_shared("nvidia-smi", A100_TOPO)
        )
    assert "looks like `topo` output" in str(err.value.hint) and "`nvidia-smi nvlink -s`" in str(
        err.value.hint
    )
    with pytest.raises(ParseError, match="looks like `lgi`"):
        read_nvlink_status(read("mig-lgi-a30-24gb-4x1g.6gb.txt"), "x.txt")


def test_captures_of_different_nodes_are_refused() -> None:
    four = parse_topo_matrix(read(A100_TOPO))
    # GPU indices the topology lacks
    with pytest.raises(ParseError) as err:
        parse_topo_matrix("\tGPU0\tGPU1\nGPU0\t X \tNV12\nGPU1\tNV12\t X \n").with_nvlink_status(
            parse_nvlink_status(read(A100_NVLINK))
        )
    assert "GPU 2, 3" in str(err.value) and "same node" in str(err.value.hint)
    # an RTX 3090's 4 links cannot make the NV12 this topology shows
    with pytest.raises(ParseError) as err:
        four.with_nvlink_status(parse_nvlink_status(read("nvlink-status-2x-rtx3090-nv4.txt")))
    assert "GPU0 with NV12 to a peer" in str(err.value.hint) and "different nodes" in str(err.value.hint)
    # UUIDs that disagree
    named = four.with_gpu_details({0: (None, "GPU-00000000-0000-0000-0000-000000000000")})
    with pytest.raises(ParseError, match="different"):
        named.with_nvlink_status(parse_nvlink_status(read(A100_NVLINK)))


def test_with_model_keeps_and_rejudges_the_link_state() -> None:
    t: Topology = parse_topo_matrix(read(A100_TOPO)).with_nvlink_status(
        parse_nvlink_status(degrade(read(A100_NVLINK), 1, inactive=(0,)))
    )
    again = t.with_model("NVIDIA A100-SXM4-80GB")
    assert again.link_state(1) is not None and again.link_state(1).fault_label() == "1 of 12 links inactive"  # type: ignore[union-attr]
