"""The ``namesrv`` process: flags or TOML config, refusal of bad config, clean stop on signals."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest
from support.namesrv_process import spawn_namesrv
from support.paths import REPO_ROOT

from namesrv.ops.audit_trail import AUDIT_LOGGER
from protocol.codes import RequestCode, ResponseCode
from protocol.frame import FrameDecoder, RemotingCommand, encode_command
from protocol.push_codec import decode_go_away, encode_subscribe

ROOT = REPO_ROOT


def bound_port(proc: subprocess.Popen[str]) -> int:
    for line in proc.stderr:  # type: ignore[union-attr]
        match = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
        if match:
            return int(match.group(1))
    raise AssertionError(f"the name server never said where it listens (exit {proc.wait()})")


def read_frames(sock: socket.socket, count: int) -> list[RemotingCommand]:
    decoder = FrameDecoder()
    out: list[RemotingCommand] = []
    while len(out) < count:
        data = sock.recv(65536)
        if not data:
            break
        out += decoder.feed(data)
    return out


@contextlib.contextmanager
def sigint_ignored_here() -> Iterator[None]:
    """SIGINT ignored in this process meanwhile, as under ``nohup`` or ``trap '' INT``."""
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


@pytest.mark.parametrize(
    ("sig", "runner_ignores_sigint"),
    [
        (signal.SIGTERM, False),
        (signal.SIGINT, False),
        pytest.param(signal.SIGINT, True, id="SIGINT-from-a-runner-that-ignores-it"),
    ],
)
def test_signal_sends_go_away_to_subscribers_only_then_the_process_exits_cleanly(
    tmp_path, sig, runner_ignores_sigint
):
    config = tmp_path / "namesrv.toml"
    config.write_text(
        '[server]\nshutdown_grace_ms = 300\ngo_away_alternatives = ["10.0.0.9:9876"]\n'
        "wait_for_service_ms = 0\n"
    )
    with sigint_ignored_here() if runner_ignores_sigint else contextlib.nullcontext():
        proc = spawn_namesrv("--listen", "127.0.0.1:0", "--config", str(config))
    try:
        port = bound_port(proc)
        with (
            socket.create_connection(("127.0.0.1", port), timeout=20) as sock,
            socket.create_connection(("127.0.0.1", port), timeout=20) as upstream,
        ):
            subscribe = RemotingCommand.request(
                RequestCode.SUBSCRIBE_TOPIC_ROUTE_CHANGED,
                body=encode_subscribe(["T"], "c"),
            )
            sock.sendall(encode_command(subscribe))
            assert read_frames(sock, 1)[0].code == ResponseCode.SUCCESS
            request = RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})
            upstream.sendall(encode_command(request))
            [answer] = read_frames(upstream, 1)
            assert answer.code == ResponseCode.TOPIC_NOT_EXIST
            proc.send_signal(sig)
            [go_away] = read_frames(sock, 1)
            assert go_away.code == RequestCode.GO_AWAY and go_away.is_oneway
            body = decode_go_away(go_away.body)
            assert body.grace_period_ms == 300
            assert list(body.alternative_addrs) == ["10.0.0.9:9876"]
            # Both still served during the grace period; the upstream-style client never sees
            # 7004 (an Apache client logs an error for a request code it does not know).
            for peer in (sock, upstream):
                peer.sendall(encode_command(request))
                [again] = read_frames(peer, 1)
                assert again.code == ResponseCode.TOPIC_NOT_EXIST
            assert read_frames(sock, 1) == []  # then closed
            assert read_frames(upstream, 1) == []
        assert proc.wait(timeout=20) == 0
        log = proc.stderr.read()  # type: ignore[union-attr]
        assert (
            "GoAway sent to the connections that use route push: 1 of 2; closing in 300 ms" in log
        )
    finally:
        proc.kill()


def test_help_shows_upstreams_dash_c_beside_config(capsys):
    from namesrv.cli import main

    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    assert "-c FILE, --config FILE" in capsys.readouterr().out


def test_bad_config_is_refused_with_the_key_named(tmp_path):
    config = tmp_path / "bad.toml"
    config.write_text("[push]\ntick_interval_ms = 5\n")
    proc = spawn_namesrv("--config", str(config))
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert "push.tick_interval_ms" in err


def test_unknown_listen_address_is_refused():
    proc = spawn_namesrv("--listen", "nowhere")
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert "nowhere" in err


@pytest.mark.parametrize(
    ("toml", "named"),
    [
        ("[server]\nmax_connections = 0\n", "server.max_connections"),
        ("[server]\noutput_buffer_bytes = 100\n", "server.output_buffer_bytes"),
        ("[registry]\nmax_total_topics = 0\n", "registry.max_total_topics"),
        ("[server]\nmax_connections_per_host = 0\n", "server.max_connections_per_host"),
        ("[server]\nidle_timeout_ms = 5\n", "server.idle_timeout_ms"),
        ('[server]\ngo_away_alternatives = ["nowhere"]\n', "go_away_alternatives"),
        ("[pressure]\nmemory_high_percent = 150.0\n", "pressure.memory_high_percent"),
        ("[pressure]\nsample_interval_ms = 1\n", "pressure.sample_interval_ms"),
        ("[registry]\nmax_queue_nums = 1024\n", "registry.max_queue_nums is internal tuning"),
        ("[push]\nmax_subscriptions_per_host = 2000000\n", "push.max_subscriptions_per_host"),
        ("[journal]\nmax_total_bytes = 10\n", "journal.max_total_bytes"),
    ],
)
def test_out_of_range_values_exit_2_naming_the_key(tmp_path, capsys, toml, named):
    from namesrv.cli import main

    config = tmp_path / "bad.toml"
    config.write_text(toml)
    assert main(["--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("namesrv: ") and named in err


def test_unusable_paths_and_a_corrupt_kv_file_exit_2_before_serving(tmp_path, capsys):
    from namesrv.cli import main

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    kv = tmp_path / "kvConfig.json"
    kv.write_text('{"configTable": {"ns": ')
    cases = [
        (f'[journal]\ndirectory = "{blocker}/journal"\n', "journal.directory"),
        (f'[registry]\nkv_config_path = "{tmp_path}"\n', "is a directory"),
        (f'[registry]\nkv_config_path = "{kv}"\n', "is corrupt"),
    ]
    for toml, named in cases:
        config = tmp_path / "bad.toml"
        config.write_text(toml)
        assert main(["--config", str(config)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("namesrv: ") and named in err
        assert "Traceback" not in err


def test_running_out_of_file_descriptors_is_logged_once_per_episode(tmp_path):
    import resource

    def low_fd_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))

    config = tmp_path / "namesrv.toml"
    config.write_text("[pressure]\nsample_interval_ms = 100\n")
    proc = spawn_namesrv(
        "--listen", "127.0.0.1:0", "--config", str(config), preexec_fn=low_fd_limit
    )
    try:
        port = bound_port(proc)
        socks = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(100)]
        seen = []
        for line in proc.stderr:  # type: ignore[union-attr]
            seen.append(line)
            if "out of file descriptors" in line:
                break
        for sock in socks:
            sock.close()
        request = encode_command(RemotingCommand.request(RequestCode.GET_BROKER_CLUSTER_INFO))
        answers: list[RemotingCommand] = []
        while not answers:  # served again once the descriptors are back
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                try:
                    sock.sendall(request)
                    answers = read_frames(sock, 1)
                except ConnectionError:
                    continue
        assert answers[0].code == ResponseCode.SUCCESS
        proc.send_signal(signal.SIGTERM)
        rest = proc.communicate(timeout=20)[1]
        err = "".join(seen) + rest
    finally:
        proc.kill()
    assert err.count("out of file descriptors") == 1, err
    assert "accepting connections again" in err
    assert "Traceback" not in err


def test_the_audit_log_file_holds_the_audit_trail_and_nothing_else(tmp_path):
    config = tmp_path / "namesrv.toml"
    config.write_text('[server]\nwait_for_service_ms = 0\n[registry]\nkv_config_path = ""\n')
    audit = tmp_path / "audit.log"
    proc = spawn_namesrv(
        "--listen", "127.0.0.1:0", "--config", str(config), "--audit-log", str(audit)
    )
    try:
        port = bound_port(proc)
        with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
            for opaque, (key, value) in enumerate([("k1", "v1"), ("k2", "x\ny")], 1):
                ext = {"namespace": "ns1", "key": key, "value": value}
                put = RemotingCommand.request(RequestCode.PUT_KV_CONFIG, ext, opaque=opaque)
                sock.sendall(encode_command(put))
                assert read_frames(sock, 1)[0].code == ResponseCode.SUCCESS
            host, port_seen = sock.getsockname()
            peer = f"{host}:{port_seen}"
        proc.send_signal(signal.SIGTERM)
        err = proc.communicate(timeout=20)[1]
    finally:
        proc.kill()
    lines = audit.read_text().splitlines()
    assert [line.split(" ", 2)[2] for line in lines] == [
        f"INFO namesrv.audit: kv put: namespace=ns1 key=k1 value=v1 peer={peer}",
        f"INFO namesrv.audit: kv put: namespace=ns1 key=k2 value=x\\ny peer={peer}",
    ]
    assert lines[0] in err  # and on stderr, with every other line


def test_the_audit_log_takes_info_lines_when_stderr_takes_warnings_only(tmp_path):
    from namesrv.cli import write_audit_log

    root = logging.getLogger()
    audit = logging.getLogger(AUDIT_LOGGER)
    before = root.level, audit.level
    root.setLevel(logging.WARNING)
    handler = write_audit_log(str(tmp_path / "audit.log"))
    try:
        audit.info("a line of the trail")
        logging.getLogger("namesrv.server").info("not of the trail")
    finally:
        audit.removeHandler(handler)
        handler.close()
        root.setLevel(before[0])
        audit.setLevel(before[1])
    [line] = (tmp_path / "audit.log").read_text().splitlines()
    assert line.endswith("INFO namesrv.audit: a line of the trail")


def test_an_audit_log_that_cannot_be_opened_exits_2_naming_it(tmp_path, capsys):
    from namesrv.cli import main

    config = tmp_path / "namesrv.toml"
    config.write_text('[registry]\nkv_config_path = ""\n')
    missing = tmp_path / "no-such-dir" / "audit.log"
    assert main(["--config", str(config), "--audit-log", str(missing)]) == 2
    assert f"--audit-log {missing}: cannot open it" in capsys.readouterr().err


ALLOCATOR_PROBE = """
import ctypes, sys
from namesrv.cli import tune_allocator

class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]

libc = ctypes.CDLL(None)
try:
    libc.mallinfo2.restype = Info
except AttributeError:
    sys.exit(3)  # glibc < 2.33
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
if sys.argv[1] == "tuned":
    assert tune_allocator()
else:  # glibc's starting mmap threshold, held fixed: the control the probe must tell apart
    assert libc.mallopt(-3, 128 << 10)
info = libc.mallinfo2
libc.free(libc.malloc(15 << 20))  # one register's body, dropped
heap = info().arena
again = libc.malloc(15 << 20)  # the next register's
fresh = info().hblkhd + info().arena - heap  # bytes newly mapped for it
libc.free(again)
huge = libc.malloc(40 << 20)  # above any threshold: mapped, and unmapped when freed
held = info().hblkhd
libc.free(huge)
print(fresh, held - info().hblkhd)
"""


@pytest.mark.parametrize("mode", ["low_mmap_threshold", "tuned"])
def test_the_allocator_reuses_frame_sized_buffers_and_unmaps_larger_ones(mode):
    run = subprocess.run(
        [sys.executable, "-c", ALLOCATOR_PROBE, mode],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
    )
    if run.returncode == 3 or (run.returncode != 0 and "tune_allocator" in run.stderr):
        pytest.skip("not glibc >= 2.33")
    assert run.returncode == 0, run.stderr
    fresh, released = map(int, run.stdout.split())
    assert released >= 40 << 20
    if mode == "tuned":
        assert fresh < 1 << 20  # the second body reused the first one's pages
    else:
        assert fresh >= 15 << 20  # mapped (and faulted) anew for every body


# -- -p / --print-config, --check-config, --version ---------------------------------------------


def test_print_config_of_a_toml_file_is_the_effective_config_and_loads_back(tmp_path, capsys):
    from namesrv.cli import main
    from namesrv.config_file import load

    config = tmp_path / "namesrv.toml"
    config.write_text(
        '[server]\nlisten = "127.0.0.1:9999"\n[push]\ntick_interval_ms = 250\n'
        '[registry]\nkv_config_path = ":memory:"\n[metrics]\nbearer_token = "hunter2"\n'
    )
    assert main(["-p", "-c", str(config), "--metrics", "127.0.0.1:9100"]) == 0
    out = capsys.readouterr().out
    assert f"# effective config of {config}" in out
    assert 'listen = "127.0.0.1:9999"' in out and "tick_interval_ms = 250" in out
    assert 'listen = "127.0.0.1:9100"' in out  # the command line's --metrics applied
    assert "hunter2" not in out and 'bearer_token = "********"' in out
    printed = tmp_path / "printed.toml"
    printed.write_text(out.replace('"********"', '"hunter2"'))
    effective = load(config)
    assert load(printed).push == effective.push and load(printed).registry == effective.registry


def test_print_config_of_a_properties_file_uses_upstreams_keys(tmp_path, capsys):
    from namesrv.cli import main

    config = tmp_path / "namesrv.properties"
    config.write_text("listenPort=9877\norderMessageEnable=true\nkvConfigPath=:memory:\n")
    assert main(["--print-config", "--config", str(config)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "listenPort=9877" in lines and "orderMessageEnable=true" in lines
    assert "kvConfigPath=:memory:" in lines
    assert not any(line.startswith("[") for line in lines)


def test_print_config_without_a_file_prints_the_commented_defaults(capsys):
    from namesrv.cli import default_config_text, main

    assert main(["-p"]) == 0
    assert capsys.readouterr().out == default_config_text()


def test_print_config_of_a_bad_file_exits_2_naming_the_key(tmp_path, capsys):
    from namesrv.cli import main

    config = tmp_path / "bad.toml"
    config.write_text("[push]\ntick_interval_msec = 5\n")
    assert main(["-p", "-c", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("namesrv: ") and "tick_interval_ms" in err


def test_check_config_exits_0_for_a_usable_file_and_creates_nothing(tmp_path, capsys):
    from namesrv.cli import main

    state = tmp_path / "not-yet" / "kv.json"
    config = tmp_path / "namesrv.toml"
    config.write_text(f'[registry]\nkv_config_path = "{state}"\n')
    assert main(["--check-config", str(config)]) == 0
    assert "is a usable config (TOML)" in capsys.readouterr().out
    assert not state.parent.exists()


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("[push]\ntick_interval_ms = 5\n", "push.tick_interval_ms"),
        ("[server]\nlisen = 1\n", "did you mean"),
        ('[journal]\ndirectory = "{blocker}/journal"\n', "journal.directory"),
        ('[server]\ntls = "enforcing"\n', "tls_cert_file"),
    ],
)
def test_check_config_exits_2_with_the_reason(tmp_path, capsys, text, named):
    from namesrv.cli import main

    blocker = tmp_path / "a-file"
    blocker.write_text("")
    config = tmp_path / "bad.toml"
    config.write_text(text.format(blocker=blocker))
    assert main(["--check-config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("namesrv: ") and named in err


def test_check_config_of_a_properties_file(tmp_path, capsys):
    from namesrv.cli import main

    config = tmp_path / "namesrv.properties"
    config.write_text("listenPort=9877\nkvConfigPath=:memory:\n")
    assert main(["--check-config", str(config)]) == 0
    assert "(namesrv.properties)" in capsys.readouterr().out
    config.write_text("listenPrt=9877\n")
    assert main(["--check-config", str(config)]) == 2
    assert "did you mean listenPort" in capsys.readouterr().err
