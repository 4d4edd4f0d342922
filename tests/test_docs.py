"""README leads and docs/ holds the rest: every relative link and picture resolves, every page is linked.

README.md and README.zh.md stay a few screens long (what kvviz is, a picture, the set-up commands, a table of
contents); the long sections live in docs/ (English) and docs/zh/ (Chinese). These tests parse the Markdown with
markdown-it (CommonMark and tables, as GitHub reads them), so a link inside a code block is not mistaken for one.
They check that each relative link or image (Markdown or HTML) names a file in the repository, that an anchor names
a heading of its page (GitHub's slugs), that README links every English page and README.zh.md every Chinese one,
that both READMEs carry the test command .ci/run runs, and that the Hugging Face Space front matter stays on top.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

import pytest
from markdown_it import MarkdownIt

from tests.helpers import REPO

README, README_ZH = REPO / "README.md", REPO / "README.zh.md"
DOCS = REPO / "docs"
MAX_README_LINES = 150  # a few screens: what does not fit goes to a page in docs/
PAGES = sorted([README, README_ZH, *DOCS.rglob("*.md")])
HTML_TARGET = re.compile(r"""\b(?:src|href)\s*=\s*["']([^"']+)["']""")
RUN_COMMAND = "python -m pip install -r requirements.txt && python app.py"


def _rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def _tokens(path: Path) -> list:
    return MarkdownIt("commonmark").enable("table").parse(path.read_text(encoding="utf-8"))


def _inline_children(tokens: list) -> list:
    return [child for token in tokens if token.type == "inline" for child in (token.children or [])]


def targets(path: Path) -> list[str]:
    """Every link and image target on the page: Markdown links and images, and HTML src/href attributes."""
    tokens = _tokens(path)
    found = []
    for token in [*tokens, *_inline_children(tokens)]:
        if token.type == "link_open":
            found.append(token.attrs["href"])
        elif token.type == "image":
            found.append(token.attrs["src"])
        elif token.type in ("html_inline", "html_block"):
            found += HTML_TARGET.findall(token.content)
    return found


def slug(text: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (letters of any script, digits, _ and - kept),
    spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The anchors of the page's headings; a repeated heading gets -1, -2, ... as GitHub numbers them."""
    tokens = _tokens(path)
    seen: dict[str, int] = {}
    for i, token in enumerate(tokens):
        if token.type == "heading_open":
            base = slug("".join(c.content for c in tokens[i + 1].children or [] if c.type in ("text", "code_inline")))
            seen[base if base not in seen else f"{base}-{seen[base]}"] = 0
            seen[base] = seen.get(base, 0) + 1
    return set(seen)


def is_relative(target: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE) and not target.startswith("//")


def broken(page: Path, target: str) -> str | None:
    """Why a relative target of `page` does not resolve, or None when it does."""
    file, _, anchor = unquote(target).partition("#")
    dest = (page.parent / file).resolve() if file else page
    if not dest.is_relative_to(REPO):
        return "points outside the repository"
    if not dest.exists():
        return "no such file"
    if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
        return f"no heading #{anchor} in {_rel(dest)}"
    return None


def test_the_slugs_are_githubs():
    """Known headings and the anchors GitHub gives them, written by hand."""
    assert slug("Serving under load (vLLM)") == "serving-under-load-vllm"
    assert slug("SmolLM2-135M-Instruct, from PyPI") == "smollm2-135m-instruct-from-pypi"
    assert slug("Past one GPU: tensor, pipeline and data parallelism") == \
        "past-one-gpu-tensor-pipeline-and-data-parallelism"
    assert slug("课程路线：六个问题") == "课程路线六个问题"


def test_the_link_finder_sees_markdown_html_and_tables_but_not_code(tmp_path):
    """A link in a table, an image, an HTML <img>, and none from a code block or a code span."""
    page = tmp_path / "page.md"
    page.write_text("# A title\n\n[a](x.md#a-title) ![b](pic.png)\n\n| c |\n|---|\n| [d](y.md) |\n\n"
                    '<a href="z.png"><img src="w.png" width="10"></a>\n\n```\n[no](code.md)\n```\n\n`[no](span.md)`\n',
                    encoding="utf-8")
    assert sorted(targets(page)) == ["pic.png", "w.png", "x.md#a-title", "y.md", "z.png"]
    assert anchors(page) == {"a-title"}


@pytest.mark.parametrize("page", PAGES, ids=_rel)
def test_every_relative_link_and_image_resolves(page):
    """Each relative link and picture names a file in the repository (and a heading there, when it names one)."""
    relative = [t for t in targets(page) if is_relative(t)]
    wrong = [f"{t}: {why}" for t in relative if (why := broken(page, t))]
    hint = "a page moved to docs/ needs ../ before assets/ and results/"
    assert not wrong, f"{_rel(page)} has broken links ({hint}):\n" + "\n".join(wrong)


@pytest.mark.parametrize(("readme", "folder"), [(README, DOCS), (README_ZH, DOCS / "zh")], ids=["en", "zh"])
def test_readme_links_every_page_of_its_language(readme, folder):
    """Every page of docs/ is reachable from README.md, and every page of docs/zh/ from README.zh.md."""
    pages = sorted(folder.glob("*.md"))
    assert pages, f"{_rel(folder)} holds no page"
    linked = {(readme.parent / unquote(t).partition("#")[0]).resolve() for t in targets(readme) if is_relative(t)}
    missing = [_rel(p) for p in pages if p.resolve() not in linked]
    assert not missing, f"{_rel(readme)} does not link: {missing}"


@pytest.mark.parametrize("readme", [README, README_ZH], ids=_rel)
def test_readme_fits_on_a_few_screens(readme):
    lines = readme.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_README_LINES, f"{_rel(readme)} has {lines} lines: move the detail to a page in docs/"


def _code_lines(path: Path) -> list[str]:
    return [line.strip() for t in _tokens(path) if t.type in ("fence", "code_block") for line in t.content.splitlines()]


def ci_test_command() -> str:
    """The command .ci/run runs: the line after its comment `# The README's test command:`."""
    lines = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    return lines[lines.index("# The README's test command:") + 1].strip()


@pytest.mark.parametrize("readme", [README, README_ZH], ids=_rel)
def test_readme_carries_the_commands_ci_and_a_user_run(readme):
    """Both READMEs show the run command and, unchanged, the test command that .ci/run runs."""
    code = _code_lines(readme)
    assert ci_test_command() in code, f"{_rel(readme)} lacks .ci/run's test command"
    assert RUN_COMMAND in code, f"{_rel(readme)} lacks the run command"


@pytest.mark.parametrize("readme", [README, README_ZH], ids=_rel)
def test_the_fast_test_command_uses_declared_markers(readme, pytestconfig):
    """The developer's fast command deselects by markers that pyproject declares (a typo would deselect nothing)."""
    fast = [line for line in _code_lines(readme) if "python -m pytest -m " in line]
    assert fast, f"{_rel(readme)} shows no fast test command (python -m pytest -m ...)"
    declared = {m.split(":")[0] for m in pytestconfig.getini("markers")}
    for line in fast:
        expression = re.search(r'-m "([^"]+)"', line).group(1)
        used = set(re.findall(r"\w+", expression)) - {"not", "and", "or"}
        assert used <= declared, f"{line}: undeclared markers {used - declared}"


def test_the_space_front_matter_stays_on_top():
    """A Hugging Face Space reads its settings from a YAML block that must open README.md; its app file exists."""
    text = README.read_text(encoding="utf-8")
    assert text.startswith("---\n"), "README.md must open with the Space's front matter"
    block = text[4:text.index("\n---\n", 4)]
    fields = dict(line.split(": ", 1) for line in block.splitlines())
    assert fields.get("sdk") == "gradio"
    assert (REPO / fields["app_file"]).is_file()
