"""The `rapidmlx.toml` schema: frozen pydantic models, the only place config defaults live.

Owns field types, bounds and defaults. Reading files, environment overlays, cross-model checks and
error wording belong to `load.py` and `errors.py`.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import BaseModel, BeforeValidator, ConfigDict, Discriminator, Field, GetCoreSchemaHandler, Tag, model_validator
from pydantic_core import PydanticCustomError, core_schema

__all__ = [
    "LOCAL_TAG",
    "UPSTREAM_TAG",
    "AnyModelConfig",
    "KVCacheConfig",
    "KeyConfig",
    "ModelConfig",
    "ModelId",
    "PrefixCacheConfig",
    "RouterConfig",
    "Rule",
    "SamplingDefaults",
    "ServerConfig",
    "ShardConfig",
    "UpstreamModelConfig",
    "one_of",
]


@dataclass(frozen=True)
class Rule:
    """`Annotated` metadata: a check plus the words for what it allows.

    The same `expected` text is the validation message and what `errors.py` prints for any other error
    on the field, so "allowed values" are written down once.
    """

    expected: str
    check: Callable[[Any], bool]

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        # Run after the base type's own (lax) coercion, so "4" from an env var is checked as 4.
        return core_schema.no_info_after_validator_function(self._validate, handler(source))

    def _validate(self, value: Any) -> Any:
        if not self.check(value):
            raise PydanticCustomError("rule", "must be {expected}", {"expected": self.expected})
        return value


def _or_list(values: tuple[Any, ...]) -> str:
    shown = [f'"{v}"' if isinstance(v, str) else str(v) for v in values]
    return shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"


def one_of(*values: Any) -> Rule:
    """A `Rule` accepting exactly `values` (an enum that still coerces env strings first)."""
    return Rule(_or_list(values), lambda value: value in values)


def url_problem(url: str) -> str | None:
    """What is wrong with an upstream base URL, or None: http(s), a host, no query/fragment/userinfo."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError as exc:
        return str(exc)
    if parts.scheme not in ("http", "https"):
        return "the scheme must be http or https"
    if not parts.hostname:
        return "no host"
    if parts.username or parts.password:
        return "credentials in the URL (use api_key_env)"
    if parts.query or parts.fragment:
        return "a query or fragment"
    return None


def _is_name(value: str) -> bool:
    return bool(value) and not any(ch.isspace() for ch in value)


# What clients put in `"model": ...`: any non-empty string without whitespace.
ModelId = Annotated[str, Rule("a non-empty name without whitespace", _is_name)]
_NonEmpty = Annotated[str, Rule("a non-empty string", bool)]
_EnvName = Annotated[str, Rule("an environment variable name", lambda v: v == "" or re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", v) is not None)]
_CpuBlas = Annotated[str, Rule('"auto", "off" or the absolute path of an existing shared library',
                               lambda v: v in ("auto", "off") or (os.path.isabs(v) and os.path.isfile(v)))]
_UpstreamUrl = Annotated[str, Rule('an http:// or https:// base URL with a host and no query, fragment or credentials ("http://host:port/v1")',
                                    lambda v: url_problem(v) is None)]
_Sha256 = Annotated[str, Rule("64 hexadecimal characters (a SHA-256)", lambda v: v == "" or re.fullmatch(r"[0-9a-fA-F]{64}", v) is not None)]


class _Frozen(BaseModel):
    # Unknown keys are typos; failing loudly beats a silently ignored setting.
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class ServerConfig(_Frozen):
    """`[server]`: the HTTP process."""

    host: _NonEmpty = "127.0.0.1"
    """Interface to bind."""
    port: Annotated[int, Field(ge=0, le=65535)] = 8000
    """TCP port (0 picks a free one)."""
    log_level: Annotated[str, one_of("debug", "info", "warning", "error")] = "info"
    """Root log level."""
    offline: bool = False
    """Never contact the Hugging Face Hub; only local dirs or the HF cache."""
    max_body_mb: Annotated[int, Field(gt=0)] = 32
    """Request body cap in MiB; larger bodies get 413."""
    header_timeout_s: Annotated[float, Field(gt=0)] = 10.0
    """Seconds for a request line + headers to arrive (from connect, or a keep-alive request's first byte); else 408."""
    body_timeout_s: Annotated[float, Field(gt=0)] = 60.0
    """Seconds for a request's whole body to arrive after its headers; else 408 and the connection closes."""
    runtime_dir: str = ""
    """Sockets and worker state; "" = $XDG_RUNTIME_DIR/rapid-mlx, else <tempdir>/rapid-mlx-<uid>."""
    keepalive_s: Annotated[float, Field(gt=0)] = 5.0
    """Streams with no new output this long get a keepalive (SSE comment or Anthropic ping)."""
    reasoning_alias: bool = False
    """Chat completions also carry thinking as `reasoning` (vLLM's name) beside `reasoning_content`."""
    allow_request_chat_template: bool = False
    """Let requests replace the chat template (`chat_template_kwargs.chat_template`): arbitrary Jinja run in the router."""
    chat_template_timeout_s: Annotated[float, Field(gt=0)] = 10.0
    """Longest a chat template may take to render one request (then 400)."""
    watch_config: bool = True
    """Reload when the config file changes (SIGHUP, `POST /admin/reload` and `rapid-mlx reload` always work)."""
    drain_timeout_s: Annotated[float, Field(gt=0)] = 30.0
    """Longest a reload, unload or shutdown waits for requests in flight on a worker it stops."""
    memory_budget_gb: Annotated[float, Field(ge=0)] = 0.0
    """Memory for resident models (weights + KV at full context + prefix cache); 0 = no budget."""
    crash_limit: Annotated[int, Field(ge=1)] = 5
    """Crashes within `crash_window_s` after which a model is marked failed instead of restarting again."""
    crash_window_s: Annotated[float, Field(gt=0)] = 300.0
    """The window `crash_limit` counts crashes in."""
    metrics_auth: bool = True
    """With keys configured, `/metrics` needs an admin key (false: open, for a scraper on a private network)."""
    log_content: bool = False
    """Log each turn's prompt and output text; off, logs carry ids, counts and timings only."""
    cors_origins: tuple[_NonEmpty, ...] = ()
    """Browser origins allowed to call the API (CORS), e.g. "http://localhost:3000"; none by default."""
    cpu_blas: _CpuBlas = "auto"
    """Linux, MLX on its CPU backend: "auto" preloads a system OpenBLAS into workers when one is installed (~45x faster fp32 matmuls than MLX's bundled reference BLAS); "off"; or a library path. On x86-64, "auto" and a path also set OPENBLAS_CORETYPE where OpenBLAS would pick older kernels than the CPU runs (a VM hiding its CPU model)."""
    local_only: bool = False
    """Refuse (at validate, start and reload) any config that could send a request off the fleet (router/upstream/fleet.py)."""
    fleet_hosts: tuple[_NonEmpty, ...] = ()
    """Upstream host names (or IPs) the operator vouches for as the team's own machines, beside loopback, private IPs and *.local."""


class SamplingDefaults(_Frozen):
    """`[models.<id>.sampling]`: used when a request leaves a field out."""

    temperature: Annotated[float, Field(ge=0, le=2)] = 1.0
    top_p: Annotated[float, Field(gt=0, le=1)] = 1.0
    top_k: Annotated[int, Field(ge=0)] = 0
    """0 turns top-k off."""
    min_p: Annotated[float, Field(ge=0, le=1)] = 0.0
    repetition_penalty: Annotated[float, Field(gt=0)] = 1.0
    presence_penalty: Annotated[float, Field(ge=-2, le=2)] = 0.0
    frequency_penalty: Annotated[float, Field(ge=-2, le=2)] = 0.0
    max_tokens: Annotated[int, Field(ge=1)] = 4096
    """Output cap when a request sets none; always clamped to the context left."""


MIN_KV_WINDOW = 64  # below this a window holds hardly a sentence


class KVCacheConfig(_Frozen):
    """`[models.<id>.kv_cache]`: KV quantization, or a window bounding the cache."""

    bits: Annotated[int, one_of(0, 4, 8)] = 0
    """0 keeps the cache unquantized."""
    group_size: Annotated[int, one_of(32, 64, 128)] = 64
    quantize_after: Annotated[int, Field(ge=0)] = 0
    """Tokens kept in full precision before quantizing."""
    window: Annotated[int, Field(ge=0)] = 0
    """Attend to the latest this many tokens (a sliding window, mlx-lm's `max_kv_size`): memory and prefill stay linear in the prompt; 0 = the whole context."""

    @model_validator(mode="after")
    def _window_alone(self) -> KVCacheConfig:
        if 0 < self.window < MIN_KV_WINDOW:
            raise PydanticCustomError("config_rule", "window: at least {low} tokens (or 0: the whole context)", {"low": MIN_KV_WINDOW})
        if self.window and self.bits:
            raise PydanticCustomError("config_rule", "window and bits cannot be combined: mlx-lm cannot quantize a rotating (windowed) cache")
        return self


class PrefixCacheConfig(_Frozen):
    """`[models.<id>.prefix_cache]`: the radix prefix cache inside the worker."""

    enabled: bool = True
    memory_gb: Annotated[float, Field(ge=0)] = 2.0
    """Memory for cached prefixes (the arrays' real sizes); least recently used go first."""
    min_tokens: Annotated[int, Field(ge=0)] = 0
    """Token sequences shorter than this are not cached."""
    dir: str = ""
    """The disk tier's directory; "" = <runtime_dir>/prefix-cache/<id>."""
    persist: bool = True
    """Write every entry through to disk, serve from it after eviction and across restarts."""
    disk_gb: Annotated[float, Field(ge=0)] = 10.0
    """Disk for cached prefixes; least recently used files go first (0 turns the disk tier off)."""
    flush_timeout_s: Annotated[float, Field(ge=0)] = 10.0
    """On a graceful stop, how long the worker may spend writing what is still queued."""


def _is_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def _is_this_machine(host: str) -> bool:
    """Whether ``host`` (an IP) is one of this machine's addresses: binding to it succeeds."""
    try:
        if ipaddress.ip_address(host).is_loopback:
            return True
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.bind((host, 0))
    except (OSError, ValueError):
        return False
    return True


def _ranks_on_loopback(value: Any) -> Any:
    """`hosts = N`: N ranks on this machine's loopback (a test, or a machine with memory for N processes)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 2:
        return ("127.0.0.1",) * value
    if isinstance(value, (list, tuple)):
        return value
    raise PydanticCustomError("config_rule", "must be a list of IP addresses or a count of at least 2 ranks (got {got})",
                              {"got": repr(value)})


class ShardConfig(_Frozen):
    """`[models.<id>.shard]`: split the model over a group of processes started with `mlx.launch` (engines/shard/)."""

    hosts: Annotated[tuple[_NonEmpty, ...], BeforeValidator(_ranks_on_loopback)] = ()
    """One IP per rank, rank 0 first and on this machine (it talks to the router); a count N = N ranks on loopback; [] = one process."""
    backend: Annotated[str, one_of("ring", "jaccl")] = "ring"
    """"ring": TCP between the hosts; "jaccl": RDMA over Thunderbolt 5 (needs `hostfile`)."""
    mode: Annotated[str, one_of("tensor", "pipeline")] = "tensor"
    """"tensor": every layer split across the ranks (mlx-lm `shard()`); "pipeline": the layers divided among them."""
    hostfile: str = ""
    """An `mlx.launch` hostfile (JSON, as `mlx.distributed_config` writes) naming the hosts instead of `hosts` (which may stay [])."""

    @property
    def host_list(self) -> tuple[str, ...]:
        """One address per rank, rank 0 first (empty: not sharded)."""
        return self.hosts

    @property
    def enabled(self) -> bool:
        return bool(self.host_list or self.hostfile)

    @model_validator(mode="after")
    def _launchable(self) -> ShardConfig:
        hosts = self.host_list
        if not self.enabled:
            return self
        if len(hosts) < 2 and not self.hostfile:
            raise PydanticCustomError("config_rule", "hosts: a sharded model needs at least 2 ranks")
        if self.backend == "jaccl" and not self.hostfile:
            raise PydanticCustomError("config_rule", 'backend "jaccl" needs a hostfile naming each host\'s RDMA devices')
        if self.hostfile and not os.path.isfile(self.hostfile):
            raise PydanticCustomError("config_rule", "hostfile: {path} is not a file", {"path": self.hostfile})
        if not self.hostfile:
            bad = [host for host in hosts if not _is_ip(host)]
            if bad:
                raise PydanticCustomError("config_rule", "hosts: mlx.launch needs IP addresses, not {bad}", {"bad": ", ".join(bad)})
            if not _is_this_machine(hosts[0]):
                raise PydanticCustomError("config_rule", "hosts: the first host (rank 0) must be this machine, not {host}",
                                          {"host": hosts[0]})
        return self


class ModelConfig(_Frozen):
    """`[models.<id>]`: one served model."""

    path: _NonEmpty
    """Local directory or Hugging Face repo id ("org/name"). Required."""
    aliases: tuple[ModelId, ...] = ()
    """Other names: exact strings or fnmatch globs such as "claude-*"."""
    preload: bool = True
    """Start the worker at server start (false: on first request)."""
    ttl: Annotated[float, Field(ge=0)] = 0.0
    """Seconds without requests after which the worker is unloaded (0 = never)."""
    pin: bool = False
    """Never unloaded: not by `ttl`, not to make room under `[server] memory_budget_gb`."""
    memory_gb: Annotated[float, Field(ge=0)] = 0.0
    """This model's share of the memory budget; 0 = estimated from its weights, KV at full context and prefix cache."""
    max_concurrency: Annotated[int, Field(ge=1)] = 8
    """Sequences decoded together (continuous batching width)."""
    max_queue: Annotated[int, Field(ge=0)] = 64
    """Requests waiting beyond max_concurrency before 429."""
    max_context: Annotated[int, Field(ge=0)] = 0
    """0 = the model's own max_position_embeddings; >0 caps the context."""
    max_output_tokens: Annotated[int, Field(ge=0)] = 0
    """Ceiling on any request's max_tokens (every API), so one reply cannot hold a slot for long; 0 = none (context-bound)."""
    prefill_step: Annotated[int, Field(ge=16)] = 512
    """Tokens per prefill chunk (bounds how long a prompt stalls decodes)."""
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Default chat template kwargs; request values override."""
    tool_parser: _NonEmpty = "auto"
    """`auto`, `none` or a parser name."""
    reasoning_parser: _NonEmpty = "auto"
    """`auto`, `none` or a parser name."""
    spillover: tuple[ModelId, ...] = ()
    """Upstream model ids to send a request to, first available first, when `spillover_when` holds."""
    spillover_when: Annotated[str, one_of("queue_full", "unavailable", "least_loaded")] = "queue_full"
    """"queue_full": instead of a 429; "unavailable": also while loading or failed; "least_loaded": the shortest queue wins."""
    local_only: bool = False
    """This model's requests never leave the fleet: its spillover upstreams must all be on it."""
    sampling: SamplingDefaults = Field(default_factory=SamplingDefaults)
    kv_cache: KVCacheConfig = Field(default_factory=KVCacheConfig)
    prefix_cache: PrefixCacheConfig = Field(default_factory=PrefixCacheConfig)
    shard: ShardConfig = Field(default_factory=ShardConfig)


class UpstreamModelConfig(_Frozen):
    """`[models.<id>]` with `upstream`: a model another server serves, proxied (router/upstream/)."""

    upstream: _UpstreamUrl
    """Base URL of an OpenAI- or Anthropic-compatible API ("http://host:port/v1"). Required."""
    upstream_model: str = ""
    """The model name sent upstream; "" = this model's id."""
    api_key_env: _EnvName = ""
    """Environment variable holding the key sent upstream; "" sends none (the front's client keys never go)."""
    timeout_s: Annotated[float, Field(gt=0)] = 600.0
    """Longest wait for the upstream's response headers, and between two reads of its body."""
    max_concurrency: Annotated[int, Field(ge=1)] = 64
    """Requests in flight on this upstream at once; beyond it 429 (or the next spillover target)."""
    cloud: bool = False
    """Count this upstream as off the fleet whatever its host (a VPN endpoint, a hosted API behind a private IP)."""
    local_only: bool = False
    """Refuse this entry if its upstream is off the fleet."""
    aliases: tuple[ModelId, ...] = ()
    """Other names: exact strings or fnmatch globs such as "gpt-*"."""


def model_kind(value: Any) -> str:
    """Which table a `[models.<id>]` entry is: `upstream` without `path` makes it a remote one."""
    if isinstance(value, dict):
        return UPSTREAM_TAG if "upstream" in value and "path" not in value else LOCAL_TAG
    return UPSTREAM_TAG if isinstance(value, UpstreamModelConfig) else LOCAL_TAG


# Tags appear in pydantic error locations; errors.py drops them from the TOML path it prints.
LOCAL_TAG, UPSTREAM_TAG = "<local>", "<upstream>"
AnyModelConfig = Annotated[
    Annotated[ModelConfig, Tag(LOCAL_TAG)] | Annotated[UpstreamModelConfig, Tag(UPSTREAM_TAG)], Discriminator(model_kind)]


class KeyConfig(_Frozen):
    """`[[keys]]`: one client of the endpoint. With any key configured, every route but /health needs one."""

    name: ModelId
    """What logs and metrics call this key (never the secret). Required, unique."""
    key_env: _EnvName = ""
    """Environment variable holding the secret, read at start and on every reload."""
    key_sha256: _Sha256 = ""
    """The secret's SHA-256 in hex, instead of key_env: `printf %s "$SECRET" | sha256sum`."""
    models: tuple[ModelId, ...] = ("*",)
    """Model ids, aliases or fnmatch globs this key may use."""
    rpm: Annotated[int, Field(ge=0)] = 0
    """Requests per minute (0 = unlimited); beyond it 429 with Retry-After."""
    max_concurrent: Annotated[int, Field(ge=0)] = 0
    """Requests in flight at once (0 = unlimited); beyond it 429."""
    admin: bool = False
    """May use /admin/* (and /metrics while metrics_auth is on)."""

    @model_validator(mode="after")
    def _one_secret(self) -> KeyConfig:
        if bool(self.key_env) == bool(self.key_sha256):
            raise PydanticCustomError("config_rule", "set exactly one of key_env and key_sha256")
        return self


class RouterConfig(_Frozen):
    """The whole file. `models` keeps file order (glob aliases resolve first-declared-wins)."""

    server: ServerConfig = Field(default_factory=ServerConfig)
    models: dict[ModelId, AnyModelConfig] = Field(default_factory=dict)
    keys: tuple[KeyConfig, ...] = ()

    @property
    def local_models(self) -> dict[str, ModelConfig]:
        """The models this machine's workers serve, in file order."""
        return {model_id: model for model_id, model in self.models.items() if isinstance(model, ModelConfig)}

    @property
    def upstream_models(self) -> dict[str, UpstreamModelConfig]:
        """The models proxied to another server, in file order."""
        return {model_id: model for model_id, model in self.models.items() if isinstance(model, UpstreamModelConfig)}
