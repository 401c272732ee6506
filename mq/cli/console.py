"""All CLI output goes through here: tables, JSON, one-line errors, progress.

Commands build plain data and hand it to a ``Console``; with ``--json`` the same data is printed as JSON,
otherwise as rich tables. Errors are one line on stderr.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, is_dataclass
from typing import Any, Iterable, Sequence

import orjson


def _default(obj: Any) -> Any:
    if is_dataclass(obj):
        return asdict(obj)
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return bytes(obj).decode("utf-8", "replace")
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    raise TypeError(f"not JSON serializable: {type(obj).__name__}")


def to_json(data: Any) -> str:
    return orjson.dumps(data, default=_default,
                        option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS | orjson.OPT_SORT_KEYS).decode()


class Console:
    def __init__(self, *, json_mode: bool = False) -> None:
        from rich.console import Console as RichConsole

        self.json_mode = json_mode
        self.out = RichConsole(soft_wrap=False, highlight=False)
        self.err = RichConsole(stderr=True, highlight=False)

    def json(self, data: Any) -> None:
        sys.stdout.write(to_json(data) + "\n")
        sys.stdout.flush()

    def table(self, title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]], *,
              justify: dict[str, str] | None = None, caption: str | None = None) -> None:
        from rich.table import Table

        t = Table(title=title, caption=caption, header_style="bold", title_justify="left")
        for col in columns:
            t.add_column(col, justify=(justify or {}).get(col, "left"), overflow="fold")
        for row in rows:
            t.add_row(*("" if v is None else str(v) for v in row))
        self.out.print(t)

    def line(self, text: str = "", *, style: str | None = None) -> None:
        self.out.print(text, style=style, markup=False)

    def note(self, text: str) -> None:
        self.err.print(text, style="dim", markup=False)

    def error(self, text: str) -> None:
        self.err.print(f"error: {text}", style="bold red", markup=False)

    def warn(self, text: str) -> None:
        self.err.print(f"warning: {text}", style="yellow", markup=False)
