"""Which memory a path named in a tool call is: the path-access index of one configuration.

Built once per `MemoryAssembler` from its layers and rule folders, every path normalized as
the backend's tools would (`layers.normalize_backend_path`), so the tool hook answers "is this
a memory file, and may the agent write it?" with one dict lookup, plus a scan of the folder
layers and rule folders for a path inside one of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from layered_memory.core.layers import Layer, normalize_backend_path

PathAccess = Literal["writable", "read-only", "rule"]
"""How the agent may use a memory path: a writable or read-only layer file, or a rule file."""


class PathAccessIndex:
    """The memory paths of one configuration, normalized for the backend.

    Args:
        backend: The deepagents backend (or factory) the tools' paths are resolved against.
        layers: The memory layers.
        rule_folders: The rule folders.
    """

    def __init__(self, backend: Any, layers: Sequence[Layer], rule_folders: Sequence[str]) -> None:
        self.backend = backend
        index: dict[str, tuple[PathAccess | None, Layer | None]] = {}
        layer_folders: list[tuple[str, Layer]] = []
        for layer in layers:
            for path in layer.files:
                normalized, _ = normalize_backend_path(path, backend)
                if normalized is not None:
                    index[normalized] = ("writable" if layer.writable else "read-only", layer)
            for path in layer.folders:
                normalized, _ = normalize_backend_path(path, backend)
                if normalized is not None:
                    layer_folders.append((normalized.rstrip("/") or "/", layer))
        self._files = index
        self._layer_folder_keys = tuple(layer_folders)
        folder_keys = []
        for folder in rule_folders:
            normalized, _ = normalize_backend_path(folder, backend)
            if normalized is not None:
                folder_keys.append(normalized.rstrip("/") or "/")
        self._rule_folder_keys = tuple(folder_keys)

    def access_of(self, tool_path: str) -> tuple[PathAccess | None, Layer | None]:
        """Whether a path named in a tool call is a memory file, and how the agent may use it.

        Args:
            tool_path: The path as the tool call names it.

        Returns:
            The access and the layer (a rule file has no layer); `(None, None)` for any
            other path.
        """
        normalized, _ = normalize_backend_path(tool_path, self.backend)
        if normalized is None:
            return None, None
        hit = self._files.get(normalized)
        if hit is not None:
            return hit
        # Anything inside a folder layer is its memory (a file the agent creates there too).
        for folder, layer in self._layer_folder_keys:
            if normalized == folder or normalized.startswith(folder + "/"):
                return ("writable" if layer.writable else "read-only"), layer
        for folder in self._rule_folder_keys:
            if normalized == folder or normalized.startswith(folder + "/"):
                return "rule", None
        return None, None

    def same_file(self, configured: str, tool_path: str) -> bool:
        """Whether a path named in a tool call is the configured layer path (any alias).

        Args:
            configured: A configured layer path.
            tool_path: The path as the tool call names it.

        Returns:
            True when both normalize to the same backend path.
        """
        first, _ = normalize_backend_path(configured, self.backend)
        second, _ = normalize_backend_path(tool_path, self.backend)
        return first is not None and first == second
