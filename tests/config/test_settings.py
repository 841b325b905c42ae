"""Settings come from the environment: database, channel layer, secret key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json
from django.conf import settings
print(json.dumps({
    "engine": settings.DATABASES["default"]["ENGINE"],
    "name": str(settings.DATABASES["default"]["NAME"]),
    "host": settings.DATABASES["default"].get("HOST", ""),
    "layer": settings.CHANNEL_LAYERS["default"]["BACKEND"],
    "layer_config": settings.CHANNEL_LAYERS["default"].get("CONFIG", {}),
    "doorbells_config": settings.CHANNEL_LAYERS.get("doorbells", {}).get("CONFIG"),
    "secret": settings.SECRET_KEY,
    "debug": settings.DEBUG,
    "hosts": settings.ALLOWED_HOSTS,
}))
"""


def load_settings(tmp_path: Path, **env: str) -> dict:
    """Import config.settings in a fresh interpreter with only ``env`` set."""
    clean = {k: v for k, v in os.environ.items()
             if k not in {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "DEBUG", "ALLOWED_HOSTS"}}
    clean.update(PLANWATCH_VAR_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="config.settings", **env)
    out = subprocess.run(
        [sys.executable, "-c", "import django; django.setup();" + PROBE],
        cwd=ROOT, env=clean, capture_output=True, text=True, check=True,
    )
    return json.loads(out.stdout)


def test_embedded_default_is_sqlite_under_var_and_in_memory_layer(tmp_path):
    s = load_settings(tmp_path)
    assert s["engine"] == "django.db.backends.sqlite3"
    assert s["name"] == str(tmp_path / "planwatch.sqlite3")
    assert s["layer"] == "dashboard.runs.layers.InProcessChannelLayer"
    assert s["doorbells_config"] is None  # one in-memory layer: doorbells ring on it
    assert s["debug"] is False


def test_database_url_and_redis_url_switch_to_scale_out(tmp_path):
    s = load_settings(
        tmp_path,
        DATABASE_URL="postgres://planner:secret@db.example:5433/pw",
        REDIS_URL="redis://127.0.0.1:6379/3",
    )
    assert s["engine"] == "django.db.backends.postgresql"
    assert (s["name"], s["host"]) == ("pw", "db.example")
    # the pub/sub layer: RedisChannelLayer's default capacity drops messages silently
    assert s["layer"] == "channels_redis.pubsub.RedisPubSubChannelLayer"
    assert s["layer_config"] == {"hosts": ["redis://127.0.0.1:6379/3"]}
    # doorbells are published on several connections to the one server, side by side
    assert s["doorbells_config"] == {"hosts": ["redis://127.0.0.1:6379/3"] * 4}
    one = load_settings(tmp_path, REDIS_URL="redis://127.0.0.1:6379/3",
                        PLANWATCH_REDIS_CONNECTIONS="1")
    assert one["doorbells_config"] == {"hosts": ["redis://127.0.0.1:6379/3"]}


def test_a_redis_connection_count_below_one_is_refused_with_the_way_out(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update(PLANWATCH_VAR_DIR=str(tmp_path), DJANGO_SETTINGS_MODULE="config.settings",
               REDIS_URL="redis://127.0.0.1:6379/3", PLANWATCH_REDIS_CONNECTIONS="0")
    out = subprocess.run([sys.executable, "-c", "import django; django.setup()"], cwd=ROOT,
                         env=env, capture_output=True, text=True)
    assert out.returncode != 0
    assert "PLANWATCH_REDIS_CONNECTIONS=0 must be 1 or more" in out.stderr


def test_secret_key_is_generated_once_into_var_and_kept(tmp_path):
    first = load_settings(tmp_path)["secret"]
    second = load_settings(tmp_path)["secret"]
    key_file = tmp_path / "secret_key"
    assert first == second == key_file.read_text().strip()
    assert len(first) >= 50
    assert key_file.stat().st_mode & 0o077 == 0  # readable by its owner only


def test_secret_key_debug_and_hosts_from_environment(tmp_path):
    s = load_settings(tmp_path, SECRET_KEY="k" * 60, DEBUG="true",
                      ALLOWED_HOSTS="planwatch.example, 10.0.0.5")
    assert s["secret"] == "k" * 60
    assert not (tmp_path / "secret_key").exists()
    assert s["debug"] is True
    assert s["hosts"] == ["planwatch.example", "10.0.0.5"]


def test_secret_key_file_is_not_tracked_by_git():
    tracked = subprocess.run(["git", "ls-files", "var"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout
    assert tracked == ""
    assert "var/" in (ROOT / ".gitignore").read_text().split()
