"""`python -m kvviz.bench fast --quick`: every variant runs on the bundled tiny model and the results say what the
static mode measured: its compile apart, its tokens equal to the cached loop's, bandwidth by the one rule."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch

from kvviz.bench.cli import main as bench_main
from kvviz.bench.fast import VARIANTS
from kvviz.engine import regions


@pytest.mark.alone  # generate's decode rate is two timed runs apart: beside another test the shorter once took longer
def test_fast_quick_writes_every_variant_and_the_static_compile(tmp_path, capsys):
    """The quick run writes rows for model.generate and the three modes, the static warm-up's compile apart, and a
    summary whose speedups and utilisations follow from the medians."""
    assert bench_main(["fast", "--quick", "--profile", "--out", str(tmp_path)]) == 0
    said = capsys.readouterr().err  # its progress: the warm-ups, then the one timed round
    assert "fast: tiny@fp32: warm-ups" in said and "fast: tiny@fp32: round 1 of 1" in said
    saved = json.loads((tmp_path / "fast-quick.json").read_text())
    assert saved["command"].startswith("python -m kvviz.bench fast --quick")
    result = saved["results"]["models"]["tiny@fp32"]
    assert set(result["variants"]) == set(VARIANTS)
    assert result["compile_s"] > 0, "the static warm-up compiles the step"
    assert result["static_tokens_identical_to_cached"] is True, "fp32 greedy: the static mode changed the tokens"
    v = result["variants"]
    assert result["static_over_generate_decode"] == pytest.approx(
        v["static"]["decode_tokens_per_s"] / v["generate"]["decode_tokens_per_s"])
    rows = pd.read_csv(tmp_path / "fast-quick.csv")
    timed = rows[rows["repeat"] >= 0]
    assert sorted(timed["variant"]) == sorted(VARIANTS) and (timed["new_tokens"] == 8).all()
    assert (timed["compile_s"] == 0).all(), "timed static runs reuse the warm-up's compiled step"
    bw = saved["results"]["measured_bandwidth_gb_s"] * 1e9
    assert timed["bandwidth_utilisation"].to_numpy() == pytest.approx(
        (timed["bytes_per_decode_step"] * timed["decode_tokens_per_s"] / bw).to_numpy())
    static, cached = (timed[timed["variant"] == m].iloc[0] for m in ("static", "cached"))
    assert static["bytes_per_decode_step"] >= cached["bytes_per_decode_step"], "a static step reads its whole cache"
    # each run against the physical ceiling too: the streaming read made just before it (one per timed run)
    assert timed["stream_read_before"].notna().all() and (timed["stream_read_before"] > 1e8).all()
    assert v["static"]["share_of_stream_read"] == pytest.approx(
        static["bandwidth_utilisation"] * bw / static["stream_read_before"])
    assert result["stream_read_gb_s_range"] == pytest.approx([static["stream_read_before"] / 1e9] * 2)
    assert {"cpu_model", "isa", "load_average", "cpu_stream_read_gb_s", "cpu_share_others",
            "cpu_share_steal"} <= set(saved["machine"])
    # The kernel each shape of the static step's products was given, and the timed calls that chose it: tiny's
    # q, k, v and gate, up as groups, o, down and the lm_head alone
    kernels = result["static_kernels"]
    assert sum(c["products"] for c in kernels.values()) == 4 * 4 + 1, "tiny: 4 layers of qkv, o, gate-up, down; lm_head"
    for shape, c in kernels.items():
        assert set(c["pass_ms"]) == set(regions.kernels(torch.float32)) and all(ms > 0 for ms in c["pass_ms"].values())
        assert c["kernel"] == min(c["pass_ms"], key=c["pass_ms"].get), shape
    chosen = {c["kernel"] for c in kernels.values()}
    # --profile: what a decode step of each mode spent its time in. On a CPU the static step calls that kernel on
    # every weight (kvviz.engine.regions) where the eager step runs aten's mm/addmm.
    profile = saved["results"]["profile"]["tiny@fp32"]
    eager_ops = {op["op"] for op in profile["cached"]["top_ops"]}
    static_ops = {op["op"] for op in profile["static"]["top_ops"]}
    ops = {"onednn": {"mkldnn::_linear_pointwise"}, "mkl": {"mkl::_mkl_linear"},
           "mv": {"aten::mv", "aten::addmv", "aten::addmv_"},
           "stream": {"kvviz::packed_linear", "kvviz::grouped_linear"}}  # its time is the operator's own
    kernel_ops = set().union(*(ops[k] for k in chosen))
    assert eager_ops & {"aten::mm", "aten::addmm"} and not eager_ops & kernel_ops
    assert static_ops & kernel_ops and not static_ops & {"aten::mm", "aten::addmm"}
    assert 0 < profile["static"]["step_ms_profiled"]
    assert all(0 < op["share"] <= 1 for op in profile["static"]["top_ops"])
    assert (tmp_path / "fast-quick-profile.csv").exists() and (tmp_path / "fast-quick-onednn.csv").exists()


ATTRS = "src:bf16::blocked:ab::f0 wei:bf16::blocked:ba::f0 dst:bf16::blocked:ab::f0,attr-scratchpad:user,"
VERBOSE = "\n".join([
    "onednn_verbose,v1,info,oneDNN v3.7.1 (commit 8d263e693366ef8db40acc569cc7d8edf644556d)",
    "onednn_verbose,v1,primitive,info,template:operation,engine,primitive,implementation,prop_kind,"
    "memory_descriptors,attributes,auxiliary,problem_desc,exec_time",
    f"onednn_verbose,v1,primitive,exec,cpu,matmul,brg_matmul:avx10_1_512_amx,undef,{ATTRS},1x896:896x4864,1.75195",
    f"onednn_verbose,v1,primitive,exec,cpu,matmul,brg_matmul:avx10_1_512_amx,undef,{ATTRS},1x896:896x4864,0.73999",
    "onednn_verbose,primitive,exec,cpu,inner_product,brgemm:avx512_core_bf16,forward_inference,"
    "src_bf16::blocked:ab:f0 wei_bf16:p:blocked:AB16b64a2b:f0 dst_bf16::blocked:ab:f0,,,mb1ic896oc151936,10.5",
]) + "\n"


def test_onednn_verbose_lines_are_read_as_kernels():
    """oneDNN's verbose lines (two of torch's real ones, both line formats) read into primitive, implementation,
    problem and ms; info lines skipped; grouped per step by hand: 2 calls of the AMX matmul, 2.49194 ms."""
    from kvviz.bench.step_profile import group_kernels, parse_onednn_verbose

    lines = parse_onednn_verbose(VERBOSE)
    assert list(lines["implementation"]) == ["brg_matmul:avx10_1_512_amx"] * 2 + ["brgemm:avx512_core_bf16"]
    assert list(lines["problem"]) == ["1x896:896x4864", "1x896:896x4864", "mb1ic896oc151936"]
    grouped = group_kernels(lines)
    assert grouped.iloc[0].to_dict() == {"primitive": "inner_product", "implementation": "brgemm:avx512_core_bf16",
                                         "problem": "mb1ic896oc151936", "calls_per_step": 1, "ms_per_step": 10.5}
    assert grouped.iloc[1]["calls_per_step"] == 2 and grouped.iloc[1]["ms_per_step"] == pytest.approx(2.49194)
    assert parse_onednn_verbose("").empty and group_kernels(parse_onednn_verbose("")).empty


def test_fast_figure_draws_the_quick_results(tmp_path):
    """The figures part draws fast-quick.csv beside the other parts' results."""
    from kvviz.bench.figures import write_figures

    rows = [{"model": "tiny", "dtype": "fp32", "variant": v, "repeat": r, "decode_tokens_per_s": 100.0 + i,
             "bandwidth_utilisation": 0.2 + i / 10} for i, v in enumerate(VARIANTS) for r in (-1, 0)]
    pd.DataFrame(rows).to_csv(tmp_path / "fast-quick.csv", index=False)
    written = write_figures(tmp_path, tmp_path / "figures", png=False, quick=True)
    assert tmp_path / "figures" / "fast.html" in written
