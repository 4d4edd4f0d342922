"""A session's history: every finished run (generation, batch rows, serving loads) as one table, its per-token frames
for the overlay, and the History tab's readable view of it.

No gradio; the History tab (kvviz.ui.generation.history_tab) shows it. Its text is in kvviz.i18n.generation.
"""

from __future__ import annotations

import hashlib
import math
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from kvviz.i18n import CATALOG, t
from kvviz.ui.generation.live import RunRecord


@dataclass(frozen=True, eq=False)
class RunHistory:
    """A session's finished runs: one history row and the per-token frame of each, oldest first.

    Held in the page's session state; each run makes a new one (with_run), so the state is never edited
    in place. eq=False: Gradio hashes state to see whether it changed, and frames do not hash.
    """

    rows: tuple[dict, ...] = ()
    frames: dict[int, pd.DataFrame] = field(default_factory=dict)

    def with_run(self, record: RunRecord) -> RunHistory:
        return RunHistory(rows=(*self.rows, record.history_row()), frames={**self.frames, record.run_id: record.frame})

    def with_row(self, row: dict) -> RunHistory:
        """A run without per-token rows (a serving load, measured from the client): a table row only."""
        return RunHistory(rows=(*self.rows, dict(row)), frames=self.frames)

    @property
    def run_ids(self) -> list[int]:
        return list(self.frames)

    def table(self, lang: str = "en") -> pd.DataFrame:
        """The history table: one row per run, its columns named in `lang` (the CSV takes the English keys)."""
        frame = pd.DataFrame(list(self.rows))
        return frame.rename(columns=lambda key: column_name(key, lang))

    def view(self, lang: str = "en") -> pd.DataFrame:
        """What the History tab shows of the table: the columns a person compares runs by (VIEW), those some run
        has, in readable units (times in ms, rates to a decimal, the bandwidth share in %), named in `lang`. The
        CSV keeps every column raw (table)."""
        frame = pd.DataFrame(list(self.rows))
        shown = [(key, unit) for key, unit in VIEW if key in frame and frame[key].notna().any()]
        return pd.DataFrame({view_name(key, unit, lang): [_readable(v, unit) for v in frame[key]]
                             for key, unit in shown})

    def overlay(self, picked: object) -> pd.DataFrame | None:
        """The per-token rows of the runs picked (as the picker sends them), together; None if none is known."""
        frames = [self.frames[i] for i in run_ids(picked) if i in self.frames]
        return pd.concat(frames) if frames else None


# The History tab's columns, in order, and each one's unit there: None as it is, "ms" from seconds, "rate" to one
# decimal, "share" a fraction as a percentage. Generation runs, batch rows and serving loads share the table.
VIEW = (("kind", None), ("run", None), ("label", None), ("model", None), ("mode", None), ("finish", None),
        ("prompt_tokens", None), ("new_tokens", None), ("batch_size", None), ("concurrency", None),
        ("load_s", "ms"), ("ttft_s", "ms"), ("tpot_s", "ms"), ("ttft_p50_s", "ms"), ("tpot_p50_s", "ms"),
        ("tokens_per_s", "rate"), ("batch_tokens_per_s", "rate"), ("output_tokens_per_s", "rate"),
        ("bandwidth_utilisation", "share"))


def view_name(key: str, unit: str | None, lang: str = "en") -> str:
    """A History column's header: a time in ms is named as such; the others as the CSV's columns."""
    return t(f"history.view.{key}", lang) if unit == "ms" else column_name(key, lang)


def _readable(value: object, unit: str | None) -> object:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if unit == "ms":
        return round(float(value) * 1e3, 2)
    if unit == "rate":
        return round(float(value), 1)
    if unit == "share":
        return f"{float(value):.0%}"
    return value


def column_name(key: str, lang: str = "en") -> str:
    """A history column's header in `lang`: the row's key in English, a key no catalogue names as it is."""
    return t(f"history.col.{key}", lang) if f"history.col.{key}" in CATALOG["en"] else key


def run_ids(picked: object) -> list[int]:
    """The run ids in the overlay picker's value as sent; anything that is not one is ignored."""
    items = picked if isinstance(picked, list) else []
    return [int(r) for r in items if isinstance(r, (str, int)) and not isinstance(r, bool) and str(r).isdecimal()
            and len(str(r)) < 12]


class CsvExports:
    """Where the History's CSV downloads are written: one folder for the app (a TemporaryDirectory, removed when
    the app's process ends), one file per session in it, rewritten at each export, and removed when the session
    ends (forget). So a hundred exports leave one file, and a closed page none."""

    def __init__(self) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="kvviz-exports-")

    @property
    def folder(self) -> Path:
        return Path(self._dir.name)

    def write(self, history: RunHistory, session: str) -> Path:
        """The session's history as CSV (every raw column, English keys), in the session's own file."""
        path = self._session_folder(session) / "kvviz-history.csv"
        path.parent.mkdir(exist_ok=True)
        history.table().to_csv(path, index=False)
        return path

    def forget(self, session: str) -> None:
        shutil.rmtree(self._session_folder(session), ignore_errors=True)

    def _session_folder(self, session: str) -> Path:
        """A folder name from the session's id: its hash when the id is not plain letters, digits, - or _."""
        plain = session and len(session) <= 64 and all(c.isalnum() or c in "-_" for c in session)
        return self.folder / (session if plain else hashlib.sha256(session.encode()).hexdigest()[:32])
