"""Callback plugin: the controller's Jinja work done once, not once per task and node.

Four things, all in the controller before it forks any worker, so that every
worker inherits them:

* each Jinja template is compiled once, not once per task, node and run (below);
* Jinja's filter and test plugins and Ansible's lookup plugins are loaded once.
  A worker that renders its first filter otherwise reads every filter plugin
  file again (this repository's filter_plugins/mnc.py and the module_utils it
  imports among them, compiled from source wherever Python writes no bytecode,
  as with PYTHONDONTWRITEBYTECODE=1), and one that runs a lookup imports the
  lookup's plugin: measured on a no-op ``site.yml`` run, 145 workers loaded the
  filter plugins and 836 the file lookup (``module_defaults`` reads
  playbooks/vars/facts.yml for every task);
* a name that is Jinja's own filter or test (``length``, ``default``, ``join``,
  ...) is looked up among Ansible's plugins once: Ansible's loader otherwise
  searches its collections for it in every worker, on first use of each name
  (about 4,600 searches of a millisecond in a no-op run), before Jinja's own
  is used; the controller records which of Jinja's names Ansible has no
  plugin for, and the workers use Jinja's straight away for those (a name
  Ansible does have a plugin for is looked up as before);
* the ``template`` lookup copies the task's variables shallowly: it
  deep-copied all of them for each file (tens of milliseconds each, 58 times
  in a no-op run) only to add the ``template_*`` variables to the copy, which
  a shallow copy isolates as well.

Compiling:

Ansible forks a worker process per node for every task, and every worker
compiles from scratch each template it renders: the task's arguments, its
conditions, and every templated variable it reads (a role default such as
``"{{ stack_openmpi_releases[stack_openmpi_version].url }}"`` is compiled again
by each worker that reads it). A no-op ``site.yml`` run on three nodes compiled
about 17,000 templates, of only about 1,000 different texts; compiling (Jinja's
parser and code generator, then Python's ``compile``) was the largest single
cost of the controller.

This plugin, loaded by the controller before it forks any worker
(ansible.cfg: ``callback_plugins``), wraps ``jinja2.Environment.compile`` with a
cache of the compiled code: in memory (the workers inherit what the controller
holds) and on disk (what a worker compiles is there for the next worker and the
next run). The code Jinja generates is a pure function of the template's text,
the environment's syntax settings and the filter and test plugins it names, so
the cache key holds all of them: the text, the settings, the versions of
Python, Jinja2 and ansible-core, and the size and mtime of every filter and test
plugin file Ansible can load (this repository's filter_plugins/ included). A
change to any of them is a new key; a template that does not compile is never
cached (the error is Jinja's own, as without this plugin).

Where the cache lives: ``$MNC_JINJA_CACHE``, else ``$XDG_CACHE_HOME/mncluster/jinja``
(``~/.cache/mncluster/jinja``). ``MNC_JINJA_CACHE=off`` turns it off (templates are
then cached in memory only); ``MNC_JINJA=off`` turns the whole plugin off (Ansible as it
is: for comparing, or should this plugin ever be suspected). The
directory must be the controller user's own and writable by nobody else: the
cache holds Python code that the controller runs, so a directory another user
could write to is not used (a warning says so), nor is a file in it that is
not the user's own regular file. An entry that cannot be read is compiled
again. More than ``MAX_ENTRIES`` files empty the directory first.
"""

from __future__ import annotations

DOCUMENTATION = """
name: mnc_jinja
type: aggregate
short_description: compile each Jinja template once and load Jinja's plugins once, in the controller
description:
  - Loads Jinja's filter and test plugins and Ansible's lookup plugins in the controller, so that
    the forked workers inherit them instead of loading them again; records which of Jinja's own
    filter and test names Ansible has no plugin for, so that the workers do not search for them;
    makes the template lookup copy the task's variables shallowly.
  - Wraps jinja2.Environment.compile with a cache of compiled code, in memory (inherited by
    Ansible's forked workers) and in a directory of the controller user's own
    (MNC_JINJA_CACHE, default ~/.cache/mncluster/jinja; MNC_JINJA_CACHE=off turns it off).
  - MNC_JINJA=off turns the whole plugin off. The plugin is loaded from the directory next to
    site.yml too (Ansible's playbook-adjacent plugins), so a run of site.yml has it whatever
    ANSIBLE_CALLBACK_PLUGINS says.
  - Enabled wherever ansible.cfg's callback_plugins names this directory; no options.
"""

import contextlib
import glob
import hashlib
import importlib.util
import marshal
import os
import stat
import sys

import jinja2
from ansible.module_utils.ansible_release import __version__ as ansible_core_version
from ansible.plugins.callback import CallbackBase
from ansible.utils.display import Display
from jinja2.environment import Environment

FORMAT = b"mnc-jinja-cache 1"
MAX_ENTRIES = 20000
_OFF = {"off", "0", "no", "false", "none", ""}

# Loaded twice (another plugin loader's pass), wrap the original only once.
_original_compile = getattr(Environment.compile, "mnc_original", Environment.compile)
_memory: dict[str, object] = {}
_state = {"dir": None, "salt": b""}


def cache_dir() -> str | None:
    """The directory this process would use, or None when the cache is turned off."""
    chosen = os.environ.get("MNC_JINJA_CACHE")
    if chosen is not None:
        return None if chosen.strip().lower() in _OFF else chosen
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "mncluster", "jinja")


def trusted_dir(path: str) -> str | None:
    """Create ``path`` (0700) if missing; None unless it is a directory of this user's that
    nobody else can write to (the reason in the warning)."""
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        st = os.lstat(path)
    except OSError as e:
        return f"cannot create or read {path}: {e}"
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a directory"
    if st.st_uid != os.geteuid():
        return f"{path} belongs to uid {st.st_uid}, not to this user ({os.geteuid()})"
    if st.st_mode & 0o022:
        return f"{path} is writable by others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def plugin_signature() -> bytes:
    """Size and mtime of every filter and test plugin file Ansible can load: the code Jinja
    generates for a filter or test depends on how the plugin is declared."""
    from ansible.plugins.loader import filter_loader, test_loader

    try:
        from ansible.utils.collection_loader import AnsibleCollectionConfig

        roots = list(AnsibleCollectionConfig.collection_paths or [])
    except Exception:  # no collection finder: the plugin paths alone
        roots = []
    packages = [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    roots += [os.path.join(p, "ansible_collections") for p in packages]
    files = []
    for loader in (filter_loader, test_loader):
        for d in loader._get_paths():
            files += glob.glob(os.path.join(d, "*.py"))
    for root in roots:
        base = root if root.endswith("ansible_collections") else os.path.join(root, "ansible_collections")
        for kind in ("filter", "test"):
            files += glob.glob(os.path.join(base, "*", "*", "plugins", kind, "*.py"))
    parts = []
    for f in sorted(set(files)):
        try:
            st = os.stat(f)
        except OSError:
            continue
        parts.append(f"{f}\0{st.st_size}\0{st.st_mtime_ns}")
    return "\n".join(parts).encode()


def environment_settings(env: Environment) -> tuple:
    """What of an environment decides the code Jinja generates from a text."""
    return (
        type(env).__module__, type(env).__qualname__,
        env.block_start_string, env.block_end_string, env.variable_start_string, env.variable_end_string,
        env.comment_start_string, env.comment_end_string, env.line_statement_prefix, env.line_comment_prefix,
        env.trim_blocks, env.lstrip_blocks, env.newline_sequence, env.keep_trailing_newline,
        env.optimized, env.finalize is not None, env.autoescape, env.is_async, tuple(sorted(env.extensions)),
    )  # fmt: skip


def cache_key(env: Environment, source: str, name, filename, defer_init: bool) -> str:
    text = repr((environment_settings(env), source, name, filename, defer_init)).encode()
    return hashlib.sha256(_state["salt"] + text).hexdigest()


def _read(path: str):
    """The code in a cache file of this user's, or None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            return None
        with os.fdopen(fd, "rb") as f:
            fd = None
            return marshal.loads(f.read())
    except (OSError, ValueError, EOFError, TypeError):
        return None
    finally:
        if fd is not None:
            os.close(fd)


def _write(path: str, code) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(marshal.dumps(code))
        os.replace(tmp, path)
    except (OSError, ValueError):
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def compile_cached(self, source, name=None, filename=None, raw=False, defer_init=False):
    """jinja2.Environment.compile, from the cache where the same text was compiled before."""
    if raw or not isinstance(source, str) or not isinstance(self.autoescape, bool):
        return _original_compile(self, source, name, filename, raw, defer_init)
    key = cache_key(self, source, name, filename, defer_init)
    code = _memory.get(key)
    if code is not None:
        return code
    if _state["dir"]:
        code = _read(os.path.join(_state["dir"], key))
    if code is None:
        code = _original_compile(self, source, name, filename, raw, defer_init)
        if _state["dir"]:
            _write(os.path.join(_state["dir"], key), code)
    _memory[key] = code
    return code


def load_plugins() -> None:
    """Jinja's filter and test plugins (any name loads every plugin file) and the lookup plugins."""
    from ansible.plugins.loader import filter_loader, lookup_loader, test_loader

    # Should one fail, a worker loads it itself, as without this plugin.
    for loader, name in ((filter_loader, "ternary"), (test_loader, "version")):
        with contextlib.suppress(Exception):
            loader.get(name)
    with contextlib.suppress(Exception):
        list(lookup_loader.all(class_only=True))


_jinja_misses: set[tuple[str, str]] = set()


def _get_known_missing(self, name, *args, **kwargs):
    """Jinja2Loader.get, answering None at once for a Jinja name Ansible has no plugin for."""
    if not args and not kwargs and (self.type, name) in _jinja_misses:
        return None
    return _original_jinja_get(self, name, *args, **kwargs)


def remember_jinja_builtins() -> None:
    """Which of Jinja's own filter and test names Ansible's loaders do not find (asked once here)."""
    from ansible.plugins.loader import Jinja2Loader, filter_loader, test_loader
    from jinja2.defaults import DEFAULT_FILTERS, DEFAULT_TESTS

    global _original_jinja_get
    _original_jinja_get = getattr(Jinja2Loader.get, "mnc_original", Jinja2Loader.get)
    for loader, names in ((filter_loader, DEFAULT_FILTERS), (test_loader, DEFAULT_TESTS)):
        for name in names:
            try:
                found = _original_jinja_get(loader, name)
            except Exception:  # an error is not a plain "not found": keep asking the loader
                continue
            if not found:
                _jinja_misses.add((loader.type, name))
    _get_known_missing.mnc_original = _original_jinja_get
    Jinja2Loader.get = _get_known_missing


def shallow_template_lookup() -> None:
    """The template lookup's copy of the task's variables, made shallow (it only adds keys to it)."""
    import copy

    from ansible.plugins.lookup import template as template_lookup

    if getattr(template_lookup, "deepcopy", None) is not copy.copy:
        template_lookup.deepcopy = copy.copy


def enable() -> str | None:
    """Wrap Environment.compile; the reason when the disk cache is not used (memory only)."""
    compile_cached.mnc_original = _original_compile
    _state["salt"] = b"\0".join([
        FORMAT, importlib.util.MAGIC_NUMBER, sys.version.encode(), jinja2.__version__.encode(),
        ansible_core_version.encode(), hashlib.sha256(plugin_signature()).digest(),
    ])  # fmt: skip
    Environment.compile = compile_cached
    path = cache_dir()
    if path is None:  # MNC_JINJA_CACHE=off: memory only
        return None
    problem = trusted_dir(path)
    if problem:
        return f"not using the disk cache: {problem} (memory only)"
    _state["dir"] = path
    # Entries are read when a template needs them (the controller's before it forks, so the
    # workers inherit those), not all at start: most ansible runs use a few of them.
    names = os.listdir(path)
    if sum(len(n) == 64 for n in names) > MAX_ENTRIES:
        for n in names:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(path, n))
    return None


_PROBLEM = None
_original_jinja_get = None
if os.environ.get("MNC_JINJA", "on").strip().lower() not in _OFF:
    load_plugins()
    for _step in (remember_jinja_builtins, shallow_template_lookup):
        with contextlib.suppress(Exception):  # without it, Ansible does what it always does
            _step()
    try:
        _PROBLEM = enable()
    except Exception as e:  # without the cache, Ansible compiles as it always does
        Environment.compile = _original_compile
        _PROBLEM = f"off: {e!r}"


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "mnc_jinja"
    CALLBACK_NEEDS_ENABLED = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if _PROBLEM:
            Display().warning(f"mnc_jinja: {_PROBLEM}")
