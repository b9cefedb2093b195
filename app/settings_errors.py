"""What an operator reads when a setting's value is refused: one line per refused value,
naming the environment variable it came from, the value and why, instead of a traceback."""

from __future__ import annotations

from pydantic import AliasChoices, ValidationError

from app.settings import Settings

# A refused value of a field whose name says it may hold a credential (a key, a database URL
# with its password) is not echoed: the line goes to a terminal or a log.
_SECRET_WORDS = ("key", "secret", "token", "password", "url", "header")


def _may_hold_a_secret(field_name: str) -> bool:
    return any(word in field_name.lower() for word in _SECRET_WORDS)


def _variable(field_name: str) -> str:
    """The variable an operator sets for a field: its first alias, else `STRATA_<FIELD>`."""
    field = Settings.model_fields.get(field_name)
    alias = field.validation_alias if field is not None else None
    if isinstance(alias, AliasChoices) and alias.choices:
        return str(alias.choices[0])
    if isinstance(alias, str):
        return alias
    return f"STRATA_{field_name.upper()}"


def describe(error: ValidationError) -> list[str]:
    """One line per refused value: `STRATA_PORT='abc': Input should be a valid integer…`.

    A location is a field name or one of its aliases (pydantic reports an aliased field by the
    alias it was read from); nested locations are joined with dots after the variable."""
    by_alias = {
        str(choice): name
        for name, field in Settings.model_fields.items()
        if isinstance(field.validation_alias, AliasChoices)
        for choice in field.validation_alias.choices
    }
    lines = []
    for item in error.errors(include_url=False):
        location = [str(part) for part in item["loc"]]
        head = location[0] if location else ""
        field_name = by_alias.get(head, head)
        variable = head if head in by_alias else _variable(head) if head else "settings"
        rest = ".".join(location[1:])
        where = f"{variable}[{rest}]" if rest else variable
        visible = location and "input" in item and not _may_hold_a_secret(field_name)
        shown = f"={item['input']!r}" if visible else ""
        lines.append(f"{where}{shown}: {item['msg']}")
    return lines
