"""Router configuration: the `rapidmlx.toml` schema, loading and validation (re-exports only)."""

from .errors import ConfigError
from .load import load_config, load_config_text, read_config_text, resolve_runtime_dir, single_model_config, validate_file
from .schema import (
    KeyConfig,
    KVCacheConfig,
    ModelConfig,
    PrefixCacheConfig,
    RouterConfig,
    SamplingDefaults,
    ServerConfig,
    ShardConfig,
    UpstreamModelConfig,
)
from .fleet import is_off_fleet

__all__ = [
    "ConfigError",
    "KVCacheConfig",
    "KeyConfig",
    "ModelConfig",
    "PrefixCacheConfig",
    "RouterConfig",
    "SamplingDefaults",
    "ServerConfig",
    "ShardConfig",
    "UpstreamModelConfig",
    "is_off_fleet",
    "load_config",
    "load_config_text",
    "read_config_text",
    "resolve_runtime_dir",
    "single_model_config",
    "validate_file",
]
