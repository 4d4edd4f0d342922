"""kvviz.serving.multinode: the commands printed for a layout over several nodes are those vLLM's documentation
gives for that layout (written out here by hand from the docs, not from kvviz's code), every option they use is
one the installed vLLM defines, and a layout that does not split over the nodes is refused in one line.

Docs: vLLM's docs/serving/data_parallel_deployment.md ("This will run DP=4 with DP ranks 0 and 1 on the head node
and ranks 2 and 3 on the second node") and docs/serving/parallelism_scaling.md ("Running vLLM with
MultiProcessing": tp_size=8 and pp_size=2 over 2 nodes; "Running vLLM on a Ray cluster").
"""

from __future__ import annotations

import re
import shlex

import pytest

from kvviz.base.errors import InputError
from kvviz.calc.parallel import Parallelism
from kvviz.serving.multinode import DATA_PARALLEL, RAY, SPANNING, plan, rehearse

HEAD = "10.99.48.128"

# data_parallel_deployment.md, DP=4 over 2 nodes, 2 ranks each
DOCS_DP4_NODE0 = ("vllm serve $MODEL --data-parallel-size 4 --data-parallel-size-local 2 "
                  "--data-parallel-address 10.99.48.128 --data-parallel-rpc-port 13345")
DOCS_DP4_NODE1 = ("vllm serve $MODEL --headless --data-parallel-size 4 --data-parallel-size-local 2 "
                  "--data-parallel-start-rank 2 --data-parallel-address 10.99.48.128 --data-parallel-rpc-port 13345")
# parallelism_scaling.md, tp 8 × pp 2 over 2 nodes of 8 GPUs, multiprocessing (the default --master-port, 29501,
# written out: ParallelConfig.master_port)
DOCS_TP8PP2_NODE0 = ("vllm serve $MODEL --tensor-parallel-size 8 --pipeline-parallel-size 2 --nnodes 2 "
                     "--node-rank 0 --master-addr 10.99.48.128 --master-port 29501")
DOCS_TP8PP2_NODE1 = ("vllm serve $MODEL --tensor-parallel-size 8 --pipeline-parallel-size 2 --nnodes 2 "
                     "--node-rank 1 --master-addr 10.99.48.128 --master-port 29501 --headless")
# the same on a Ray cluster: Ray's head (its default port 6379), the worker joining it, one vllm serve on the head
DOCS_RAY = ["ray start --head --port 6379", "ray start --address 10.99.48.128:6379",
            "vllm serve $MODEL --tensor-parallel-size 8 --pipeline-parallel-size 2 --distributed-executor-backend ray"]


def options(line: str) -> tuple[tuple[str, ...], dict[str, str | None]]:
    """A command line as argparse reads it, order aside: the words before the first option, and each option with
    its value (None for a flag)."""
    words = shlex.split(line)
    first = next(i for i, w in enumerate(words) if w.startswith("--"))
    found: dict[str, str | None] = {}
    i = first
    while i < len(words):
        value = words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("--") else None
        found[words[i]] = value
        i += 1 if value is None else 2
    return tuple(words[:first]), found


@pytest.mark.parametrize(("layout", "nodes", "mode", "docs"), [
    (Parallelism(dp=4), 2, DATA_PARALLEL, [DOCS_DP4_NODE0, DOCS_DP4_NODE1]),
    (Parallelism(tp=8, pp=2), 2, SPANNING, [DOCS_TP8PP2_NODE0, DOCS_TP8PP2_NODE1]),
])
def test_commands_are_the_docs(layout, nodes, mode, docs):
    """Each node's command has the words and options of vLLM's documented one, in the documented node order."""
    got = plan("$MODEL", layout, nodes, HEAD, rpc_port=13345)
    assert got.mode == mode
    assert [c.node for c in got.commands] == list(range(nodes)), "one command per node, the head first"
    assert [options(c.line) for c in got.commands] == [options(d) for d in docs]


def test_ray_cluster_steps():
    """The Ray path: start the cluster on the head, join it from the other node, then one vllm serve on the head."""
    got = plan("$MODEL", Parallelism(tp=8, pp=2), 2, HEAD, backend=RAY)
    assert [c.node for c in got.commands] == [0, 1, 0]
    assert [options(c.line) for c in got.commands] == [options(d) for d in DOCS_RAY]


def test_data_parallel_ranks_for_three_nodes():
    """dp 6 × tp 2 over 3 nodes: 4 workers, so 2 replicas a node; the nodes after the head start at ranks 2 and 4."""
    got = plan("m", Parallelism(tp=2, dp=6), 3, HEAD)
    assert got.per_node == 4
    ranks = [options(c.line)[1].get("--data-parallel-start-rank") for c in got.commands]
    assert ranks == [None, "2", "4"]
    assert {options(c.line)[1]["--data-parallel-size-local"] for c in got.commands} == {"2"}
    assert ["--headless" in options(c.line)[1] for c in got.commands] == [False, True, True]


@pytest.mark.parametrize(("layout", "nodes", "key"), [
    (Parallelism(tp=3, dp=2), 4, "multinode.uneven"),  # 6 workers over 4 nodes
    (Parallelism(tp=4, dp=3), 2, "multinode.split_replica"),  # 6 a node: 1.5 replicas of 4, or 2/3 of a node
])
def test_refused_layouts(layout, nodes, key):
    with pytest.raises(InputError) as caught:
        plan("m", layout, nodes, HEAD)
    assert caught.value.key == key


def test_one_node_is_not_many():
    with pytest.raises(ValueError, match="nodes"):
        plan("m", Parallelism(dp=2), 1, HEAD)


def test_rehearsal_only_on_this_host():
    """A rehearsal starts every node here: a remote head or Ray is refused before anything starts."""
    with pytest.raises(InputError) as caught:
        rehearse("tiny", Parallelism(dp=2), 2, head=HEAD)
    assert caught.value.key == "multinode.rehearse_loopback"


@pytest.mark.vllm
def test_options_exist_in_installed_vllm():
    """Every option any plan prints is one the installed vLLM's argument parsers define (read from its source:
    no vLLM import, no start)."""
    from kvviz.serving.vllm import VENV

    sources = list(VENV.glob("lib/python3*/site-packages/vllm/engine/arg_utils.py")) + \
        list(VENV.glob("lib/python3*/site-packages/vllm/entrypoints/launchers/cli_args.py"))
    assert len(sources) == 2, f"vLLM's argument sources not found under {VENV}"
    text = "".join(p.read_text() for p in sources)
    defined = set(re.findall(r'"(--[a-z][a-z-]*)"', text))
    plans = [plan("m", Parallelism(dp=4), 2, HEAD), plan("m", Parallelism(tp=8, pp=2, dp=2), 4, HEAD),
             plan("m", Parallelism(tp=4, dp=2), 2, HEAD, backend=RAY),
             plan("m", Parallelism(tp=8, dp=2), 4, HEAD, backend=RAY)]
    used = {o for p in plans for c in p.commands if c.argv[0] == "vllm" for o in options(c.line)[1]}
    assert used - defined == set(), "options vLLM does not define"
