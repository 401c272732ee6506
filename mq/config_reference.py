"""The configuration reference of docs/operations.md, generated from the config dataclasses.

Every key of the name server's, the broker's and the web console's config files (``NamesrvConfig``,
``BrokerConfig``, ``StoreConfig``, ``DashboardConfig`` and the dataclasses nested in them) with its default and
the ``#:`` comment written above its field in mq/config.py, mq/config_remoting.py, mq/config_store.py or
mq/config_client.py.
tests/unit/test_config_reference.py fails when a field has no comment or the document is out of date; regenerate
it with::

    python -m mq.config_reference --write docs/operations.md   # rewrites the text between the markers
    python -m mq.config_reference                              # prints the generated text
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import sys
import typing
from pathlib import Path
from typing import Any

from mq import config as C

BEGIN = "<!-- BEGIN config reference (generated: python -m mq.config_reference --write docs/operations.md) -->"
END = "<!-- END config reference -->"

#: (dataclass, heading, what reads it, key -> field aliases the loader accepts for it)
SECTIONS: tuple[tuple[type, str, str, dict[str, str]], ...] = (
    (C.NamesrvConfig, "Name server", "the file given to `mq namesrv start --config FILE`", C._ALIASES),
    (C.BrokerConfig, "Broker", "the file given to `mq broker start --config FILE` (YAML or broker.conf's "
                               "`key=value` lines)", C._BROKER_ALIASES),
    (C.StoreConfig, "Store", "the broker's file, beside the broker keys", C._STORE_ALIASES),
    (C.DashboardConfig, "Web console", "the file given to `mq dashboard --config FILE`", {}),
)


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def yaml_key(field_name: str, aliases: dict[str, str]) -> str:
    """The key documented for a field: RocketMQ's spelling where the loader has an alias for it, else camelCase."""
    for key, target in aliases.items():
        if target == field_name and C._snake(key) != field_name:
            return key
    return camel(field_name)


def field_comments(cls: type) -> dict[str, str]:
    """Field name -> the text of the ``#:`` lines directly above it in the source of the class that declares it
    (the class itself or a dataclass it inherits from, such as ``RemotingServerConfig``)."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if dataclasses.is_dataclass(klass):
            out.update(_own_field_comments(klass))
    return out


def _own_field_comments(cls: type) -> dict[str, str]:
    source = inspect.getsource(sys.modules[cls.__module__])
    lines = source.splitlines()
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
            break
    else:  # pragma: no cover - every config class is a top-level class
        raise LookupError(f"class {cls.__name__} not found in {cls.__module__}")
    out: dict[str, str] = {}
    for stmt in node.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            text: list[str] = []
            i = stmt.lineno - 2
            while i >= 0 and lines[i].strip().startswith("#:"):
                text.insert(0, lines[i].strip()[2:].strip())
                i -= 1
            out[stmt.target.id] = " ".join(t for t in text if t)
    return out


def nested_types(cls: type) -> dict[str, type]:
    """Field name -> dataclass type, for the fields of ``cls`` that hold another config dataclass."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)
            if isinstance(hints.get(f.name), type) and dataclasses.is_dataclass(hints[f.name])}


def load_keys(cls: type, mapping: dict[str, Any]) -> Any:
    """Build ``cls`` from a config-file mapping the way the daemons do (``ConfigError`` for what they refuse)."""
    if cls in (C.NamesrvConfig, C.DashboardConfig):
        return C.from_mapping(cls, mapping)
    broker, store = C.broker_configs_from_mapping(mapping)
    return broker if cls is C.BrokerConfig else store


def loads_nested(cls: type, field_name: str, key: str, inner: type) -> bool:
    """Whether the loader turns ``key: {field: value, ...}`` into a ``inner`` instance on ``cls.field_name``."""
    probe = {camel(f.name): _default(f) for f in dataclasses.fields(inner)}
    try:
        value = getattr(load_keys(cls, {key: probe}), field_name)
    except Exception:  # refused: not a key of the file
        return False
    return isinstance(value, inner)


def missing_comments() -> list[str]:
    """``Class.field`` of every documented field without a ``#:`` comment."""
    out = []
    for cls in _documented_classes():
        comments = field_comments(cls)
        out += [f"{cls.__name__}.{f.name}" for f in dataclasses.fields(cls) if not comments.get(f.name)]
    return out


def render() -> str:
    """The generated section, markers included."""
    parts = [BEGIN, ""]
    nested: dict[type, list[str]] = {}
    for cls, heading, where, aliases in SECTIONS:
        inner = nested_types(cls)
        parts += [f"### {heading} (`{cls.__name__}`)", "", f"Read from {where}.", "",
                  "| key | default | meaning |", "|---|---|---|"]
        comments = field_comments(cls)
        for f in dataclasses.fields(cls):
            key = yaml_key(f.name, aliases)
            if f.name in inner:
                settable = loads_nested(cls, f.name, key, inner[f.name])
                nested.setdefault(inner[f.name], []).append(
                    f"`{cls.__name__}.{f.name}`" + (f" (key `{key}`)" if settable else ""))
                if not settable:
                    continue
                default = f"a mapping: see `{inner[f.name].__name__}` below"
            else:
                default = f"`{_show(_default(f))}`"
            parts.append(f"| `{key}` | {default} | {_cell(comments.get(f.name, ''))} |")
        parts.append("")
    for cls, owners in nested.items():
        how = ("set as a mapping of the fields below" if any("(key" in o for o in owners)
               else "not read from the config files: the values below are fixed")
        parts += [f"### `{cls.__name__}`", "", f"Held by {', '.join(owners)}; {how}.", "",
                  "| field | default | meaning |", "|---|---|---|"]
        comments = field_comments(cls)
        for f in dataclasses.fields(cls):
            parts.append(f"| `{camel(f.name)}` | `{_show(_default(f))}` | {_cell(comments.get(f.name, ''))} |")
        parts.append("")
    parts.append(END)
    return "\n".join(parts)


def rewrite(path: Path) -> bool:
    """Replace the text between the markers of ``path`` with ``render()``; True when it changed."""
    text = path.read_text(encoding="utf-8")
    new = replace_section(text, render())
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


def replace_section(text: str, section: str) -> str:
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError("the config reference markers are missing: add the BEGIN and END lines of "
                         "mq/config_reference.py where the reference goes")
    return text[:start] + section + text[end + len(END):]


def current_section(text: str) -> str:
    """The generated section as it stands in a document, markers included ("" without markers)."""
    start, end = text.find(BEGIN), text.find(END)
    return text[start:end + len(END)] if 0 <= start < end else ""


def _documented_classes() -> list[type]:
    out: list[type] = []
    for cls, *_ in SECTIONS:
        out.append(cls)
        out += [t for t in nested_types(cls).values() if t not in out]
    return list(dict.fromkeys(out))


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None  # pragma: no cover - every config field has a default


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        home = str(Path.home())
        if value == home or value.startswith(home + "/"):
            value = "~" + value[len(home):]
        return value if value else '""'
    return repr(value)


def _cell(text: str) -> str:
    """A comment as a Markdown table cell: RST literals become code spans, ``<`` outside them is escaped."""
    parts = text.replace("``", "`").replace("|", "\\|").split("`")
    return "`".join(p if i % 2 else p.replace("<", "&lt;") for i, p in enumerate(parts))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mq.config_reference", description=__doc__.split("\n")[0])
    parser.add_argument("--write", type=Path, metavar="DOC",
                        help="rewrite the generated section of DOC (between its markers) instead of printing it")
    args = parser.parse_args(argv)
    missing = missing_comments()
    if missing:
        print("fields without a #: comment in mq/config*.py: " + ", ".join(missing), file=sys.stderr)
    if args.write is None:
        print(render())
    else:
        print(f"{args.write}: {'rewritten' if rewrite(args.write) else 'already up to date'}", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
