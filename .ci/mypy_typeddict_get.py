"""A mypy plugin: ``record.get("key")`` on a TypedDict must name one of its keys.

mypy checks ``record["key"]`` and the keys a TypedDict is built with, but lets ``.get`` take
any string (it returns ``object`` for an unknown one). Readers of recordings use ``.get``
(old recordings lack newer fields), so a misspelt field would read as "absent" forever.
With this plugin a literal key that the TypedDict (``events/payloads.py``) does not have is
an error, like the subscript. Everything else is mypy's own inference.
"""

from __future__ import annotations

from collections.abc import Callable

from mypy import errorcodes
from mypy.plugin import MethodContext, Plugin
from mypy.plugins.default import typed_dict_get_callback
from mypy.typeops import try_getting_str_literals
from mypy.types import Type, TypedDictType, get_proper_type

GET_METHODS = ("typing.Mapping.get", "builtins.dict.get", "_typeshed.SupportsKeysAndGetItem.get")


def _checked_get(ctx: MethodContext) -> Type:
    record = get_proper_type(ctx.type)
    if isinstance(record, TypedDictType) and ctx.args and len(ctx.args[0]) == 1:
        keys = try_getting_str_literals(ctx.args[0][0], ctx.arg_types[0][0])
        for key in keys or ():
            if key not in record.items:
                name = record.fallback.type.name
                ctx.api.fail(f'TypedDict "{name}" has no key "{key}" (.get)', ctx.context,
                             code=errorcodes.TYPEDDICT_ITEM)
    return typed_dict_get_callback(ctx)


class TypedDictGetPlugin(Plugin):
    def get_method_hook(self, fullname: str) -> Callable[[MethodContext], Type] | None:
        return _checked_get if fullname in GET_METHODS else None


def plugin(version: str) -> type[Plugin]:
    return TypedDictGetPlugin
