#!/usr/bin/env python3
"""A lock around one build-cache entry on the controller (roles/artifacts build_check / build_install).

Two runs that share one cache (make test's lanes, two operators) and want the same build must
build it once: the first takes the lock, builds, stores the archive and its record and releases
the lock; the others wait until the record names a complete archive (then they ship it) or the
lock goes (then they take it and look at the cache again).

    mnc-cache-lock.py acquire <entry>.lock --archive <hash>.tar.gz --record <hash>.json --timeout S
        prints {"state": "acquired", "token": T, ...} or {"state": "ready", ...} (the entry is
        complete: nothing to build, no lock taken)
    mnc-cache-lock.py release <entry>.lock --token T

The lock is a directory (an atomic mkdir, also on NFS) holding owner.json: host, the pid of the
ansible-playbook that holds it (and that process's start time, so a reused pid is not mistaken
for the owner), when it was taken and a random token. A lock is stale, and broken with a message,
when its owner is on this host and no longer running, or when it is older than the timeout (the
longest a build may take). Every step runs under an flock of <dir>/.mncluster-lock (held for
milliseconds), so two waiters never both break one stale lock or both take a fresh one.
Before anything, acquire refuses an entry another user could have written (--cache-root given):
the cache root, every directory from it down to the entry, the archive and its record must be
owned by the user running it and writable by no group or other user, since the archive's sha256
is checked against the record next to it. A cache several users share needs one owner (a
service account that runs every playbook) or a signed manifest, which mncluster does not make.
Standard library only: it runs with the controller's ansible_playbook_python.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import fcntl
import hashlib
import json
import os
import secrets
import shutil
import socket
import sys
import time
from pathlib import Path

OWNER = "owner.json"
GUARD = ".mncluster-lock"


def _proc_stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, start time in clock ticks) of a running pid, from /proc; None when gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()
    return int(fields[1]), fields[19]


def _is_ansible(pid: int) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:2]
    except OSError:
        return False
    return any(os.path.basename(a.decode(errors="replace")).startswith("ansible") for a in argv)


def ansible_pid() -> int | None:
    """The ansible-playbook process this run belongs to: the parent of the worker (the first
    ansible ancestor) when that parent is ansible too, else the worker. None without /proc."""
    pid = os.getppid()
    while pid > 1:
        if _is_ansible(pid):
            st = _proc_stat(pid)
            if st and st[0] > 1 and _is_ansible(st[0]):
                return st[0]
            return pid
        st = _proc_stat(pid)
        if st is None:
            return None
        pid = st[0]
    return None


def stale_reason(owner: dict, timeout: float, now: float, host: str) -> str | None:
    """Why the lock of ``owner`` is stale, or None while its owner may still be building."""
    since = float(owner.get("since", 0))
    if now - since > timeout:
        return f"older than the build timeout ({int(now - since)} s > {int(timeout)} s)"
    if owner.get("host") == host and owner.get("pid"):
        st = _proc_stat(int(owner["pid"]))
        if st is None:
            return f"its owner, pid {owner['pid']}, is no longer running on this host"
        if owner.get("start") and st[1] != owner["start"]:
            return f"its owner, pid {owner['pid']}, is no longer running on this host (the pid was reused)"
    return None


def archive_ready(archive: Path, record: Path, seen: dict) -> bool:
    """The record exists and names the archive's sha256 (it is written after the archive)."""
    try:
        key = (record.stat().st_mtime_ns, archive.stat().st_mtime_ns, archive.stat().st_size)
    except OSError:
        return False
    if seen.get("key") != key:
        try:
            want = json.loads(record.read_text()).get("archive_sha256", "")
            digest = hashlib.sha256()
            with archive.open("rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    digest.update(chunk)
        except (OSError, ValueError):
            return False
        seen["key"], seen["ok"] = key, bool(want) and want == digest.hexdigest()
    return seen["ok"]


@contextlib.contextmanager
def guarded(directory: Path):
    """Serialize lock operations on one cache directory (no-op where flock is unsupported)."""
    fd = os.open(directory / GUARD, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def read_owner(lock: Path) -> dict:
    try:
        return json.loads((lock / OWNER).read_text())
    except (OSError, ValueError):
        # A lock directory without a readable owner (another tool, a crash between mkdir and
        # write without the guard): judged by its age alone.
        try:
            return {"since": lock.stat().st_mtime, "host": "?", "pid": None}
        except OSError:
            return {"since": time.time(), "host": "?", "pid": None}


def describe(owner: dict) -> str:
    since = datetime.datetime.fromtimestamp(float(owner.get("since", 0)), datetime.timezone.utc)
    return f"{owner.get('host', '?')} pid {owner.get('pid') or '?'} since {since:%Y-%m-%dT%H:%M:%SZ}"


def trust_problems(root: Path, paths: list[Path], uid: int) -> list[str]:
    """Why an entry of the cache cannot be trusted: a directory from ``root`` down, or a file of
    ``paths``, that is owned by another user or writable by group or others (a link is not
    followed: its own owner counts, and a link to elsewhere is refused)."""
    out, seen = [], set()
    for path in paths:
        chain = [root] + [p for p in reversed(path.parents) if root in p.parents] + [path]
        for p in chain:
            if p in seen:
                continue
            seen.add(p)
            try:
                st = os.lstat(p)
            except FileNotFoundError:
                continue
            if os.path.islink(p) and p != root:
                out.append(f"{p} is a link")
            elif st.st_uid != uid:
                out.append(f"{p} is owned by uid {st.st_uid}, not {uid} (the user running this)")
            elif st.st_mode & 0o022:
                out.append(f"{p} is writable by its group or others (mode {oct(st.st_mode & 0o7777)})")
    return out


def acquire(lock: Path, archive: Path, record: Path, timeout: float, poll: float) -> dict:
    lock.parent.mkdir(parents=True, exist_ok=True)
    host, seen, messages, waited_for = socket.gethostname(), {}, [], None
    start = time.monotonic()
    while True:
        with guarded(lock.parent):
            if archive_ready(archive, record, seen):
                return {"state": "ready", "messages": messages, "waited_s": round(time.monotonic() - start)}
            try:
                lock.mkdir()
            except FileExistsError:
                owner = read_owner(lock)
                reason = stale_reason(owner, timeout, time.time(), host)
                if reason is None:
                    if waited_for != owner.get("token"):
                        waited_for = owner.get("token")
                        messages.append(f"waited for the build of {describe(owner)} ({lock})")
                else:
                    shutil.rmtree(lock, ignore_errors=True)
                    messages.append(f"broke the stale lock {lock} of {describe(owner)}: {reason}")
                    continue
            else:
                pid = ansible_pid()
                st = _proc_stat(pid) if pid else None
                owner = {
                    "host": host,
                    "pid": pid,
                    "start": st[1] if st else None,
                    "since": time.time(),
                    "token": secrets.token_hex(8),
                }
                (lock / OWNER).write_text(json.dumps(owner, sort_keys=True) + "\n")
                return {
                    "state": "acquired",
                    "token": owner["token"],
                    "messages": messages,
                    "waited_s": round(time.monotonic() - start),
                }
        time.sleep(poll)


def release(lock: Path, token: str) -> dict:
    if not lock.parent.is_dir():
        return {"released": False, "messages": [f"{lock} is gone"]}
    with guarded(lock.parent):
        owner = read_owner(lock) if lock.is_dir() else {}
        if owner.get("token") != token:
            return {
                "released": False,
                "messages": [f"{lock} is no longer this run's (broken as stale?); left as it is"],
            }
        shutil.rmtree(lock)
    return {"released": True, "messages": []}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    acq = sub.add_parser("acquire")
    acq.add_argument("lock", type=Path)
    acq.add_argument("--archive", type=Path, required=True)
    acq.add_argument("--record", type=Path, required=True)
    acq.add_argument("--timeout", type=float, required=True)
    acq.add_argument("--poll", type=float, default=2.0)
    acq.add_argument("--cache-root", type=Path, help="refuse an entry another user could have written")
    rel = sub.add_parser("release")
    rel.add_argument("lock", type=Path)
    rel.add_argument("--token", required=True)
    args = parser.parse_args(argv)
    if args.cmd == "acquire" and args.cache_root:
        entry = [args.lock.parent, args.archive, args.record]
        problems = trust_problems(args.cache_root, entry, os.geteuid())
        if problems:
            print(json.dumps({"state": "refused", "messages": problems}, sort_keys=True))
            print(f"mnc-cache-lock: the build cache entry cannot be trusted: {'; '.join(problems)}. The "
                  "archive is checked against the record beside it, so whoever can write there chooses "
                  "what every node runs. Use a cache only this user writes (chmod go-w, chown), or "
                  "give each user its own (MNC_ARTIFACT_CACHE).", file=sys.stderr)
            return 3
    if args.cmd == "acquire":
        result = acquire(args.lock, args.archive, args.record, args.timeout, args.poll)
    else:
        result = release(args.lock, args.token)
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
