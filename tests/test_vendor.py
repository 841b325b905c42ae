"""Vendored front-end files: from the npm registry, versions in names, a compatible pair."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENDOR = ROOT / "static" / "vendor"
MANIFEST = json.loads((VENDOR / "vendor.json").read_text())


def test_every_vendored_file_matches_its_manifest_entry():
    for name, entry in MANIFEST.items():
        data = (VENDOR / name).read_bytes()
        assert entry["version"] in name, f"{name} must carry its version {entry['version']}"
        assert hashlib.sha256(data).hexdigest() == entry["sha256"], (
            f"{name} differs from {entry['package']}@{entry['version']}; run scripts/vendor"
        )


def test_htmx_file_is_the_version_its_name_says():
    htmx = next(n for n, e in MANIFEST.items() if e["package"] == "htmx.org")
    inside = re.search(r'version:"([\d.]+)"', (VENDOR / htmx).read_text())
    assert inside and inside.group(1) == MANIFEST[htmx]["version"]


def test_htmx_and_ws_extension_are_a_working_pair():
    versions = {e["package"]: e["version"] for e in MANIFEST.values()}
    # htmx-ext-ws 2.x works only with htmx 2; htmx 4 ships its own websocket extension.
    assert versions["htmx.org"].split(".")[0] == "2"
    assert versions["htmx-ext-ws"].split(".")[0] == "2"


def test_templates_load_only_vendored_files_never_a_cdn():
    for template in (ROOT / "templates").rglob("*.html"):
        text = template.read_text()
        assert not re.search(r'<(script|link)[^>]+(src|href)="(https?:)?//', text), template
        for ref in re.findall(r"static '(vendor/[^']+)'", text):
            assert (ROOT / "static" / ref).exists(), f"{template} loads missing {ref}"
