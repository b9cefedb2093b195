"""What an operator reads when a setting's value is refused: one line per refused value,
naming the environment variable it came from, the value and why, instead of a traceback."""

from __future__ import annotations

from pydantic import ValidationError

from app.settings import setting_variable_fields

# A refused value of a field whose name says it may hold a credential (a key, a database URL
# with its password) is not echoed: the line goes to a terminal or a log.
_SECRET_WORDS = ("key", "secret", "token", "password", "url", "header")


def _may_hold_a_secret(field_name: str) -> bool:
    return any(word in field_name.lower() for word in _SECRET_WORDS)


def describe(error: ValidationError) -> list[str]:
    """One line per refused value: `STRATA_PORT='abc': Input should be a valid integer…`.

    A location is a field name or one of its variables (pydantic reports an aliased field by
    the alias it was read from); it is named by the variable it was read from, else by the
    field's first variable; nested locations are joined with dots after the variable."""
    field_of = setting_variable_fields()
    first_variable: dict[str, str] = {}
    for variable, field_name in field_of.items():
        first_variable.setdefault(field_name, variable)
    lines = []
    for item in error.errors(include_url=False):
        location = [str(part) for part in item["loc"]]
        head = location[0] if location else ""
        field_name = field_of.get(head, head)
        if head in field_of:
            variable = head
        elif head:
            variable = first_variable.get(head, f"STRATA_{head.upper()}")
        else:
            variable = "settings"
        rest = ".".join(location[1:])
        where = f"{variable}[{rest}]" if rest else variable
        visible = location and "input" in item and not _may_hold_a_secret(field_name)
        shown = f"={item['input']!r}" if visible else ""
        lines.append(f"{where}{shown}: {item['msg']}")
    return lines
