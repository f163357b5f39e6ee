"""Exports of a run directory into the tools people already keep results in: an inspect_ai
eval log, a Hugging Face dataset, a W&B run, an MLflow run. Each format is one module with
``export(run, out, *, push=None) -> Exported``, written through that tool's own library (an
optional extra), imported only when that format is asked for."""

from __future__ import annotations

import importlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from hpt.errors import HptError

if TYPE_CHECKING:  # the reader (numpy) loads on the way to an export, not for `hpt --help`
    from hpt.exports.source import Exported
    from hpt.reports.cells import Describe

__all__ = ["EXPORTS_DIR", "FORMATS", "ExportError", "Format", "export", "load_format"]

# Where exports land unless --out says otherwise: RUN_DIR/exports/.
EXPORTS_DIR = "exports"


class ExportError(HptError, ValueError):
    """An export cannot be made as asked: an unknown format, a missing extra, a refused
    --push, an output that cannot be written, or the tool's own refusal."""


@dataclass(frozen=True)
class Format:
    module: str  # the module holding export(run, out, *, push)
    libraries: tuple[str, ...]  # the top-level packages it needs
    extra: str | None  # the hpt extra that installs them; None: core dependencies
    needs: str  # what to call them in a message: "W&B"
    # What --push names for this format; None: it cannot push.
    push: str | None


FORMATS: dict[str, Format] = {
    "inspect": Format("hpt.exports.inspect_log", ("inspect_ai",), "inspect", "inspect_ai", None),
    "hf": Format("hpt.exports.hf_dataset", ("datasets", "huggingface_hub"), None,
                 "Hugging Face datasets", "a Hub dataset repo id (USER/NAME)"),
    "wandb": Format("hpt.exports.wandb_run", ("wandb",), "wandb", "W&B",
                    "a W&B project (ENTITY/PROJECT or PROJECT)"),
    "mlflow": Format("hpt.exports.mlflow_run", ("mlflow",), "mlflow", "MLflow",
                     "an MLflow tracking URI"),
}  # fmt: skip


def _install_hint(name: str, fmt: Format) -> str:
    if fmt.extra is None:
        return f"pip install {' '.join(fmt.libraries)} (hpt's own dependencies)"
    return f"pip install 'hpt[{fmt.extra}]'"


def load_format(name: str) -> ModuleType:
    """The module exporting ``name``; ExportError for an unknown format or a missing library."""
    fmt = FORMATS.get(name)
    if fmt is None:
        raise ExportError(f"unknown export format {name!r}; choose one of {', '.join(FORMATS)}")
    missing = [lib for lib in fmt.libraries if importlib.util.find_spec(lib) is None]
    if missing:
        raise ExportError(f"--to {name} needs {fmt.needs}: {_install_hint(name, fmt)}")
    try:
        return importlib.import_module(fmt.module)
    except ModuleNotFoundError as exc:
        if exc.name == fmt.module:
            raise ExportError(f"--to {name} is not part of this hpt installation") from None
        # A library the format needs imports something that is not installed.
        raise ExportError(
            f"--to {name} needs {fmt.needs}, which cannot be imported (no module "
            f"{exc.name!r}): {_install_hint(name, fmt)}"
        ) from None


def export(
    run_dir: Path,
    fmt: str,
    out: Path | None = None,
    push: str | None = None,
    *,
    describe: Describe | None = None,
) -> Exported:
    """Export the run in ``run_dir`` as ``fmt`` into ``out`` (default RUN_DIR/exports/);
    with ``push``, to that remote target instead of (or besides) the local files, as the
    format says. Nothing leaves the machine without ``push``."""
    from hpt.exports.source import open_run

    module = load_format(fmt)
    if push is not None and FORMATS[fmt].push is None:
        raise ExportError(
            f"--push does not apply to --to {fmt}: its export is a file; copy it where it should go"
        )
    if push is not None and not push.strip():
        raise ExportError(f"--push needs {FORMATS[fmt].push}")
    run = open_run(Path(run_dir), describe)
    folder = Path(out) if out is not None else run.directory / EXPORTS_DIR
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ExportError(f"cannot write exports to {folder}: {exc.strerror or exc}") from None
    # An existing folder one cannot write to: say so before any work, not mid-export.
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ExportError(f"cannot write exports to {folder}: permission denied; give --out")
    result: Exported = module.export(run, folder, push=push)
    return result
