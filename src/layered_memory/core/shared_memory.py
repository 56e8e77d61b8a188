"""Memory shared by many workers and users in one LangGraph store (e.g. `PostgresStore`).

`shared_memory_backend(store)` returns a `CompositeBackend` whose routes keep the memory files
in the store, one namespace per scope, and everything else (the agent's scratch files) in the
run's state:

| path | namespace (default) | layer (`shared_memory_layers()`) |
|---|---|---|
| `/org/...` | `("memory", "org")`, shared by everyone | `organization`, read-only |
| `/user/...` | `("memory", "users", <user id>)`, one per user | `user`, writable |
| `/project/...` | `("memory", "project")`, shared by the project's workers | `project`, read-only |
| anything else | the run's state (`StateBackend`) | — |

The user id is read from the run's context (`agent.invoke(..., context={"user_id": "ada"})`)
at every file operation; a run without one raises `UserIdError` instead of falling back
to a shared namespace, so one user's layer is never visible to another user's run.

Why the project layer is read-only to agents: its `MEMORY.md` is written by every worker at
once, and only the write-back (`MemoryWriter`, which on a `PostgresStore` serializes writers
with an advisory lock) is safe against that; an agent's own `edit_file` is not. The user layer
is the agent's notebook: one user's runs are the only writers.

Example:
    with PostgresStore.from_conn_string(url) as store:
        store.setup()
        backend = shared_memory_backend(store)
        writer = MemoryWriter(backend, PROJECT_MEMORY)    # locked write-back, shared
        register_write_back(registry, writer)
        memory = MemoryMiddleware(backend=backend, layers=shared_memory_layers(),
                                  rules=[ORG_RULES], hooks=registry)
        agent = create_deep_agent(model, backend=memory.protected_backend, memory=[],
                                  middleware=[memory])
        agent.invoke(inputs, build_thread_config("acme", "report"), context={"user_id": "ada"})
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from deepagents.backends import CompositeBackend, StateBackend, StoreBackend

from layered_memory.core.layers import Layer
from layered_memory.errors import UserIdError

if TYPE_CHECKING:
    from deepagents.backends.protocol import BackendProtocol
    from langgraph.runtime import Runtime
    from langgraph.store.base import BaseStore

__all__ = [
    "ORG_AGENTS",
    "ORG_RULES",
    "PROJECT_AGENTS",
    "PROJECT_MEMORY",
    "USER_MEMORY",
    "SharedMemoryBackend",
    "UserIdError",
    "shared_memory_backend",
    "shared_memory_layers",
    "user_namespace",
]

ORG_AGENTS: Final = "/org/AGENTS.md"
ORG_RULES: Final = "/org/rules"
USER_MEMORY: Final = "/user/MEMORY.md"
PROJECT_AGENTS: Final = "/project/AGENTS.md"
PROJECT_MEMORY: Final = "/project/MEMORY.md"

Namespace = tuple[str, ...]
NamespaceFactory = Callable[["Runtime[Any]"], Namespace]


def user_namespace(
    *, key: str = "user_id", prefix: Namespace = ("memory", "users")
) -> NamespaceFactory:
    """A `StoreBackend` namespace factory: `prefix + (<runtime.context[key]>,)`.

    Args:
        key: The context key (or attribute of a context object) holding the user id.
        prefix: Namespace components before the user id.

    Returns:
        The factory. It raises `UserIdError` when the run has no context, no id under `key`, an
        empty or non-string id, or an id containing `.`: `PostgresStore` joins a namespace with
        dots and lists a namespace by prefix, so user `ada` would also list the files of user
        `ada.x`. `StoreBackend` itself refuses ids with other unsafe characters.
    """

    def namespace(runtime: Runtime[Any]) -> Namespace:
        context = getattr(runtime, "context", None)
        user_id = context.get(key) if isinstance(context, Mapping) else getattr(context, key, None)
        if user_id is None:
            raise UserIdError(key, "missing")
        if not isinstance(user_id, str) or not user_id.strip():
            raise UserIdError(key, f"not a non-empty string ({type(user_id).__name__})")
        if "." in user_id:
            raise UserIdError(key, "a '.' would let one user's namespace prefix another's")
        return (*prefix, user_id)

    return namespace


def _fixed(namespace: Namespace | NamespaceFactory) -> NamespaceFactory:
    if callable(namespace):
        return namespace
    fixed = tuple(namespace)
    return lambda _runtime: fixed


class SharedMemoryBackend(CompositeBackend):
    """The `CompositeBackend` of `shared_memory_backend`, naming its read-only folders.

    `MemoryMiddleware` reads `read_only_folders`: its `protected_backend` refuses every change
    inside them (writes, new files, `delete /org`), for every user and subagent. The
    write-back writes through the plain backend (locked, on `PostgresStore`), not the agent's.
    """

    def __init__(
        self,
        *,
        default: BackendProtocol,
        routes: dict[str, BackendProtocol],
        read_only_folders: Mapping[str, str],
    ) -> None:
        super().__init__(default=default, routes=routes)
        self.read_only_folders = dict(read_only_folders)


def shared_memory_backend(
    store: BaseStore,
    *,
    org_namespace: Namespace | NamespaceFactory = ("memory", "org"),
    project_namespace: Namespace | NamespaceFactory = ("memory", "project"),
    user_namespace_factory: NamespaceFactory | None = None,
    default: BackendProtocol | None = None,
    project_writable: bool = False,
) -> SharedMemoryBackend:
    """A backend keeping `/org/`, `/user/` and `/project/` files in `store`.

    Args:
        store: The shared store, typically langgraph's `PostgresStore` (then `MemoryWriter`
            serializes writers across processes with an advisory lock).
        org_namespace: Namespace (or factory) of `/org/` files, shared by every user.
        project_namespace: Namespace (or factory) of `/project/` files.
        user_namespace_factory: Namespace factory of `/user/` files; default:
            `user_namespace()` (`("memory", "users", context["user_id"])`).
        default: Backend of every other path (default: a `StateBackend`, the run's own files).
        project_writable: Let agents change `/project/` (as `shared_memory_layers`).

    Returns:
        The backend; pass it to the middleware and to `MemoryWriter`, and give the agent the
        middleware's `protected_backend`, in which `/org/` (and `/project/`, unless
        `project_writable`) are read-only as a whole.
    """
    users = user_namespace_factory or user_namespace()
    read_only = {"/org/": "the organization's shared memory (read-only as a whole)"}
    if not project_writable:
        read_only["/project/"] = "the project's shared memory (read-only as a whole)"
    return SharedMemoryBackend(
        default=default if default is not None else StateBackend(),
        routes={
            "/org/": StoreBackend(namespace=_fixed(org_namespace), store=store),
            "/user/": StoreBackend(namespace=users, store=store),
            "/project/": StoreBackend(namespace=_fixed(project_namespace), store=store),
        },
        read_only_folders=read_only,
    )


def shared_memory_layers(*, project_writable: bool = False) -> list[Layer]:
    """The recommended layers over `shared_memory_backend`, lowest precedence first.

    `organization` (`/org/AGENTS.md`, read-only), `user` (`/user/MEMORY.md`, writable),
    `project` (`/project/AGENTS.md` and `/project/MEMORY.md`, read-only unless
    `project_writable`; see the module docstring for why). Use `rules=[ORG_RULES]` for the
    organization's rule files (read-only unless `rules_writable=True`).

    Args:
        project_writable: Let the agent write the project layer's files too.

    Returns:
        The three layers, for `MemoryMiddleware(layers=...)`.
    """
    return [
        Layer("organization", ORG_AGENTS),
        Layer("user", USER_MEMORY, writable=True),
        Layer("project", (PROJECT_AGENTS, PROJECT_MEMORY), writable=project_writable),
    ]
