"""What Ascend software is installed: driver, firmware and CANN packages.

The parsers are pure functions on a file's text and raise ``AscendParseError``
on text they do not recognise. The readers walk an install root
(``/usr/local/Ascend`` unless told otherwise) and never raise: a part that
cannot be read carries an ``error`` string, and a host without the root (a CPU
host) comes back as ``installed: False``.

Layouts read (see tests/fixtures/ascend/versions/):

- ``driver/version.info`` and ``firmware/version.info``;
- ``<product>/<version>/`` for ascend-toolkit, nnae, nnrt, tfplugin, ...: the
  package's ``*_install.info`` in the version folder or in its
  ``<arch>-linux/`` folder, ``version.cfg``, ``opp_kernel/version.info`` (the
  kernels package up to CANN 8.3), and a ``latest`` link (or, on older
  installs, a ``latest`` folder of links);
- CANN 8.5 and later: ``cann-<version>/`` with the same files inside, and a
  ``cann`` link to the version in use;
- ``nnal/<component>/<version>/version.info`` (``key : value`` lines);
- ``<etc>/ascend_install.info`` (driver and firmware install paths) and
  ``<etc>/Ascend/ascend_cann_install.info`` (CANN 8.5 and later).
"""

from __future__ import annotations

import os
import re
from typing import Any, Iterator

DEFAULT_ROOT = "/usr/local/Ascend"
DEFAULT_ETC = "/etc"

_BRACKET = re.compile(r"\[([^\]]*)\]")
_CFG_KEY = re.compile(r"^(\w+?)_(running|upgrade|installed)_version$")
_INSTALL_INFO = re.compile(r"^ascend_(\w+)_install\.info$")
_ARCH_DIR = re.compile(r"^(\w+)-linux$")

# Install info file names say "ops" for what the CANN downloads call kernels.
_KIND_ALIASES = {"ops": "kernels"}
# Only these keys decide compatibility; they are kept as written under "raw".
_DRIVER_RAW = ("Version", "Innerversion", "compatible_version", "compatible_version_fw")
_FIRMWARE_RAW = ("Version", "compatible_version_drv")
_INSTALL_RAW = ("innerversion", "compatible_version")
_NOT_PRODUCTS = ("driver", "firmware")


class AscendParseError(ValueError):
    """The text is not the Ascend version file the parser was asked to read."""


# --- parsers ---------------------------------------------------------------


def parse_key_values(text: str, sep: str = "=") -> dict[str, str]:
    """``key=value`` lines (``version.info``, ``*_install.info``) as a dict.

    Keys stay as printed (``Version``, ``Innerversion``, ``innerversion``...);
    spaces around keys and values, blank lines, ``#`` comments, CRLF endings
    and lines without ``sep`` (shell prompts in captures) are skipped. A key
    seen twice keeps its last value, as a shell sourcing the file would.
    ``sep=":"`` reads the ``key : value`` files of nnal and MindIE.
    """
    pairs: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or sep not in line:
            continue
        key, value = line.split(sep, 1)
        if key.strip():
            pairs[key.strip()] = value.strip()
    if not pairs:
        raise AscendParseError(f"no 'key{sep}value' lines: not an Ascend version file")
    return pairs


def parse_bracket_list(value: str) -> list[str | tuple[str, str]]:
    """``[V100R001C17],[V100R001C18]`` or ``[7.0.0,7.7.99],[23.0.0,23.0.0.]``.

    A one-item group is a string, a two-item group a ``(low, high)`` pair;
    both exactly as written (a trailing dot stays: it means something, see
    ``workers.contract.compat.version_in_range``). An empty value is ``[]``.
    """
    value = value.strip()
    if not value:
        return []
    groups = _BRACKET.findall(value)
    leftover = _BRACKET.sub("", value).replace(",", "").strip()
    if not groups or leftover:
        raise AscendParseError(f"not a list of [..] groups: {value!r}")
    items: list[str | tuple[str, str]] = []
    for group in groups:
        parts = [part.strip() for part in group.split(",")]
        if len(parts) == 1 and parts[0]:
            items.append(parts[0])
        elif len(parts) == 2 and all(parts):
            items.append((parts[0], parts[1]))
        else:
            raise AscendParseError(f"group [{group}] is neither one version nor a range")
    return items


def parse_version_cfg(text: str) -> dict[str, dict[str, Any]]:
    """CANN ``version.cfg``: per component, its running, upgrade and installed versions.

    Each line is ``<component>_<state>_version=[inner:public]``; installed
    lists every version still on disk (``[..][..]``). Returns
    ``{component: {"running": {"inner", "version"} | None, "upgrade": ... |
    None, "installed": [{"inner", "version"}, ...]}}``.
    """
    try:
        pairs = parse_key_values(text)
    except AscendParseError:
        pairs = {}
    components: dict[str, dict[str, Any]] = {}
    for key, value in pairs.items():
        match = _CFG_KEY.match(key)
        if not match:
            continue
        component, state = match.groups()
        entry = components.setdefault(
            component, {"running": None, "upgrade": None, "installed": []}
        )
        versions = _cfg_versions(value)
        if state == "installed":
            entry["installed"] = versions
        else:
            entry[state] = versions[-1] if versions else None
    if not components:
        raise AscendParseError("no <component>_running_version=[..] lines: not a version.cfg")
    return components


def _cfg_versions(value: str) -> list[dict[str, str | None]]:
    versions: list[dict[str, str | None]] = []
    for group in _BRACKET.findall(value):
        inner, colon, public = group.partition(":")
        if colon:
            versions.append({"inner": inner.strip() or None, "version": public.strip()})
        else:
            versions.append({"inner": None, "version": inner.strip()})
    return versions


# --- driver and firmware ---------------------------------------------------


def read_driver(root: str = DEFAULT_ROOT) -> dict[str, Any]:
    """``driver/version.info``: version, inner version and what the driver accepts.

    ``accepts_cann`` is ``compatible_version`` (CANN inner version prefixes),
    ``accepts_firmware`` is ``compatible_version_fw`` (firmware ranges); both
    ``None`` when the file lacks them.
    """
    path = os.path.join(root, "driver", "version.info")
    result: dict[str, Any] = {
        "path": path,
        "installed": False,
        "version": None,
        "inner_version": None,
        "package_version": None,
        "accepts_cann": None,
        "accepts_firmware": None,
    }
    if not os.path.lexists(path):
        return result
    result["installed"] = True
    pairs = _load(path, result)
    if pairs is None:
        return result
    errors: list[str] = []
    result.update(
        version=_get(pairs, "Version"),
        inner_version=_get(pairs, "Innerversion"),
        package_version=_get(pairs, "package_version"),
        accepts_cann=_bracket_field(pairs, "compatible_version", errors),
        accepts_firmware=_bracket_field(pairs, "compatible_version_fw", errors),
        raw=_pick(pairs, _DRIVER_RAW),
    )
    _add_errors(result, errors)
    return result


def read_firmware(root: str = DEFAULT_ROOT) -> dict[str, Any]:
    """``firmware/version.info``: version and the driver ranges it accepts."""
    path = os.path.join(root, "firmware", "version.info")
    result: dict[str, Any] = {
        "path": path,
        "installed": False,
        "version": None,
        "package_version": None,
        "accepts_driver": None,
    }
    if not os.path.lexists(path):
        return result
    result["installed"] = True
    pairs = _load(path, result)
    if pairs is None:
        return result
    errors: list[str] = []
    result.update(
        version=_get(pairs, "Version"),
        package_version=_get(pairs, "package_version"),
        accepts_driver=_bracket_field(pairs, "compatible_version_drv", errors),
        raw=_pick(pairs, _FIRMWARE_RAW),
    )
    _add_errors(result, errors)
    return result


# --- CANN ------------------------------------------------------------------


def find_cann(root: str = DEFAULT_ROOT, etc_dir: str = DEFAULT_ETC) -> dict[str, Any]:
    """Every CANN package under ``root``, the ``version.cfg`` files and ``latest`` links.

    ``installs`` holds one entry per package found (toolkit, kernels, nnae,
    nnrt, nnal, ...); ``links`` says where each ``latest``/``cann`` link points
    and whether it dangles. A missing root is ``installed: False`` with a
    ``reason``; unreadable parts carry their own ``error``.
    """
    result: dict[str, Any] = {
        "root": root,
        "installed": False,
        "installs": [],
        "version_cfgs": [],
        "links": [],
        "etc": _read_etc(etc_dir),
    }
    if not os.path.isdir(root):
        result["reason"] = f"{root} does not exist: no Ascend software installed"
        return result
    errors: list[str] = []
    seen: set[str] = set()
    for version_dir, product in _version_dirs(root, result["links"], errors):
        _scan_version_dir(version_dir, product, result, seen, errors)
    result["installed"] = bool(result["installs"])
    if not result["installed"]:
        result["reason"] = f"no CANN install info under {root}"
    if errors:
        result["errors"] = errors
    return result


def _version_dirs(root: str, links: list[dict[str, Any]], errors: list[str]) -> Iterator[Any]:
    """(folder, product) for every folder that may hold one version of a package."""
    for name in _listdir(root, errors):
        path = os.path.join(root, name)
        if name in _NOT_PRODUCTS:
            continue
        if os.path.islink(path):
            if name in ("cann", "latest"):
                links.append(_link_info(path))
            continue
        if not os.path.isdir(path):
            continue
        if name == "cann" or name.startswith("cann-"):
            yield path, "cann"
        elif name == "nnal":
            for component in _listdir(path, errors):
                component_path = os.path.join(path, component)
                if os.path.isdir(component_path) and not os.path.islink(component_path):
                    yield from _children(component_path, f"nnal/{component}", links, errors)
        else:
            yield from _children(path, name, links, errors)


def _children(
    parent: str, product: str, links: list[dict[str, Any]], errors: list[str]
) -> Iterator[Any]:
    for name in _listdir(parent, errors):
        path = os.path.join(parent, name)
        if os.path.islink(path):
            if name == "latest":
                links.append(_link_info(path))
            continue
        if not os.path.isdir(path):
            continue
        if name == "latest":
            links.append(_latest_dir_info(path, errors))
        yield path, product


def _scan_version_dir(
    path: str, product: str, result: dict[str, Any], seen: set[str], errors: list[str]
) -> None:
    candidates = [(info, _read_install_info) for info in _install_infos(path, errors)]
    candidates.append((os.path.join(path, "opp_kernel", "version.info"), _read_opp_kernel))
    if product.startswith("nnal/"):
        candidates.append((os.path.join(path, "version.info"), _read_nnal))
    for file_path, reader in candidates:
        real = os.path.realpath(file_path)
        if real in seen or not os.path.isfile(file_path):
            continue
        seen.add(real)
        result["installs"].append(reader(file_path))
    cfg = os.path.join(path, "version.cfg")
    if os.path.isfile(cfg) and os.path.realpath(cfg) not in seen:
        seen.add(os.path.realpath(cfg))
        result["version_cfgs"].append(_read_version_cfg(cfg))


def _install_infos(path: str, errors: list[str]) -> list[str]:
    """``*_install.info`` in the version folder and in its real ``<arch>-linux`` folders."""
    found = [os.path.join(path, n) for n in _listdir(path, errors) if _INSTALL_INFO.match(n)]
    for name in _listdir(path, errors):
        arch_dir = os.path.join(path, name)
        # arm64-linux is often a link to aarch64-linux: reading it twice adds nothing.
        if _ARCH_DIR.match(name) and os.path.isdir(arch_dir) and not os.path.islink(arch_dir):
            found.extend(
                os.path.join(arch_dir, n)
                for n in _listdir(arch_dir, errors)
                if _INSTALL_INFO.match(n)
            )
    return found


def _read_install_info(path: str) -> dict[str, Any]:
    name_match = _INSTALL_INFO.match(os.path.basename(path))
    kind = name_match.group(1) if name_match else "unknown"
    arch_match = _ARCH_DIR.match(os.path.basename(os.path.dirname(path)))
    entry: dict[str, Any] = {
        "path": path,
        "source": "install_info",
        "kind": _KIND_ALIASES.get(kind, kind),
        "version": None,
        "inner_version": None,
        "arch": arch_match.group(1) if arch_match else None,
        "install_path": None,
        "accepts_driver": None,
    }
    pairs = _load(path, entry)
    if pairs is None:
        return entry
    errors: list[str] = []
    entry.update(
        version=_get(pairs, "version"),
        inner_version=_get(pairs, "innerversion"),
        arch=_get(pairs, "arch") or entry["arch"],
        install_path=_get(pairs, "path"),
        accepts_driver=_bracket_field(pairs, "compatible_version", errors),
        raw=_pick(pairs, _INSTALL_RAW),
    )
    _add_errors(entry, errors)
    return entry


def _read_opp_kernel(path: str) -> dict[str, Any]:
    """The kernels package up to CANN 8.3: ``version_dir`` is the CANN version."""
    entry: dict[str, Any] = {"path": path, "source": "opp_kernel", "kind": "kernels"}
    pairs = _load(path, entry)
    if pairs is not None:
        entry.update(version=_get(pairs, "version_dir"), build=_get(pairs, "Version"))
    return entry


def _read_nnal(path: str) -> dict[str, Any]:
    """``nnal/<component>/<version>/version.info``: ``Ascend-cann-atb : 8.0.T63`` lines."""
    component = os.path.basename(os.path.dirname(os.path.dirname(path)))
    entry: dict[str, Any] = {"path": path, "source": "nnal", "kind": "nnal", "component": component}
    pairs = _load(path, entry, sep=":")
    if pairs is not None:
        name = f"Ascend-cann-{component}"
        entry.update(
            version=_get(pairs, name),
            build=_get(pairs, f"{name} Version"),
            arch=_get(pairs, "Platform"),
        )
    return entry


def _read_version_cfg(path: str) -> dict[str, Any]:
    """A ``version.cfg`` in brief: each component's running version and all installed ones."""
    entry: dict[str, Any] = {"path": path}
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            components = parse_version_cfg(handle.read())
    except (OSError, AscendParseError) as exc:
        entry["error"] = _describe(exc)
        return entry
    running = {name: (parts["running"] or {}).get("version") for name, parts in components.items()}
    installed = {v["version"] for parts in components.values() for v in parts["installed"]}
    entry["running"] = running
    entry["installed"] = sorted(v for v in installed if v)
    return entry


def _link_info(path: str) -> dict[str, Any]:
    try:
        target = os.readlink(path)
    except OSError as exc:
        return {"path": path, "target": None, "dangling": None, "error": _describe(exc)}
    # os.path.exists follows the link: False when its target is gone.
    return {"path": path, "target": target, "dangling": not os.path.exists(path)}


def _latest_dir_info(path: str, errors: list[str]) -> dict[str, Any]:
    """A ``latest`` folder of per-component links: which versions they point into."""
    targets: set[str] = set()
    dangling: list[str] = []
    for name in _listdir(path, errors):
        link = os.path.join(path, name)
        if not os.path.islink(link):
            continue
        target = os.readlink(link)
        parts = [part for part in target.split("/") if part not in ("", ".")]
        if len(parts) > 1 and parts[0] == "..":
            targets.add(parts[1])
        if not os.path.exists(link):
            dangling.append(name)
    return {
        "path": path,
        "target": None,
        "directory": True,
        "points_into": sorted(targets),
        "dangling": bool(dangling),
        "dangling_links": dangling,
    }


def _read_etc(etc_dir: str) -> dict[str, Any]:
    """Install records in ``etc_dir``: the driver's install path and CANN's (8.5+)."""
    found: dict[str, Any] = {"ascend_install": None, "ascend_cann_install": None}
    driver_info = os.path.join(etc_dir, "ascend_install.info")
    if os.path.lexists(driver_info):
        entry: dict[str, Any] = {"path": driver_info}
        pairs = _load(driver_info, entry)
        if pairs is not None:
            entry["driver_install_path"] = _get(pairs, "Driver_Install_Path_Param")
            entry["firmware_install_path"] = _get(pairs, "Firmware_Install_Path_Param")
        found["ascend_install"] = entry
    cann_info = os.path.join(etc_dir, "Ascend", "ascend_cann_install.info")
    if os.path.lexists(cann_info):
        entry = {"path": cann_info}
        pairs = _load(cann_info, entry)
        if pairs is not None:
            # No capture of this file's keys yet: keep them all, it is short.
            entry["raw"] = pairs
        found["ascend_cann_install"] = entry
    return found


# --- helpers ---------------------------------------------------------------


def _load(path: str, result: dict[str, Any], sep: str = "=") -> dict[str, str] | None:
    """The file's key/values, or None with ``error`` set in ``result``."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return parse_key_values(handle.read(), sep)
    except (OSError, AscendParseError) as exc:
        result["error"] = _describe(exc)
        return None


def _get(pairs: dict[str, str], key: str) -> str | None:
    """The value of ``key`` as printed, else of the same key in another case."""
    if key in pairs:
        return pairs[key] or None
    lowered = key.lower()
    for name, value in pairs.items():
        if name.lower() == lowered:
            return value or None
    return None


def _pick(pairs: dict[str, str], keys: tuple[str, ...]) -> dict[str, str]:
    wanted = {key.lower() for key in keys}
    return {key: value for key, value in pairs.items() if key.lower() in wanted}


def _bracket_field(
    pairs: dict[str, str], key: str, errors: list[str]
) -> list[str | tuple[str, str]] | None:
    value = _get(pairs, key)
    if value is None:
        return None
    try:
        return parse_bracket_list(value)
    except AscendParseError as exc:
        errors.append(f"{key}: {exc}")
        return None


def _add_errors(result: dict[str, Any], errors: list[str]) -> None:
    if errors:
        result["error"] = "; ".join(errors)


def _listdir(path: str, errors: list[str]) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError as exc:
        errors.append(_describe(exc))
        return []


def _describe(exc: Exception) -> str:
    return f"{type(exc).__name__}: {exc}"
