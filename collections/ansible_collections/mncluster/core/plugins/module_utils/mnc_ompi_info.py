"""Parse the output of ``ompi_info --parsable --all`` into structured facts.

Pure functions, no Ansible imports: ``mncluster.core.openmpi_facts`` is a thin
shell around :func:`parse_ompi_info`, and the unit tests feed it real output
captured from Open MPI 4.1.x and 5.0.x (``tests/unit/fixtures/``).

The parsable format is one ``key:key:...:value`` record per line. The records
used here look like this (4.1.4 and 5.0.7 agree on all of them)::

    ompi:version:full:5.0.7
    path:prefix:/opt/openmpi/5.0.7-cuda12.6
    config:cli: '--prefix=/opt/openmpi/5.0.7-cuda12.6' '--with-cuda=/opt/cuda'
    mca:btl:tcp:version:"component:5.0.7"
    mca:opal:base:param:opal_built_with_cuda_support:value:true

Values may contain colons (``config:cli``, help texts), so a record is split
on its known key prefix, never on every colon.
"""

from __future__ import annotations

import re
import shlex

# mca:<framework>:<component>:version:"mca:2.1.0" / "api:..." / "component:..."
_COMPONENT_RE = re.compile(r'^mca:(?P<framework>[a-z0-9_]+):(?P<component>[a-z0-9_]+):version:"?component:')
# mca:<framework>:<component>:param:<name>:value:<value>
_PARAM_VALUE_RE = re.compile(r"^mca:[a-z0-9_]+:[a-z0-9_]+:param:(?P<name>[A-Za-z0-9_]+):value:(?P<value>.*)$")

# Frameworks that carry messages between processes (what a user means by
# "which transports does this build have").
TRANSPORT_FRAMEWORKS = ("btl", "pml", "mtl", "osc")


class OmpiInfoParseError(ValueError):
    """The text is not ``ompi_info --parsable --all`` output."""


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    return value


def _bool(value: str | None) -> bool | None:
    if value is None:
        return None
    return value.strip().lower() in ("true", "1", "yes", "enabled")


def parse_records(text: str) -> dict:
    """Split the raw text into the pieces the facts are built from.

    Returns ``{"fields": {key: value}, "params": {name: value},
    "components": {framework: [component, ...]}}``. ``fields`` holds the
    non-``mca:`` records whose key is known (first occurrence wins).
    """
    fields: dict[str, str] = {}
    params: dict[str, str] = {}
    components: dict[str, list[str]] = {}
    known = (
        "package",
        "ident",
        "ompi:version:full",
        "opal:version:full",
        "mpi-api:version:full",
        "path:prefix",
        "path:bindir",
        "path:libdir",
        "path:pkglibdir",
        "path:sysconfdir",
        "config:arch",
        "config:cli",
        "options:mpi_ext",
    )
    for raw in text.splitlines():
        line = raw.rstrip("\r")
        if not line:
            continue
        if line.startswith("mca:"):
            match = _COMPONENT_RE.match(line)
            if match:
                found = components.setdefault(match["framework"], [])
                if match["component"] not in found:
                    found.append(match["component"])
                continue
            match = _PARAM_VALUE_RE.match(line)
            if match and match["name"] not in params:
                params[match["name"]] = _unquote(match["value"])
            continue
        for key in known:
            if line.startswith(key + ":") and key not in fields:
                fields[key] = line[len(key) + 1 :]
                break
    return {"fields": fields, "params": params, "components": components}


def parse_configure_cli(cli: str) -> list[str]:
    """``config:cli`` is the configure command line, shell-quoted."""
    cli = cli.strip()
    if not cli:
        return []
    try:
        return shlex.split(cli)
    except ValueError:
        # An unbalanced quote: keep the words rather than lose the line.
        return cli.split()


def cuda_support(params: dict, components: dict) -> dict:
    """CUDA support as the library reports it.

    * ``built_with``: ``opal_built_with_cuda_support`` (its synonym is
      ``mpi_built_with_cuda_support``): the library was configured
      ``--with-cuda``. This is what "a CUDA-aware build" means.
    * ``runtime``: CUDA buffers will be handled in this environment. In 4.1.x
      that is the ``opal_cuda_support`` (``mpi_cuda_support``) switch. In 5.x
      the CUDA code lives in the ``accelerator/cuda`` component, a plugin that
      only opens where the driver's ``libcuda.so.1`` loads: runtime support
      also needs that component to be listed.
    * ``accelerators``: the 5.x accelerator components that opened
      (``null`` is always there; empty for 4.1.x, which has no such framework).
    """
    built = _bool(params.get("opal_built_with_cuda_support", params.get("mpi_built_with_cuda_support")))
    enabled = _bool(params.get("opal_cuda_support", params.get("mpi_cuda_support")))
    accelerators = list(components.get("accelerator", []))
    has_framework = "accelerator" in components
    runtime = bool(built) and bool(enabled) and (not has_framework or "cuda" in accelerators)
    return {
        "built_with": bool(built),
        "enabled": bool(enabled),
        "runtime": runtime,
        "accelerators": accelerators,
    }


def parse_ompi_info(text: str) -> dict:
    """Structured facts from ``ompi_info --parsable --all``.

    Raises :class:`OmpiInfoParseError` when the text has no version record
    (wrong command, truncated output, an error message).
    """
    records = parse_records(text)
    fields, params, components = records["fields"], records["params"], records["components"]
    version = fields.get("ompi:version:full")
    if not version:
        raise OmpiInfoParseError("no 'ompi:version:full' record: not ompi_info --parsable output")
    cli = fields.get("config:cli", "").strip()
    transports = {fw: list(components.get(fw, [])) for fw in TRANSPORT_FRAMEWORKS}
    transports["ucx"] = "ucx" in components.get("pml", []) or "ucx" in components.get("osc", [])
    mpi_ext = [e.strip() for e in fields.get("options:mpi_ext", "").split(",") if e.strip()]
    return {
        "version": version,
        "major": int(version.split(".")[0]),
        "package": fields.get("package", ""),
        "mpi_api_version": fields.get("mpi-api:version:full", ""),
        "prefix": fields.get("path:prefix", ""),
        "bindir": fields.get("path:bindir", ""),
        "libdir": fields.get("path:libdir", ""),
        "pkglibdir": fields.get("path:pkglibdir", ""),
        "sysconfdir": fields.get("path:sysconfdir", ""),
        "arch": fields.get("config:arch", ""),
        "configure_cli": cli,
        "configure_args": parse_configure_cli(cli),
        "mpi_extensions": mpi_ext,
        "cuda_support": cuda_support(params, components),
        "transports": transports,
        "components": components,
    }
