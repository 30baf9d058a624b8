"""Where the KV config lives by default: upstream's ``~/namesrv/kvConfig.json``, surviving a
restart; ``:memory:`` or an empty path keeps it in memory."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from twisted.internet import task

from namesrv.config import (
    DEFAULT_KV_CONFIG_PATH,
    IN_MEMORY,
    NamesrvConfig,
    check_paths,
    from_mapping,
    state_file_path,
)
from namesrv.config_file import load
from namesrv.server import NameServer


def server(config: NamesrvConfig) -> NameServer:
    return NameServer(config, clock=task.Clock(), epoch="e1")


def test_the_default_is_upstreams_kv_config_path():
    assert NamesrvConfig().registry.kv_config_path == DEFAULT_KV_CONFIG_PATH
    assert DEFAULT_KV_CONFIG_PATH == "~/namesrv/kvConfig.json"


@pytest.mark.parametrize("value", [IN_MEMORY, ""])
def test_memory_or_empty_keeps_kv_in_memory(value):
    assert state_file_path(value) is None
    ns = server(from_mapping({"registry": {"kv_config_path": value}}))
    ns.kv.put("ns", "k", "v")
    assert ns.kv.path is None and ns.kv.file_writes == 0


def test_kv_written_on_the_defaults_survives_a_restart_under_the_home_directory(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("HOME", str(tmp_path))
    check_paths(NamesrvConfig())  # creates ~/namesrv, as at start-up
    first = server(NamesrvConfig())
    first.kv.put("ORDER_TOPIC_CONFIG", "TopicA", "broker-a:8")
    assert first.kv.close(timeout=10)
    path = tmp_path / "namesrv" / "kvConfig.json"
    doc = json.loads(path.read_text())
    assert doc == {"configTable": {"ORDER_TOPIC_CONFIG": {"TopicA": "broker-a:8"}}}
    again = server(NamesrvConfig())
    assert again.kv.get("ORDER_TOPIC_CONFIG", "TopicA") == "broker-a:8"
    again.kv.close(timeout=10)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("namesrv.toml", '[registry]\nkv_config_path = "{path}"\n'),
        ("namesrv.properties", "kvConfigPath={path}\n"),
    ],
)
def test_the_path_is_overridden_in_toml_and_properties(tmp_path, name, text):
    target = tmp_path / "elsewhere" / "kv.json"
    config_file = tmp_path / name
    config_file.write_text(text.format(path=target))
    assert state_file_path(load(config_file).registry.kv_config_path) == str(target)
    config_file.write_text(text.format(path=IN_MEMORY))
    assert state_file_path(load(config_file).registry.kv_config_path) is None


def test_tests_never_use_the_real_home_directory_for_kv(tmp_path):
    """The fixtures' servers keep KV in memory (``support.server_fixtures.isolated_config``)."""
    from support.server_fixtures import isolated_config

    assert isolated_config().registry.kv_config_path == IN_MEMORY
    chosen = isolated_config({"registry": {"kv_config_path": str(tmp_path / "kv.json")}})
    assert Path(chosen.registry.kv_config_path) == tmp_path / "kv.json"
