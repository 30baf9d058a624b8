"""Config files: the printed default TOML, and upstream's namesrv.properties."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import tomllib

import pytest
from support.namesrv_process import spawn_namesrv
from support.paths import REPO_ROOT

from namesrv.cli import default_config_text, main
from namesrv.config import ConfigError, NamesrvConfig, from_mapping
from namesrv.config_file import load
from namesrv.config_setting import walk
from namesrv.config_text import docs_tables, stale_files
from namesrv.properties import parse_properties
from protocol.codes import RequestCode, ResponseCode
from protocol.frame import FrameDecoder, RemotingCommand, encode_command


def operator_keys() -> list[str]:
    return [key for key, _, setting in walk(NamesrvConfig) if not setting.tuning]


def tuning_keys() -> list[str]:
    return [key for key, _, setting in walk(NamesrvConfig) if setting.tuning]


def test_print_config_is_the_full_default_toml_with_comments(capsys):
    assert main(["--print-config"]) == 0
    text = capsys.readouterr().out
    assert text == default_config_text()
    assert from_mapping(tomllib.loads(text), with_tuning=False) == NamesrvConfig()
    for key in operator_keys():
        section, _, name = key.rpartition(".")
        if key == "acl.accounts":
            assert "# [[acl.accounts]]" in text
            continue
        header = "[" + section + "]"
        assert header in text, key
        assert re.search(rf"^{name} = ", text.split(header, 1)[1], re.M), key
    for key in tuning_keys():
        section, _, name = key.rpartition(".")
        assert not re.search(rf"^{name} = ", text.split(f"[{section}]", 1)[1], re.M), key
    assert text.count("#") > 40


def test_the_generated_default_toml_and_docs_tables_match_the_declarations():
    stale = [path.name for path in stale_files(REPO_ROOT)]
    assert stale == [], f"regenerate them: python -m namesrv.config_text --write ({stale})"


def test_each_operator_setting_has_a_docs_row_and_no_tuning_value_is_a_setting_row():
    docs = docs_tables()
    for key in operator_keys():
        assert f"| `{key}` |" in docs, key
    limits = docs.split("### Built-in limits", 1)
    for key in tuning_keys():
        assert f"| `{key}` |" not in limits[0] and f"| `{key}` |" in limits[1], key


def test_a_config_file_setting_a_tuning_value_is_refused_naming_it(tmp_path):
    path = tmp_path / "namesrv.toml"
    path.write_text("[registry]\nheap_trim_after_ms = 5\n")
    with pytest.raises(ConfigError, match=r"registry\.heap_trim_after_ms is internal tuning"):
        load(path)
    path.write_text("[push]\ntick_intervall_ms = 5\n")
    with pytest.raises(
        ConfigError, match=r"unknown config key push\.tick_intervall_ms \(did you mean"
    ):
        load(path)


def test_tuning_values_are_overridden_through_from_mapping_and_a_tuning_file(tmp_path):
    assert from_mapping({"registry": {"heap_trim_after_ms": 5}}).registry.heap_trim_after_ms == 5
    with pytest.raises(ConfigError, match=r"registry\.heap_trim_after_ms must be between"):
        from_mapping({"registry": {"heap_trim_after_ms": -1}})
    config = tmp_path / "namesrv.toml"
    config.write_text("[push]\ntick_interval_ms = 250\n")
    tuning = tmp_path / "tuning.toml"
    tuning.write_text("[push]\nsettle_slice_ms = 7\n")
    loaded = load(config, tuning)
    assert loaded.push.settle_slice_ms == 7 and loaded.push.tick_interval_ms == 250


def test_properties_parser_follows_java_properties_syntax():
    text = (
        "# comment\n! also\nlistenPort = 9877\nkvConfigPath:/x\n"
        "a.b long \\\n   line\nu=caf\\u00e9\n"
    )
    assert parse_properties(text) == {
        "listenPort": "9877",
        "kvConfigPath": "/x",
        "a.b": "long line",
        "u": "café",
    }


def test_upstream_properties_keys_are_honoured_and_unknown_ones_warned_once(tmp_path, caplog):
    path = tmp_path / "namesrv.properties"
    path.write_text(
        "listenPort=19876\n"
        "bindAddress=127.0.0.1\n"
        "scanNotActiveBrokerInterval=2000\n"
        "orderMessageEnable=true\n"
        "kvConfigPath=${user.home}/namesrv/kvConfig.json\n"
        "deleteTopicWithBrokerRegistration=true\n"
        "tls.server.mode=disabled\n"
        "serverWorkerThreads=8\n"
        "clientRequestThreadPoolNums=4\n"
    )
    with caplog.at_level("WARNING"):
        cfg = load(path)
    assert cfg.server.listen == "127.0.0.1:19876"
    assert cfg.registry.scan_interval_ms == 2000
    assert cfg.registry.order_message_enable
    assert cfg.registry.delete_topic_with_broker_registration
    assert cfg.registry.kv_config_path == os.path.expanduser("~/namesrv/kvConfig.json")
    warnings = [r.getMessage() for r in caplog.records if "ignored" in r.getMessage()]
    assert warnings == [
        "namesrv.properties keys with no meaning for this name server, ignored: "
        "clientRequestThreadPoolNums, serverWorkerThreads"
    ]
    # Without the extension the content decides: no TOML table header means properties.
    other = tmp_path / "ns.conf"
    other.write_text("listenPort=19877\n")
    assert load(other).server.listen == "0.0.0.0:19877"
    bad = tmp_path / "bad.properties"
    bad.write_text("orderMessageEnable=yes\n")
    with pytest.raises(ConfigError, match="orderMessageEnable must be true or false"):
        load(bad)


@pytest.mark.parametrize(
    ("text", "wait_ms"),
    [
        ("", 45_000),  # neither key: this server's default (on), not upstream's (off)
        ("needWaitForService=false\nwaitSecondsForService=60\n", 0),
        ("needWaitForService=true\n", 45_000),  # upstream's default length
        ("needWaitForService=true\nwaitSecondsForService=60\n", 60_000),
        ("waitSecondsForService=10\n", 10_000),
        ("needWaitForService=true\nwaitSecondsForService=0\n", 0),
    ],
)
def test_upstreams_wait_for_service_keys_set_the_start_up_window(tmp_path, text, wait_ms):
    path = tmp_path / "namesrv.properties"
    path.write_text("listenPort=19876\n" + text)
    assert load(path).server.wait_for_service_ms == wait_ms


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("needWaitForService=yes\n", "needWaitForService must be true or false"),
        ("waitSecondsForService=soon\n", "waitSecondsForService must be an integer"),
        ("waitSecondsForService=-1\n", "waitSecondsForService must be between 0 and 86400"),
        ("waitSecondsForService=86401\n", "waitSecondsForService must be between 0 and 86400"),
    ],
)
def test_bad_wait_for_service_values_are_refused_naming_the_key(tmp_path, text, error):
    path = tmp_path / "namesrv.properties"
    path.write_text(text)
    with pytest.raises(ConfigError, match=error):
        load(path)


def test_the_start_up_window_toml_key_is_range_checked():
    assert from_mapping({"server": {"wait_for_service_ms": 0}}).server.wait_for_service_ms == 0
    with pytest.raises(ConfigError, match=r"server\.wait_for_service_ms must be between 0 and"):
        from_mapping({"server": {"wait_for_service_ms": -1}})
    with pytest.raises(ConfigError, match=r"push\.deleted_topics_remembered must be between 0 and"):
        from_mapping({"push": {"deleted_topics_remembered": -1}})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("flag", ["--config", "-c"])
def test_a_name_server_started_with_namesrv_properties_listens_on_its_listen_port(tmp_path, flag):
    port = free_port()
    path = tmp_path / "namesrv.properties"
    path.write_text(f"listenPort={port}\nbindAddress=127.0.0.1\nrocketmqHome=/opt/rocketmq\n")
    seen = serve_one_request(spawn_namesrv(flag, str(path)), port)
    assert any("ignored: rocketmqHome" in line for line in seen)


def test_dash_c_is_upstreams_spelling_of_config_for_a_toml_file_too(tmp_path):
    port = free_port()
    path = tmp_path / "namesrv.toml"
    path.write_text(f'[server]\nlisten = "127.0.0.1:{port}"\n')
    serve_one_request(spawn_namesrv("-c", str(path)), port)


def test_a_built_in_limit_is_refused_in_the_config_file_and_taken_from_a_tuning_file(tmp_path):
    port = free_port()
    path = tmp_path / "namesrv.toml"
    path.write_text(f'[server]\nlisten = "127.0.0.1:{port}"\nframe_timeout_ms = 5000\n')
    proc = spawn_namesrv("-c", str(path))
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert err == (
        "namesrv: config key server.frame_timeout_ms is internal tuning, not a setting of the "
        'config file (docs/config.md, "Built-in limits")\n'
    )
    serve_one_request(spawn_namesrv("--tuning", str(path)), port)


def serve_one_request(proc: subprocess.Popen[str], port: int) -> list[str]:
    """Wait until the name server listens on ``port``, check it answers a request there, stop
    it; the log lines up to "listening on" are returned."""
    try:
        seen = []
        for line in proc.stderr:  # type: ignore[union-attr]
            seen.append(line)
            if "listening on" in line:
                break
        assert f"listening on 127.0.0.1:{port}" in seen[-1], seen
        with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
            request = RemotingCommand.request(
                RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, opaque=5
            )
            sock.sendall(encode_command(request))
            decoder = FrameDecoder()
            frames: list[RemotingCommand] = []
            while not frames:
                frames = decoder.feed(sock.recv(65536))
            assert frames[0].code == ResponseCode.SUCCESS and frames[0].opaque == 5
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return seen


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("listenPrt=9886\n", "unknown key listenPrt (did you mean listenPort?)"),
        ("orderMessageEnabled=true\n", "unknown key orderMessageEnabled (did you mean "
         "orderMessageEnable?)"),
        ("serverWorkerThread=8\n", "unknown key serverWorkerThread (did you mean "
         "serverWorkerThreads?)"),
        ("zzz=1\n", "unknown key zzz\n"),
        ("tls.server.need.client.auth=require\n", "tls.server.need.client.auth=require is not "
         "supported here (only none)"),
    ],
)  # fmt: skip
def test_an_unknown_properties_key_stops_the_process_with_rc_2_and_the_closest_key(
    tmp_path, text, message
):
    path = tmp_path / "namesrv.properties"
    path.write_text(f"listenPort={free_port()}\nbindAddress=127.0.0.1\n{text}")
    proc = spawn_namesrv("-c", str(path))
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert err == f"namesrv: namesrv.properties: {message}".rstrip("\n") + "\n"


def test_an_unknown_toml_key_names_the_closest_one(tmp_path):
    path = tmp_path / "namesrv.toml"
    path.write_text('[server]\nlistn = "127.0.0.1:1"\n')
    proc = spawn_namesrv("-c", str(path))
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert err == "namesrv: unknown config key server.listn (did you mean server.listen?)\n"


def test_docs_list_every_upstream_key_that_is_warned_not_refused():
    from support.paths import REPO_ROOT

    from namesrv.properties import UPSTREAM_UNUSED_KEYS

    text = (REPO_ROOT / "docs" / "config.md").read_text(encoding="utf-8")
    assert [key for key in sorted(UPSTREAM_UNUSED_KEYS) if f"`{key}`" not in text] == []
