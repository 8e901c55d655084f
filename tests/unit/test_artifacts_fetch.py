"""roles/artifacts/tasks/fetch.yml and mncluster.core.mnc_artifact_manifest run by real
ansible-playbook on the controller against a real local HTTP server (a thread
in this test) that can serve a file, corrupt it, or close the connection
mid-file. No podman needed: the node is localhost, so this runs everywhere
pytest runs. The container-level proof is `molecule test -s artifacts`.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
from pathlib import Path

import pytest
from ansible_env import run_playbook

ROOT = Path(__file__).resolve().parents[2]
PAYLOAD = b"".join(hashlib.sha256(b"%d" % i).digest() for i in range(20000))  # 640 KB
SHA = hashlib.sha256(PAYLOAD).hexdigest()


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    requests: list[str] = []  # noqa: RUF012 (shared log, reset per test)

    def log_message(self, *args):
        pass

    def do_GET(self):
        type(self).requests.append(self.path)
        body, length = PAYLOAD, len(PAYLOAD)
        if self.path.startswith("/corrupt/"):
            body = PAYLOAD[::-1]
        elif self.path.startswith("/truncate/"):
            body = PAYLOAD[: len(PAYLOAD) // 3]
        self.send_response(200)
        self.send_header("Content-Length", str(length))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True


@pytest.fixture(scope="module")
def upstream():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


PLAY = """
- name: Fetch one artifact
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Fetch
      ansible.builtin.include_role:
        name: artifacts
        tasks_from: fetch
      vars:
        artifacts_fetch: {artifact}
        artifacts_fetch_dest: {dest}/
    - name: Write the manifest
      mncluster.core.mnc_artifact_manifest:
        cache: "{{{{ lookup('ansible.builtin.env', 'MNC_ARTIFACT_CACHE') }}}}"
        artifacts: [{artifact}]
        overrides: "{{{{ mnc_artifact_overrides | default({{}}) }}}}"
        write: true
"""


def converge(tmp_path: Path, url: str, sha: str = SHA, **extra) -> dict:
    artifact = json.dumps(
        {"name": "demo", "version": "1.0", "filename": "demo-1.0.bin", "url": url, "sha256": sha}
    )
    play = tmp_path / "play.yml"
    play.write_text(PLAY.format(artifact=artifact, dest=tmp_path / "node"))
    env = {"MNC_ARTIFACT_CACHE": str(tmp_path / "cache"), "no_proxy": "127.0.0.1"}
    (tmp_path / "hosts").write_text("")  # implicit localhost: the controller's own python
    argv = []
    for key, value in extra.items():
        argv += ["-e", json.dumps({key: value})]
    proc, _ = run_playbook(play, *argv, inventory=tmp_path / "hosts", env=env, timeout=300)
    failures = [r["msg"] for r in proc.results() if r.get("failed") and not r.get("skipped")]
    return {"stats": proc.host_stats(), "failures": failures}


def cache_files(tmp_path: Path) -> list[str]:
    cache = tmp_path / "cache"
    if not cache.exists():
        return []
    return sorted(str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file())


def test_fetch_verifies_caches_copies_and_is_idempotent(tmp_path, upstream):
    first = converge(tmp_path, f"{upstream}/ok/demo-1.0.bin")
    assert first["stats"]["failures"] == 0, first["failures"]
    assert (tmp_path / "node" / "demo-1.0.bin").read_bytes() == PAYLOAD
    assert cache_files(tmp_path) == ["demo/1.0/demo-1.0.bin", "manifest.json"]
    manifest = json.loads((tmp_path / "cache" / "manifest.json").read_text())
    assert manifest["artifacts"][0]["sha256"] == SHA
    _Handler.requests.clear()
    second = converge(tmp_path, f"{upstream}/ok/demo-1.0.bin")
    assert second["stats"]["changed"] == 0, second
    assert _Handler.requests == [], "a second run must not download again"


@pytest.mark.parametrize("kind", ["corrupt", "truncate"])
def test_bad_download_fails_clearly_and_leaves_nothing(tmp_path, upstream, kind):
    result = converge(tmp_path, f"{upstream}/{kind}/demo-1.0.bin")
    assert result["stats"]["failures"] == 1
    msg = result["failures"][-1]
    assert "could not fetch demo 1.0" in msg
    assert f"Expected sha256 {SHA}" in msg
    assert "Nothing was stored in the cache" in msg
    assert cache_files(tmp_path) == []
    assert not (tmp_path / "node").exists()


def test_offline_missing_artifact_names_the_stage_command(tmp_path, upstream):
    _Handler.requests.clear()
    result = converge(tmp_path, f"{upstream}/ok/demo-1.0.bin", mnc_offline=True)
    assert result["stats"]["failures"] == 1
    assert "offline (mnc_offline: true) and demo 1.0 is missing" in result["failures"][-1]
    assert "ansible-playbook playbooks/stage.yml" in result["failures"][-1]
    assert _Handler.requests == []


def test_a_bad_cached_file_is_replaced(tmp_path, upstream):
    bad = tmp_path / "cache" / "demo" / "1.0" / "demo-1.0.bin"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"stale")
    result = converge(tmp_path, f"{upstream}/ok/demo-1.0.bin")
    assert result["stats"]["failures"] == 0, result["failures"]
    assert bad.read_bytes() == PAYLOAD


def test_a_local_path_override_stages_offline_and_is_verified(tmp_path, upstream):
    local = tmp_path / "shared" / "demo.bin"
    local.parent.mkdir()
    local.write_bytes(PAYLOAD)
    _Handler.requests.clear()
    overrides = {"demo": {"path": str(local)}}
    url = f"{upstream}/ok/demo-1.0.bin"
    result = converge(tmp_path, url, mnc_offline=True, mnc_artifact_overrides=overrides)
    assert result["stats"]["failures"] == 0, result["failures"]
    assert _Handler.requests == []
    assert (tmp_path / "cache" / "demo" / "1.0" / "demo-1.0.bin").read_bytes() == PAYLOAD
    manifest = json.loads((tmp_path / "cache" / "manifest.json").read_text())
    assert manifest["artifacts"][0]["source"] == f"file://{local}"
    # the pinned sha256 still applies to a local file
    (tmp_path / "cache" / "demo" / "1.0" / "demo-1.0.bin").unlink()
    local.write_bytes(b"not the release")
    result = converge(tmp_path, url, mnc_offline=True, mnc_artifact_overrides=overrides)
    assert result["stats"]["failures"] == 1
    assert "did not match " + SHA in result["failures"][-1]
