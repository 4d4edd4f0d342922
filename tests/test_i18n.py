"""kvviz.i18n: the two languages' catalogues agree, Chinese texts are Chinese, tags and locales normalize."""

from __future__ import annotations

import re
import string

import pytest
from markdown_it import MarkdownIt

from kvviz.i18n import CATALOG, asked_lang, locale_lang, normalize, register, t, translations
from kvviz.i18n.errors import EN as ERRORS

CJK = re.compile(r"[\u4e00-\u9fff]")
# Texts the same in both languages on purpose: the language switch's own label is bilingual.
SAME_IN_BOTH = {"app.language"}
# Fields an English text needs and Chinese does not: plural endings.
PLURAL_FIELDS = {"s", "es", "ies", "plural"}


def fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


def test_both_languages_have_every_key():
    """Every key has a text in en and in zh (register refuses otherwise; this pins the result)."""
    assert set(CATALOG["en"]) == set(CATALOG["zh"]) and len(CATALOG["en"]) > 10


@pytest.mark.parametrize("key", sorted(CATALOG["en"]))
def test_zh_text_is_chinese_with_the_same_fields(key):
    """A Chinese text has Chinese characters where its English one has a phrase (two or more words; a lone term
    such as "batch" or "KV cache" may stay as it is), and fills the same fields but plural endings: a text
    copied over untranslated, or a field renamed in one language, shows here."""
    en, zh = CATALOG["en"][key], CATALOG["zh"][key]
    assert fields(zh) <= fields(en) and fields(en) - fields(zh) <= PLURAL_FIELDS, \
        f"{key}: fields {fields(en)} in en, {fields(zh)} in zh"
    words = re.findall(r"\b[a-z]{3,}\b", re.sub(r"\{[^}]*\}|<[^>]+>", "", en))
    if len(words) >= 2 and key not in SAME_IN_BOTH:
        assert CJK.search(zh), f"{key} is not translated: {zh!r}"
        assert zh != en, f"{key}: the zh text is the English one"


def test_register_refuses_a_missing_translation_and_a_clash():
    """Keys that differ between en and zh, or a key registered twice, are refused, and nothing is added."""
    before = len(CATALOG["en"])
    with pytest.raises(ValueError, match="differ"):
        register({"test.a": "a", "test.b": "b"}, {"test.a": "甲"})
    with pytest.raises(ValueError, match="twice"):
        register({"app.title": "again"}, {"app.title": "又一次"})
    assert len(CATALOG["en"]) == before and "test.a" not in CATALOG["en"]


@pytest.mark.parametrize("tag,lang", [
    ("zh", "zh"), ("zh-CN", "zh"), ("ZH-cn", "zh"), ("zh_CN.UTF-8", "zh"), ("zh-Hans", "zh"), ("中文", "zh"),
    ("en", "en"), ("en-US", "en"), ("fr", "en"), ("", "en"), (None, "en"), (3, "en"), ("x" * 10_000, "en"),
])
def test_normalize(tag, lang):
    assert normalize(tag) == lang


@pytest.mark.parametrize("environ,lang", [
    ({"LANG": "zh_CN.UTF-8"}, "zh"), ({"LANG": "en_US.UTF-8"}, "en"), ({}, "en"),
    ({"LC_ALL": "en_US.UTF-8", "LANG": "zh_CN.UTF-8"}, "en"),  # LC_ALL wins over LANG
    ({"LC_ALL": "", "LC_MESSAGES": "zh_TW.UTF-8", "LANG": "C"}, "zh"),  # an empty variable does not count
])
def test_locale_lang(environ, lang):
    assert locale_lang(environ) == lang


def test_t_formats_and_falls_back():
    """t fills fields; an unknown language is English; an unknown key is a KeyError (a bug in code)."""
    assert t("tab.lesson", "zh") == "课程" and t("tab.lesson", "de") == "Lesson"
    with pytest.raises(KeyError):
        t("no.such.key", "en")
    assert translations()["zh"]["tab.lesson"] == "课程"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_emphasis_renders(lang):
    """Every text's **bold** and *italic* close under CommonMark, which the page's Markdown follows: in Chinese a
    closing ** right after punctuation （…） and before a character stays literal unless a space follows."""
    md = MarkdownIt("commonmark")
    left = [key for key, text in CATALOG[lang].items() if "*" in text and key not in ERRORS and
            "*" in re.sub(r"<code>.*?</code>", "", md.render(re.sub(r"\{[^}]*\}", "X", text)), flags=re.DOTALL)]
    assert not left, f"literal asterisks on the page: {left}"


# English the memory model says (a formula's label or words, a note): two words, the second in lower case.
PHRASE = re.compile(r"\b[A-Za-z]{2,}\s+[a-z]{3,}\b")
LATIN_TERMS = {"calc.label.kv"}  # "KV Cache" in Chinese (tests/test_error_keys.py)
SYMBOL_UNITS = {"B", "s", "FLOP", "FLOP/s", "B/s", "FLOP/B"}  # a formula's unit the same in both languages


def _memory_model_texts() -> list[tuple[str, str]]:
    """(where, text) for every label, formula, note, scheme and accelerator text the memory model makes over a
    spread of models and queries: MLA, sliding and chunked windows, Mamba and DeltaNet state, quantised formats,
    tp/pp/dp, a GPU with no room, a length past the context, dimensions only, a config's defaults, the measured CPU."""
    from kvviz.calc.arch import architecture_from_dims
    from kvviz.calc.dtypes import KV_DTYPES, WEIGHT_DTYPES
    from kvviz.calc.hardware import ACCELERATORS, bandwidth_source, measure_device
    from kvviz.calc.presets import load_preset
    from kvviz.calc.report import MemoryQuery, memory_report

    cpu = measure_device("cpu", matvec_mib=4, matmul_n=64, repeats=1)
    cases = [("deepseek-v3", MemoryQuery(tp=8, pp=2, seq_len=200_000)),
             ("deepseek-v2-lite", MemoryQuery(kv_dtype="fp8")),
             ("gemma-2-9b", MemoryQuery(kv_dtype="int4", weight_dtype="int4", tp=2)),
             ("llama-4-scout", MemoryQuery(kv_dtype="int8", weight_dtype="fp8")),
             ("qwen3-next-80b-a3b", MemoryQuery(tp=4, dp=2)), ("jamba-1.5-mini", MemoryQuery(accelerator="t4")),
             ("gemma-3-27b", MemoryQuery(accelerator="l4")), ("falcon-7b", MemoryQuery(pp=2)),
             ("llama-3-70b", MemoryQuery(accelerator="l4", tp=2)), ("qwen2.5-0.5b", MemoryQuery(accelerator="cpu"))]
    reports = [memory_report(load_preset(p), q, cpu if q.accelerator == "cpu" else None) for p, q in cases]
    reports.append(memory_report(architecture_from_dims(4, 2, 64, sliding_layers=2, sliding_window=8), MemoryQuery()))
    found = []
    for r in reports:
        name = r.arch.name
        kv = r.kv
        formulas = [kv.formula, kv.per_token_formula, kv.no_window_formula, kv.mla_expanded_formula,
                    kv.state_formula, r.paged.formula, r.capacity.formula, *r.parallel.formulas,
                    *(r.prefill.formulas if r.prefill else ()), *(r.decode.formulas if r.decode else ())]
        for f in filter(None, formulas):
            found += [(f"{name}: label", f.label)]
            found += [(f"{name}: {f.label}", part) for part in (f.symbolic, f.substituted) if PHRASE.search(part)]
            found += [(f"{name}: {f.label}: unit", f.unit)] if f.unit not in SYMBOL_UNITS else []
        if r.params:  # its formula, in the JSON only, sums the components by their names ("routed experts")
            found.append((f"{name}: label", r.params.formula.label))
        found += [(f"{name}: note", note) for note in r.notes]
    found += [(f"scheme {d.name}", d.scheme) for d in [*KV_DTYPES.values(), *WEIGHT_DTYPES.values()]
              if len(d.scheme.split()) > 2 or "," in d.scheme]  # more than a bare name ("IEEE float32")
    accels = [*ACCELERATORS.values(), cpu]
    found += [(f"{a.key}: note", a.note) for a in accels if a.note] + [("cpu: name", cpu.name)]
    found += [(f"{a.key}: bandwidth source", bandwidth_source(a)) for a in accels]
    return found


def test_every_memory_model_text_is_keyed_and_reads_in_chinese():
    """What the memory model says in words (a formula's label, the words inside a formula, a unit that is a word, a
    report's or a config's note, a format's scheme, an accelerator's name and note, where a bandwidth figure came
    from) is a keyed text (kvviz.i18n.Said) whose Chinese is Chinese: a label written as plain English, or a key
    whose Chinese is lost, would show English on the Chinese page, and fails here. The walk itself finds every kind
    it must."""
    from kvviz.i18n import Said

    texts = _memory_model_texts()
    assert len(texts) > 150, len(texts)
    english = [(where, text) for where, text in texts if not isinstance(text, Said)]
    assert not english, f"said as plain English, not as a key: {english[:5]}"
    lost = [(where, text.key) for where, text in texts
            if not CJK.search(text.render("zh")) and text.key not in LATIN_TERMS]
    assert not lost, f"no Chinese: {lost[:5]}"
    assert {text.key for _, text in texts} >= {"calc.label.kv_mla", "calc.label.kv_window", "calc.label.state",
                                                "calc.note.no_room_gpu", "calc.note.defaults", "calc.accel.this_cpu",
                                                "calc.formula.paged", "calc.scheme.kv_groupwise",
                                                "calc.unit.gpus"}


@pytest.mark.parametrize("argv,environ,lang", [
    (["memory", "--lang", "zh"], {}, "zh"), (["memory", "--lang=zh"], {"LANG": "en_US.UTF-8"}, "zh"),
    (["memory", "--lang", "en"], {"LANG": "zh_CN.UTF-8"}, "en"),  # the command line wins over the locale
    (["memory"], {"LANG": "zh_CN.UTF-8"}, "zh"), (["memory", "--lang"], {}, "en"),  # --lang with no value
    (["memory", "--lang", "fr"], {"LANG": "zh_CN.UTF-8"}, "zh"),  # not a language kvviz speaks: the locale's
    ([], {"LANG": "zh_CN.UTF-8"}, "zh"),  # no arguments at all
])
def test_asked_lang(argv, environ, lang):
    """Both CLIs read the language from the command line before parsing it, else from the locale."""
    assert asked_lang(argv, environ) == lang


# Texts that never reach the page's Markdown or HTML: the CLIs' go to a terminal (their `{name:<22}` aligns).
TERMINAL_ONLY = ("cli.", "serving_cli.")
# kvviz's error texts (kvviz/i18n/errors.py) are written as the CLI, the API and the logs read them, as plain text:
# they quote what was sent and name files by glob (*.bin) and placeholders (random:<preset>), as they always have.
PLOTLY_TAG = "<extra></extra>"  # plotly's own hover-template tag, which plotly reads and removes


def html_tags(text: str) -> list[str]:
    """The raw HTML a CommonMark parser finds in a text (its fields filled with a plain word): what the page's
    Markdown would hand the browser as a tag, and its sanitizer then drops with the words inside it."""
    body = re.sub(r"\{[^{}]*\}", "X", text.replace(PLOTLY_TAG, ""))
    found = []
    for block in MarkdownIt("commonmark").parse(body):
        found += [block.content] if block.type == "html_block" else []
        found += [child.content for child in block.children or () if child.type == "html_inline"]
    return found


def test_html_tags_finds_what_a_browser_would_swallow():
    """The check itself: the lesson's old `random:<preset>` is a tag to CommonMark; a comparison `a < b` is not."""
    assert html_tags("Choose a model (tiny, random:<preset>) to see its numbers.") == ["<preset>"]
    assert html_tags("TPOT < 50 ms and x <= 3") == []


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_no_page_text_opens_an_html_tag(lang):
    """No text the page shows holds an angle-bracket word: the page's Markdown would take `<preset>` for a tag
    and cut the sentence there (the lesson's question 3 once ended "…without downloading (tiny, random:")."""
    tagged = {key: html_tags(text) for key, text in CATALOG[lang].items()
              if not key.startswith(TERMINAL_ONLY) and key not in ERRORS and html_tags(text)}
    assert not tagged, f"texts with HTML tags in them: {tagged}"


def test_chinese_questions_use_full_width_punctuation():
    """The lesson's Chinese questions punctuate as Chinese does: ？ and ， (full width), not ? and , (ASCII)."""
    from kvviz.lesson import QUESTIONS

    half = {q.number: q.zh for q in QUESTIONS if re.search(r"[?,]", q.zh)}
    assert not half, f"half-width ? or , in the Chinese questions: {half}"


def test_english_questions_use_ascii_punctuation():
    """The lesson's English questions punctuate as English does: ? and , (ASCII), not the full-width ？ and ，
    (the fix for the Chinese questions once reached the English ones: "input shape， attention")."""
    from kvviz.lesson import QUESTIONS

    full = {q.number: q.en for q in QUESTIONS if re.search(r"[？，]", q.en)}
    assert not full, f"full-width ？ or ， in the English questions: {full}"
