"""Train kvviz's bundled model from nothing: `python -m kvviz.train_tiny [--quick] [--resume]`.

The corpus is real prose that Debian's package archive carries: The Debian Administrator's
Handbook and the Debian Reference, in English and in Simplified Chinese (GPL-2+; the Handbook also
CC-BY-SA-3.0). The script fetches the packages with `apt-get download`, extracts the paragraphs,
trains a byte-level BPE tokenizer with `tokenizers`, then a small Qwen2-family model with
grouped-query attention, and writes a Hugging Face model folder (safetensors, tokenizer with EOS and a
chat template), the loss curve as a picture, sample continuations and the metrics.

Everything is seeded. Checkpoints are written as training goes, and --resume continues from the last
one. --quick trains a toy-sized model on the small sample committed in assets/tiny/ in seconds (the
test suite runs it). This module is a tool beside kvviz's core; the app never imports it.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from html.parser import HTMLParser
from pathlib import Path

import torch

ASSETS = Path(__file__).resolve().parent.parent / "assets"
TINY_DIR = ASSETS / "tiny"
SAMPLE_CORPUS = TINY_DIR / "sample-corpus.jsonl"
PACKAGES = ("debian-handbook", "debian-reference-en", "debian-reference-zh-cn")
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SAMPLE_PROMPTS = [
    ("The cache", False),
    ("The kernel", False),
    ("The package manager", False),
    ("Debian 软件包", False),
    ("缓存", False),
    ("Explain what the kernel does.", True),
    ("What is a package?", True),
    ("什么是内核？", True),
    ("用三句话解释 LLM 推理中的 KV Cache。", True),
]


@dataclass(frozen=True)
class TrainConfig:
    """Model shape and optimisation settings. The defaults make the bundled model."""

    vocab_size: int = 8192
    hidden_size: int = 256
    num_layers: int = 4
    num_heads: int = 8
    num_kv_heads: int = 2
    intermediate_size: int = 768
    context: int = 1024
    seq_len: int = 1024  # train at the full context, so every position the config allows has been seen
    batch_size: int = 4
    steps: int = 1200
    lr: float = 2e-3
    warmup: int = 100
    weight_decay: float = 0.1
    eval_every: int = 100
    eval_batches: int = 8
    checkpoint_every: int = 100
    seed: int = 1234
    chat_fraction: float = 0.3


QUICK = TrainConfig(vocab_size=400, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2,
                    intermediate_size=128, context=256, seq_len=64, batch_size=4, steps=24, warmup=4,
                    eval_every=8, eval_batches=2, checkpoint_every=8, lr=3e-3)


# ---------------------------------------------------------------- corpus
class _Paragraphs(HTMLParser):
    """Text of <p> and <div class="para"> elements (Publican's paragraphs), code blocks left out."""

    def __init__(self) -> None:
        super().__init__()
        self.paragraphs: list[str] = []
        self._buf: list[str] | None = None
        self._open: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        classes = (dict(attrs).get("class") or "").split()
        if tag in ("pre", "script", "style"):
            self._skip += 1
        if self._buf is None and not self._skip and (tag == "p" or (tag == "div" and "para" in classes)):
            self._buf, self._open = [], [tag]
        elif self._buf is not None and tag == self._open[0]:
            self._open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("pre", "script", "style"):
            self._skip -= 1
        if self._buf is not None and tag == self._open[0]:
            self._open.pop()
            if not self._open:
                self.paragraphs.append(re.sub(r"\s+", " ", "".join(self._buf)).strip())
                self._buf = None

    def handle_data(self, data: str) -> None:
        if self._buf is not None and not self._skip:
            self._buf.append(data)


_CJK_END = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]$")
_CJK_START = re.compile(r"^[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")


def reference_paragraphs(text: str) -> list[str]:
    """Prose paragraphs of the Debian Reference's plain-text edition: tables and headings dropped,
    wrapped lines joined (without a space between Chinese characters)."""
    paragraphs, current = [], []
    for line in [*text.splitlines(), ""]:
        s = line.strip()
        structural = s.startswith(("|", "+-", "*-")) or re.match(r"^[-=_+*|]{3,}", s) or (
            re.match(r"^\d+(\.\d+)*\.?\s", s) and len(s) < 80)
        if not s or structural:
            if current:
                joined = current[0]
                for part in current[1:]:
                    joined += part if _CJK_END.search(joined) and _CJK_START.match(part) else " " + part
                paragraphs.append(joined)
            current = []
            continue
        current.append(s)
    return paragraphs


def obtain_corpus(work: Path) -> list[dict]:
    """Fetch the Debian packages (apt-get download), unpack them, and return their paragraphs."""
    import gzip

    debs, root = work / "debs", work / "unpacked"
    debs.mkdir(parents=True, exist_ok=True)
    if not list(debs.glob("*.deb")):
        print("fetching", ", ".join(PACKAGES), "with apt-get download", file=sys.stderr)
        subprocess.run(["apt-get", "download", *PACKAGES], cwd=debs, check=True)  # noqa: S603, S607
    if not root.exists():
        for deb in sorted(debs.glob("*.deb")):
            subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)  # noqa: S603, S607
    docs = []
    handbook = root / "usr/share/doc/debian-handbook/html"
    for lang, folder in (("en", "en-US"), ("zh", "zh-CN")):
        for page in sorted((handbook / folder).glob("*.html")):
            parser = _Paragraphs()
            parser.feed(page.read_text(encoding="utf-8"))
            docs += [{"lang": lang, "source": "debian-handbook", "text": p} for p in parser.paragraphs]
    reference = root / "usr/share/debian-reference"
    for lang, suffix in (("en", "en"), ("zh", "zh-cn")):
        with gzip.open(reference / f"debian-reference.{suffix}.txt.gz", "rt", encoding="utf-8") as fh:
            docs += [{"lang": lang, "source": "debian-reference", "text": p} for p in reference_paragraphs(fh.read())]
    return [d for d in docs if len(d["text"]) >= 40]


def load_sample() -> list[dict]:
    return [json.loads(line) for line in SAMPLE_CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]


def split(docs: list[dict], seed: int, val_fraction: float = 0.05) -> tuple[list[dict], list[dict]]:
    """Shuffle paragraphs with the seed and hold out a validation share of each language."""
    rng = random.Random(seed)
    train, val = [], []
    for lang in sorted({d["lang"] for d in docs}):
        group = [d for d in docs if d["lang"] == lang]
        rng.shuffle(group)
        cut = max(1, int(len(group) * val_fraction))
        val += group[:cut]
        train += group[cut:]
    rng.shuffle(train)
    return train, val


# ---------------------------------------------------------------- tokenizer and data
def train_tokenizer(texts: list[str], vocab_size: int):
    """Byte-level BPE with EOS (<|im_end|>), <|endoftext|> between documents and a chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>",  # noqa: S106
                                   pad_token="<|endoftext|>", model_max_length=10**6)  # noqa: S106
    fast.chat_template = CHAT_TEMPLATE
    return fast


def _chat_example(text: str) -> tuple[str, str] | None:
    """(question, answer): the paragraph's first sentence asked, the rest answered; None for one sentence."""
    parts = re.split(r"(?<=[.!?。！？])\s*", text, maxsplit=1)
    if len(parts) < 2 or len(parts[0]) < 10 or len(parts[1]) < 20:
        return None
    return parts[0], parts[1]


def encode_stream(docs: list[dict], tokenizer, chat_fraction: float, seed: int) -> torch.Tensor:
    """All documents as one token stream: most as plain text ending in <|endoftext|>, a share as chat
    turns through the chat template, so the template's tokens mean something to the model."""
    rng = random.Random(seed)
    ids: list[int] = []
    end = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    for d in docs:
        chat = _chat_example(d["text"]) if rng.random() < chat_fraction else None
        if chat:
            text = tokenizer.apply_chat_template(
                [{"role": "user", "content": chat[0]}, {"role": "assistant", "content": chat[1]}], tokenize=False)
            ids += tokenizer(text, add_special_tokens=False)["input_ids"]
        else:
            ids += tokenizer(d["text"], add_special_tokens=False)["input_ids"]
        ids.append(end)
    return torch.tensor(ids, dtype=torch.long)


def batches(stream: torch.Tensor, seq_len: int, batch_size: int, gen: torch.Generator) -> Iterator[torch.Tensor]:
    """Endless random windows of seq_len + 1 tokens: inputs are [:, :-1], targets [:, 1:]."""
    top = len(stream) - seq_len - 1
    while True:
        starts = torch.randint(0, top, (batch_size,), generator=gen)
        yield torch.stack([stream[s:s + seq_len + 1] for s in starts.tolist()])  # [B, T + 1]


# ---------------------------------------------------------------- model and training
def build_model(cfg: TrainConfig, tokenizer):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers, num_attention_heads=cfg.num_heads, num_key_value_heads=cfg.num_kv_heads,
        max_position_embeddings=cfg.context, rope_theta=10000.0, rms_norm_eps=1e-6, tie_word_embeddings=True,
        bos_token_id=None, eos_token_id=[tokenizer.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")],
        pad_token_id=tokenizer.pad_token_id, use_sliding_window=False,
    )
    torch.manual_seed(cfg.seed)
    return Qwen2ForCausalLM(config)


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warm-up, then cosine decay to a tenth of the peak."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    progress = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))))


def loss_of(model, batch: torch.Tensor) -> torch.Tensor:
    logits = model(input_ids=batch[:, :-1]).logits  # [B, T, vocab]
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))


@torch.no_grad()
def evaluate(model, val: torch.Tensor, cfg: TrainConfig) -> float:
    """Mean loss over fixed validation windows (the same every evaluation)."""
    model.eval()
    gen = torch.Generator().manual_seed(cfg.seed + 1)
    it = batches(val, cfg.seq_len, cfg.batch_size, gen)
    loss = sum(loss_of(model, next(it)).item() for _ in range(cfg.eval_batches)) / cfg.eval_batches
    model.train()
    return loss


def train(cfg: TrainConfig, out: Path, work: Path, docs: list[dict], resume: bool, max_minutes: float) -> dict:
    """Train and write the model folder, the loss curve, samples and metrics into `out`."""
    from tqdm.auto import tqdm

    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    work.mkdir(parents=True, exist_ok=True)
    train_docs, val_docs = split(docs, cfg.seed)
    tokenizer = train_tokenizer([d["text"] for d in train_docs], cfg.vocab_size)
    train_ids = encode_stream(train_docs, tokenizer, cfg.chat_fraction, cfg.seed)
    val_ids = encode_stream(val_docs, tokenizer, cfg.chat_fraction, cfg.seed + 2)
    model = build_model(cfg, tokenizer)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=cfg.weight_decay)
    gen = torch.Generator().manual_seed(cfg.seed)
    ckpt = work / "checkpoint.pt"
    step, log, best = _resume(ckpt, cfg, model, opt, gen) if resume and ckpt.exists() else (0, [], (float("inf"), None))
    data = batches(train_ids, cfg.seq_len, cfg.batch_size, gen)
    start = time.perf_counter()
    model.train()
    bar = tqdm(total=cfg.steps, initial=step, desc="training", unit="step", dynamic_ncols=True)
    while step < cfg.steps:
        loss = _optimizer_step(model, opt, next(data), lr_at(step, cfg))
        step += 1
        entry = {"step": step, "train_loss": loss, "lr": lr_at(step - 1, cfg),
                 "tokens": step * cfg.batch_size * cfg.seq_len}
        if step % cfg.eval_every == 0 or step == cfg.steps:
            entry["val_loss"] = evaluate(model, val_ids, cfg)
            if entry["val_loss"] < best[0]:
                best = (entry["val_loss"], {k: v.clone() for k, v in model.state_dict().items()})
        log.append(entry)
        bar.set_postfix(loss=f"{entry['train_loss']:.3f}", val=f"{best[0]:.3f}")
        bar.update(1)
        out_of_time = max_minutes and time.perf_counter() - start > max_minutes * 60
        if step % cfg.checkpoint_every == 0 or step == cfg.steps or out_of_time:
            torch.save({"config": asdict(cfg), "model": model.state_dict(), "optimizer": opt.state_dict(),
                        "generator": gen.get_state(), "step": step, "log": log, "best_loss": best[0],
                        "best_model": best[1]}, ckpt)
        if out_of_time:
            print(f"\nstopping at step {step}: the {max_minutes}-minute budget is spent; --resume goes on",
                  file=sys.stderr)
            break
    bar.close()
    if best[1] is None:  # stopped before the first evaluation
        best = (evaluate(model, val_ids, cfg), model.state_dict())
    model.load_state_dict(best[1])  # the weights with the lowest validation loss
    return _write(out, cfg, model, tokenizer, log, best[0], time.perf_counter() - start,
                  {"train_tokens": len(train_ids), "val_tokens": len(val_ids), "paragraphs": len(docs)})


def _resume(ckpt: Path, cfg: TrainConfig, model, opt, gen: torch.Generator) -> tuple[int, list[dict], tuple]:
    """Model, optimizer and data order restored from a checkpoint made with the same settings: (step, log, best)."""
    state = torch.load(ckpt, weights_only=False)
    if state["config"] != asdict(cfg):
        raise SystemExit(f"{ckpt} was made with other settings; remove it or drop --resume")
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    gen.set_state(state["generator"])
    print(f"resuming at step {state['step']}", file=sys.stderr)
    return state["step"], state["log"], (state["best_loss"], state["best_model"])


def _optimizer_step(model, opt, batch: torch.Tensor, lr: float) -> float:
    """One step of AdamW at learning rate `lr`, gradients clipped to norm 1; returns the batch's loss."""
    for group in opt.param_groups:
        group["lr"] = lr
    loss = loss_of(model, batch)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss.item()


def _write(out: Path, cfg: TrainConfig, model, tokenizer, log: list[dict], val_loss: float, seconds: float,
           data: dict) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    model.generation_config.eos_token_id = model.config.eos_token_id
    model.generation_config.pad_token_id = model.config.pad_token_id
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    with (out / "loss.csv").open("w") as fh:
        fh.write("step,tokens,train_loss,val_loss,lr\n")
        for e in log:
            fh.write(f"{e['step']},{e['tokens']},{e['train_loss']:.5f},{e.get('val_loss', '')},{e['lr']:.6g}\n")
    plot_loss(log, out / "loss.png")
    metrics = {"val_loss": val_loss, "val_perplexity": math.exp(val_loss), "steps": log[-1]["step"] if log else 0,
               "train_seconds": seconds, "params": sum(p.numel() for p in model.parameters()),
               "config": asdict(cfg), **data, "torch": torch.__version__}
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2))
    (out / "samples.md").write_text(samples_markdown(out), encoding="utf-8")
    return metrics


def plot_loss(log: list[dict], path: Path) -> None:
    """Training loss (every step, smoothed) and validation loss against tokens seen, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tokens = [e["tokens"] / 1e6 for e in log]
    smooth, ema = [], None
    for e in log:
        ema = e["train_loss"] if ema is None else 0.95 * ema + 0.05 * e["train_loss"]
        smooth.append(ema)
    val = [(e["tokens"] / 1e6, e["val_loss"]) for e in log if "val_loss" in e]
    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    ax.plot(tokens, [e["train_loss"] for e in log], color="#9ecae1", linewidth=0.6, label="train (each step)")
    ax.plot(tokens, smooth, color="#3182bd", linewidth=1.5, label="train (smoothed)")
    if val:
        ax.plot(*zip(*val, strict=True), "o-", color="#e6550d", markersize=3, label="validation")
    ax.set_xlabel("training tokens (millions)")
    ax.set_ylabel("cross-entropy loss (nats/token)")
    ax.set_title("kvviz tiny model: loss")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def samples_markdown(folder: Path, max_new_tokens: int = 60) -> str:
    """Greedy continuations of a few prompts, generated through kvviz's own engine from the saved folder."""
    from kvviz.engine.loading import load_model
    from kvviz.engine.loop import run_to_end
    from kvviz.engine.request import GenerationRequest

    lm = load_model(str(folder), device="cpu", dtype="fp32")
    lines = ["# Sample outputs", "", f"Greedy decoding, at most {max_new_tokens} new tokens, generated by "
             "`kvviz.engine.loop` from this folder (`python -m kvviz.train_tiny` writes this file).", ""]
    for prompt, chat in SAMPLE_PROMPTS:
        _, fin = run_to_end(lm, GenerationRequest(prompt, max_new_tokens=max_new_tokens, chat_template=chat))
        how = "chat template" if chat else "raw prompt"
        lines += [f"## {prompt} ({how})", "", "```text", fin.text.strip(), "```",
                  f"finish: {fin.reason}, {fin.summary.new_tokens} tokens", ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kvviz.train_tiny", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=TINY_DIR, help="model folder to write (default assets/tiny)")
    parser.add_argument("--work", type=Path, default=Path(".cache/train_tiny"),
                        help="downloads, unpacked corpus and checkpoints (default .cache/train_tiny)")
    parser.add_argument("--quick", action="store_true", help="a toy model on the committed sample, in seconds")
    parser.add_argument("--resume", action="store_true", help="continue from the last checkpoint in --work")
    parser.add_argument("--steps", type=int, help="override the number of optimiser steps")
    parser.add_argument("--max-minutes", type=float, default=60.0, help="stop after this long (default 60)")
    parser.add_argument("--write-sample", action="store_true",
                        help="also write assets/tiny/sample-corpus.jsonl (120 paragraphs per language)")
    args = parser.parse_args(argv)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    cfg = QUICK if args.quick else TrainConfig()
    if args.steps:
        cfg = TrainConfig(**(asdict(cfg) | {"steps": args.steps}))
    docs = load_sample() if args.quick else obtain_corpus(args.work)
    if args.write_sample and not args.quick:
        write_sample(docs)
    if args.quick and args.out == TINY_DIR:
        raise SystemExit("--quick would overwrite the bundled model; give --out")
    metrics = train(cfg, args.out, args.work, docs, args.resume, args.max_minutes)
    print(json.dumps({k: v for k, v in metrics.items() if k != "config"}, indent=2))
    return 0


def write_sample(docs: list[dict], per_lang: int = 120) -> None:
    """A small, fixed slice of the corpus for the quick mode (committed, with the licence beside it)."""
    rng = random.Random(0)
    chosen = []
    for lang in ("en", "zh"):
        group = [d for d in docs if d["lang"] == lang and 80 <= len(d["text"]) <= 600]
        chosen += rng.sample(group, min(per_lang, len(group)))
    SAMPLE_CORPUS.parent.mkdir(parents=True, exist_ok=True)
    SAMPLE_CORPUS.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in chosen), encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())


