"""Errors raised by the exporter. Both map to exit code 2 in the command-line tool."""


class ExportError(Exception):
    """A model or an input specification that cannot be exported (bad spec, untraceable code)."""


class UnsupportedError(ExportError):
    """One or more ops/modules with no memsim equivalent. ``items`` holds one entry per occurrence:
    (what, fx node name, module path, detail)."""

    def __init__(self, items):
        self.items = list(items)
        lines = ["unsupported by memsim (%d occurrence%s):" % (len(self.items), "" if len(self.items) == 1 else "s")]
        for what, node, module, detail in self.items:
            where = "node %s" % node
            where += ", module %s" % (module if module else "<root>")
            lines.append("  %s  (%s)%s" % (what, where, (": " + detail) if detail else ""))
        kinds = sorted({w for w, _, _, _ in self.items})
        lines.append("unsupported ops: " + ", ".join(kinds))
        super().__init__("\n".join(lines))

    @property
    def kinds(self):
        return sorted({w for w, _, _, _ in self.items})
