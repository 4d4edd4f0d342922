"""kvviz's kernel before and after the AVX-512 prefetch, in the static step: two copies of a model in one process,
one compiled (and its kernels chosen by kvviz.engine.regions) with the build of the kernel before the change (the
source at git revision BEFORE), one with the build of the working tree's; then ROUNDS interleaved rounds of 64
tokens each (the order alternating), each copy run with its own build; decode tokens/s, the ratio per round and its
median. python instep.py SPEC@DTYPE BEFORE ROUNDS, from the repository root with PYTHONPATH=."""

import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from kvviz.engine import loading, regions, stream
from kvviz.engine.loop import run_to_end
from kvviz.engine.request import GenerationRequest

PROMPT = "Explain what a KV cache is."


def build_at(revision: str | None, folder: Path):
    shown = ["git", "show", f"{revision}:kvviz/engine/stream_gemv.c"]
    source = stream.SOURCE.read_text() if revision is None else subprocess.run(  # noqa: S603
        shown, check=True, capture_output=True, text=True).stdout
    src = folder / f"{revision or 'now'}.c"
    src.write_text(source)
    out = folder / f"{revision or 'now'}.so"
    subprocess.run(["gcc", *stream.FLAGS, "-o", str(out), str(src)], check=True)  # noqa: S603, S607
    return stream.load(out)


def run(lm, lib, new_tokens: int = 64) -> float:
    stream.library = lambda: lib  # stream.gemv reads the module's library() at each call
    req = GenerationRequest(PROMPT, max_new_tokens=new_tokens, ignore_eos=True).with_mode("static")
    _, fin = run_to_end(lm, req)
    return fin.summary.decode_tokens_per_s


def main(spec: str, before: str, rounds: int) -> None:
    folder = Path(tempfile.mkdtemp())
    libs = {"before": build_at(before, folder), "after": build_at(None, folder)}
    model, _, dtype = spec.partition("@")
    lms = {}
    for name, lib in libs.items():
        loading.unload_all()  # the loader's cache would hand the same model back
        lms[name] = loading.load_model(model, dtype=dtype or None)
        run(lms[name], lib, 8)  # compiles, and chooses each shape's kernel with this build on offer
        print(name, {shape: c["kernel"] for shape, c in regions.kernel_choice(lms[name].model).items()}, flush=True)
    speeds = {n: [] for n in libs}
    for r in range(rounds):
        for name in (("before", "after") if r % 2 == 0 else ("after", "before")):
            speeds[name].append(run(lms[name], libs[name]))
    ratios = [a / b for a, b in zip(speeds["after"], speeds["before"], strict=True)]
    for name, v in speeds.items():
        print(f"{name}: median {statistics.median(v):.2f} decode tokens/s ({min(v):.2f}-{max(v):.2f})")
    print(f"after / before, per round: median {statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}),"
          f" {rounds} rounds")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
