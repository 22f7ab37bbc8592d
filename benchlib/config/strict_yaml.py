"""The YAML reader of params and study files: yaml.SafeLoader that also refuses aliases, a key given twice, nesting
deeper than MAX_DEPTH and integers past 64 bits (each a one-line error with its line and column)."""

from __future__ import annotations

from typing import Any

import yaml

MAX_DEPTH = 32  # nesting levels of a params file (extra_body needs a handful)
MAX_INT_BITS = 63  # every integer fits in 64 bits with its sign


class StrictLoader(yaml.SafeLoader):
    """yaml.SafeLoader without aliases: a few hundred bytes of nested *refs expand to gigabytes ("billion
    laughs"); a params file has no use for them, so the first one is refused, in well under a second. Nor does it
    take a key twice (the last would silently win), nesting deeper than MAX_DEPTH (the composer recurses: a
    RecursionError) or an integer literal too long for 64 bits (Python refuses to convert 4,300 digits)."""

    depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(None, None, "aliases (*name) are not allowed in a params file",
                                              event.start_mark)
        if self.depth >= MAX_DEPTH:
            raise yaml.composer.ComposerError(None, None, f"nested deeper than {MAX_DEPTH} levels",
                                              self.peek_event().start_mark)
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node)
            except TypeError:  # an unhashable key: SafeLoader's own error follows
                continue
            if first is not key_node:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r} (first at line "
                                                                    f"{first.start_mark.line + 1}; the last would "
                                                                    f"silently win)", key_node.start_mark)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: Any) -> int:
        if len(str(node.value)) > 24:  # 2**63 has 19 digits; longer is no 64-bit integer
            raise yaml.constructor.ConstructorError(None, None, f"an integer of {len(str(node.value))} characters "
                                                                f"(at most {MAX_INT_BITS} bits and a sign)",
                                                    node.start_mark)
        return super().construct_yaml_int(node)


StrictLoader.add_constructor("tag:yaml.org,2002:int", StrictLoader.construct_yaml_int)
