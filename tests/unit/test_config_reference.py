"""docs/operations.md's configuration reference stays complete and current (mq/config_reference.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from mq import config_reference as ref

DOC = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
REGENERATE = "regenerate it: python -m mq.config_reference --write docs/operations.md"


def _keys() -> list[tuple[type, dataclasses.Field, str]]:
    out = []
    for cls, _heading, _where, aliases in ref.SECTIONS:
        nested = ref.nested_types(cls)
        out += [(cls, f, ref.yaml_key(f.name, aliases)) for f in dataclasses.fields(cls) if f.name not in nested]
    return out


def test_every_config_field_has_a_comment():
    assert ref.missing_comments() == [], "add a #: comment above each of these fields in mq/config*.py"


def test_every_key_has_an_entry_in_the_reference():
    section = ref.current_section(DOC.read_text(encoding="utf-8"))
    assert section, f"{DOC} has no config reference markers"
    missing = [f"{cls.__name__}.{f.name} ({key})" for cls, f, key in _keys() if f"| `{key}` |" not in section]
    assert missing == [], f"keys without an entry in {DOC.name}: {', '.join(missing)}; {REGENERATE}"


def test_the_reference_is_up_to_date():
    section = ref.current_section(DOC.read_text(encoding="utf-8"))
    assert section == ref.render(), f"{DOC.name}'s config reference is out of date; {REGENERATE}"


@pytest.mark.parametrize("cls,field,key", _keys(), ids=lambda v: v if isinstance(v, str) else "")
def test_each_documented_key_sets_its_field(cls, field, key):
    default = ref._default(field)
    if isinstance(default, bool):
        value: object = not default
    elif isinstance(default, int):
        value = default + 1
    elif isinstance(default, float):
        value = default + 0.5
    else:
        value = f"{default}x"
    assert getattr(ref.load_keys(cls, {key: value}), field.name) == value


def test_replace_section_needs_the_markers():
    with pytest.raises(ValueError, match="markers"):
        ref.replace_section("no markers here", ref.render())
    doc = f"before\n{ref.BEGIN}\nold\n{ref.END}\nafter\n"
    assert ref.replace_section(doc, ref.render()) == f"before\n{ref.render()}\nafter\n"


def test_home_directories_are_shown_as_tilde():
    assert ref._show(str(Path.home() / "store")) == "~/store"
    assert ref._show("") == '""'
