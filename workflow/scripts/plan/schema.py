"""The study config's schema (workflow/schemas/config.schema.yaml): the one place that states every
key's default, bounds and description. Here: reading it, the validator that fills its defaults in
while it checks, and one line per schema error naming the key, the bad value and what is allowed.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path

import yaml
from jsonschema import Draft202012Validator, validators

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "schemas" / "config.schema.yaml"


class ConfigError(ValueError):
    """A bad study config; the message names the file, the key and what is allowed."""


def load_schema(path: Path = SCHEMA_PATH) -> dict:
    """The schema, with each section that refers to a file of its own (`data: {$ref: data.schema.yaml}`)
    replaced by that file's schema: every reader sees one whole schema."""
    with open(path) as f:
        schema = yaml.safe_load(f)
    for key, node in schema.get("properties", {}).items():
        ref = node.get("$ref", "") if isinstance(node, dict) else ""
        if ref.endswith(".yaml"):
            schema["properties"][key] = load_schema(path.parent / ref)
    return schema


def _is_integer(checker, v) -> bool:  # 1.0 is not an integer here: the trainer takes only integers
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(checker, v) -> bool:  # NaN and +-inf are not numbers of any study
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _with_defaults(cls):
    """A validator that fills in schema defaults (deep-copied) while it validates, and whose integer
    and number types are strict: every section with a default (`{}` for a mapping) is there after
    validation, with each of its keys' defaults, so no reader of the config needs a fallback."""
    validate_properties = cls.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for key, sub in properties.items():
                if "default" in sub and key not in instance:
                    instance[key] = copy.deepcopy(sub["default"])
        yield from validate_properties(validator, properties, instance, schema)

    checker = cls.TYPE_CHECKER.redefine_many({"integer": _is_integer, "number": _is_number})
    return validators.extend(cls, {"properties": set_defaults}, type_checker=checker)


Validator = _with_defaults(Draft202012Validator)


def key_name(path) -> str:
    """A jsonschema error path as the config key it names: experiments.strong.topologies[0].nodes."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<top level>"


def message(err) -> str:
    """One line per error: the key, the bad value and what is allowed."""
    where = key_name(err.absolute_path)
    kind, schema, value = err.validator, err.schema, err.instance
    if kind == "enum":
        return f"{where}: {value!r} is not allowed; allowed values: {', '.join(map(repr, schema['enum']))}"
    if kind == "additionalProperties":
        allowed = sorted(schema.get("properties", {}))
        extra = sorted(set(value) - set(allowed))
        return f"{where}: unknown key(s) {', '.join(map(repr, extra))}; allowed keys: {', '.join(allowed)}"
    if kind == "not" and "const" in schema.get("not", {}):
        return f"{where}: {value!r} is not allowed ({schema.get('description', '')})".rstrip(" ()")
    if kind == "anyOf" and isinstance(value, str) and any("enum" in b for b in schema["anyOf"]):
        # names or a pattern (model.impl: a built-in, or your own factory)
        names = [repr(v) for b in schema["anyOf"] for v in b.get("enum", ())]
        forms = [b["description"] for b in schema["anyOf"] if "pattern" in b]
        return f"{where}: {value!r} is not allowed; allowed values: {', '.join(names)}, or {' or '.join(forms)}"
    if kind in ("oneOf", "anyOf") and err.context:
        # the branch written for this kind of value (a mapping, a number) says what is wrong with it
        branches = schema[kind]
        fits = [e for e in err.context if _fits_type(branches[e.schema_path[0]].get("type"), value)]
        if fits:
            return message(min(fits, key=lambda e: len(e.schema_path)))
        kinds = [f"a mapping with keys {', '.join(b.get('properties', {}))}" if b.get("type") == "object"
                 else f"{b.get('type')}" + (f" >= {b['minimum']}" if "minimum" in b else "") for b in branches]
        return f"{where}: {value!r} is not allowed; allowed: {' or '.join(kinds)}"
    if kind == "type" and isinstance(value, float) and not math.isfinite(value):
        return f"{where}: {value!r} is not a finite number"
    if kind == "type" and schema.get("type") == "integer" and isinstance(value, float):
        return f"{where}: {value!r} is not an integer (write {int(value)} if you mean it)" \
            if value.is_integer() else f"{where}: {value!r} is not an integer"
    return f"{where}: {err.message}"  # jsonschema's own text already shows the value and the bound


def _fits_type(kind, value) -> bool:
    """Whether a oneOf branch of type `kind` is the one meant for `value` (2.5 is meant for an integer
    branch: its message says "not an integer")."""
    kinds = kind if isinstance(kind, list) else [kind]
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return any({"integer": number, "number": number,
                "object": isinstance(value, dict), "array": isinstance(value, list),
                "string": isinstance(value, str), "boolean": isinstance(value, bool),
                "null": value is None}.get(k, False) for k in kinds)
