"""Broken model folders: a corrupt or incompatible folder is refused in one clear line, and the model loaded
before it stays loaded and gives the same text.

Each folder is a copy of the bundled model (assets/tiny) with one thing wrong. Through the running app,
/generate and /compare must answer it with a one-line message that names the problem, never a traceback;
"tiny" must then generate exactly its reference text. In the device worker, the tiny model must still be
the one it loaded first (no load progress on the next job). In kvviz.engine.loading, a load that fails midway
must leave nothing cached and nothing in memory.
"""

from __future__ import annotations

import json
import shutil
import weakref
from pathlib import Path

import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError

from kvviz.engine.events import Finished
from kvviz.engine.loading import BUNDLED, LoadError, load_model
from kvviz.engine.request import GenerationRequest
from tests.helpers import running_app

pytestmark = pytest.mark.slow
TINY = BUNDLED["tiny"]
FILES = ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
         "chat_template.jinja")
PROMPT = "What is a package?"
MAX_MESSAGE = 320  # the app cuts a message at 300 characters, plus a note of the length


def _copy(folder: Path) -> Path:
    folder.mkdir()
    for name in FILES:
        shutil.copy(TINY / name, folder / name)
    return folder


def _edit_config(folder: Path, **changes) -> None:
    config = json.loads((folder / "config.json").read_text()) | changes
    (folder / "config.json").write_text(json.dumps(config))


def truncated_weights(folder: Path) -> None:
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])  # a download cut off halfway


def garbage_weights(folder: Path) -> None:
    (folder / "model.safetensors").write_bytes(bytes(range(256)) * 4096)


def config_not_json(folder: Path) -> None:
    (folder / "config.json").write_text('{"model_type": "qwen2", "hidden_size": 256,')  # cut off


def not_a_causal_lm(folder: Path) -> None:
    (folder / "config.json").write_text(json.dumps({"model_type": "t5", "d_model": 64, "num_layers": 2,
                                                    "num_heads": 2, "d_kv": 32, "d_ff": 128, "vocab_size": 8192}))


def unknown_architecture(folder: Path) -> None:
    _edit_config(folder, model_type="no-such-architecture")


def weights_of_another_architecture(folder: Path) -> None:
    # BERT loads as a causal LM; none of tiny's Qwen2 tensors fits it, which transformers only logs
    (folder / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 64, "num_hidden_layers": 2,
                                                    "num_attention_heads": 2, "intermediate_size": 128,
                                                    "vocab_size": 8192}))


def weights_of_other_shapes(folder: Path) -> None:
    _edit_config(folder, hidden_size=512, intermediate_size=1024)


def no_weights(folder: Path) -> None:
    (folder / "model.safetensors").unlink()


def no_tokenizer(folder: Path) -> None:
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        (folder / name).unlink()


def empty(folder: Path) -> None:
    for child in folder.iterdir():
        child.unlink()


BROKEN = [  # (what is wrong, how to break the copy, what the message must say)
    ("truncated weights", truncated_weights, "weights file is damaged"),
    ("garbage weights", garbage_weights, "weights file is damaged"),
    ("config not JSON", config_not_json, "config.json is not valid JSON"),
    ("not a causal LM", not_a_causal_lm, "'t5' model, not a causal language model"),
    ("unknown architecture", unknown_architecture, "model_type 'no-such-architecture' is not one"),
    ("weights of another architecture", weights_of_another_architecture, "weights do not match its config.json"),
    ("weights of other shapes", weights_of_other_shapes, "weights do not fit its config.json"),
    ("config but no weights", no_weights, "has no weights"),
    ("weights but no tokenizer", no_tokenizer, "no usable tokenizer"),
    ("empty folder", empty, "has no config.json"),
]


def broken_folder(root: Path, name: str, breaks) -> Path:
    folder = _copy(root / name.replace(" ", "-"))
    breaks(folder)
    return folder


def assert_clear(message: str, fragment: str, what: str) -> None:
    assert fragment in message, f"{what}: the message does not name the problem ({fragment!r}): {message!r}"
    assert "\n" not in message.strip(), f"{what}: the message is not one line: {message!r}"
    assert "Traceback" not in message and 'File "' not in message, f"{what}: a traceback leaked: {message!r}"
    assert len(message) <= MAX_MESSAGE, f"{what}: a {len(message)}-character message"


@pytest.mark.parametrize("what,breaks,fragment", BROKEN, ids=[b[0] for b in BROKEN])
def test_a_broken_folder_is_refused_in_one_clear_line(tmp_path, what, breaks, fragment):
    """load_model refuses each broken folder with a one-line LoadError naming the problem, and caches nothing."""
    folder = broken_folder(tmp_path, what, breaks)
    for attempt in ("first", "second"):  # a model cached by the failed load would be returned the second time
        with pytest.raises(LoadError) as info:
            load_model(str(folder))
        assert_clear(str(info.value), fragment, f"{what}, {attempt} load")


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    with running_app(log=tmp_path_factory.mktemp("faults") / "app.log") as served:
        yield served.url


@pytest.fixture(scope="module")
def reference(app) -> str:
    """tiny's greedy text for PROMPT, generated before any broken folder was asked for."""
    return _generate(Client(app, verbose=False), "tiny")


def _generate(client, model: str) -> str:
    return client.predict(model, PROMPT, 24, 0, 0, 1, 0, True, True, api_name="/generate")[-1]["text"]


@pytest.mark.parametrize("what,breaks,fragment", BROKEN, ids=[b[0] for b in BROKEN])
def test_the_app_refuses_a_broken_folder_and_keeps_its_model(app, reference, tmp_path, what, breaks, fragment):
    """/generate and /compare answer a broken folder with its one-line reason; tiny then gives the same text."""
    folder = str(broken_folder(tmp_path, what, breaks))
    client = Client(app, verbose=False)
    for endpoint, args in (("/generate", (folder, PROMPT, 8, 0, 0, 1, 0, True, True)),
                           ("/compare", (folder, PROMPT, 8))):
        with pytest.raises(AppError) as info:
            client.predict(*args, api_name=endpoint)
        assert_clear(str(info.value), fragment, f"{what} through {endpoint}")
    assert _generate(client, "tiny") == reference, f"after {what}, tiny no longer gives its reference text"


def test_the_worker_keeps_its_model_through_broken_folders(tmp_path):
    """In the device worker, broken folders fail as bad input and tiny is not loaded again after them."""
    from kvviz.ui.worker import DeviceWorker, Failed, Generate, Progress, events

    worker = DeviceWorker()
    try:
        req = GenerationRequest(PROMPT, max_new_tokens=8)
        first = worker.start("tiny", Generate(req)).wait(120)
        assert any(isinstance(m, Progress) for m in first), "the first job must load tiny"
        for what, breaks, fragment in BROKEN:
            messages = worker.start(str(broken_folder(tmp_path, what, breaks)), Generate(req)).wait(120)
            failed = [m for m in messages if isinstance(m, Failed)]
            assert failed and failed[0].bad_input and fragment in failed[0].message, f"{what}: {messages[-2:]}"
        again = worker.start("tiny", Generate(req)).wait(120)
        assert worker.alive()
        assert not [m for m in again if isinstance(m, Progress)], \
            f"tiny was loaded again after the broken folders: {[m for m in again if isinstance(m, Progress)]}"
        end, first_end = events(again)[-1], events(first)[-1]
        assert isinstance(end, Finished) and end.text == first_end.text, "tiny's text changed"
    finally:
        worker.close()


def test_a_load_that_fails_midway_keeps_nothing(tmp_path, monkeypatch):
    """A load failing after its weights are read caches nothing, frees them at once, and keeps the earlier model."""
    from transformers import AutoModelForCausalLM

    kept = load_model("tiny")
    folder = _copy(tmp_path / "copy")
    built: list[weakref.ref] = []
    original = AutoModelForCausalLM.from_pretrained

    def spy(*args, **kwargs):
        out = original(*args, **kwargs)
        built.append(weakref.ref(out[0] if isinstance(out, tuple) else out))
        return out

    def progress(fraction: float, message: str) -> None:
        if message.startswith("moving"):  # the weights are in memory; the move to the device fails
            raise MemoryError("simulated: out of memory while moving the model to the device")

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", spy)
    with pytest.raises(MemoryError) as info:  # held to the end, as a caller's handler or logger may hold it
        load_model(str(folder), progress=progress)
    assert len(built) == 1, "the spy saw no model built: the failure came before the point this test is about"
    assert built[0]() is None, "the half-built model is still in memory, held by the failed load's exception"
    assert load_model("tiny") is kept, "the model loaded before the failure was dropped or rebuilt"
    assert load_model(str(folder)).model is not None, "the same folder does not load once nothing fails"
    assert len(built) == 2, "the folder was not built again: the failed load had cached its half-built model"
    del info


def test_a_model_whose_weights_cannot_fit_is_refused_before_loading(monkeypatch):
    """The weights counted from config.json are checked against the device's free memory before any weight
    is read: tiny (about 5.3 M parameters, 21 MB in fp32) is refused with both numbers when less is free."""
    import kvviz.engine.loading as loading

    loading.unload_all()
    monkeypatch.setattr(loading, "free_bytes", lambda device: 10_000_000)
    with pytest.raises(loading.LoadError, match=r"its weights need 0\.02 GB in fp32 and cpu has 0\.01 GB free"):
        loading.load_model("tiny", device="cpu")
    monkeypatch.undo()
    steps: list[str] = []
    assert loading.load_model("tiny", device="cpu", progress=lambda f, m: steps.append(m)).spec == "tiny"
    assert steps, "tiny came back without being loaded: the refused model was kept"
