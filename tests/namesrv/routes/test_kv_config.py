"""KVConfig: upstream KVConfigManager semantics and kvConfig.json persistence."""

from __future__ import annotations

import json
import os
import sys
import threading
import tracemalloc

import pytest

from namesrv.routes.kv_config import ENTRY_SLOT_BYTES, NAMESPACE_BYTES, KVConfig
from protocol import peer_text


def test_put_get_list_delete_round_trip():
    changes: list[tuple[str, str]] = []
    kv = KVConfig(on_change=lambda ns, k: changes.append((ns, k)))
    kv.put("ORDER_TOPIC_CONFIG", "T1", "broker-a:4")
    kv.put("ORDER_TOPIC_CONFIG", "T2", "broker-b:8")
    assert kv.get("ORDER_TOPIC_CONFIG", "T1") == "broker-a:4"
    assert kv.get("ORDER_TOPIC_CONFIG", "nope") is None
    assert kv.get("nope", "T1") is None
    assert kv.list_namespace("ORDER_TOPIC_CONFIG") == {"T1": "broker-a:4", "T2": "broker-b:8"}
    kv.delete("ORDER_TOPIC_CONFIG", "T1")
    assert kv.get("ORDER_TOPIC_CONFIG", "T1") is None
    assert changes == [
        ("ORDER_TOPIC_CONFIG", "T1"),
        ("ORDER_TOPIC_CONFIG", "T2"),
        ("ORDER_TOPIC_CONFIG", "T1"),
    ]


def test_list_namespace_is_none_when_absent_or_emptied_and_a_copy_otherwise():
    kv = KVConfig()
    assert kv.list_namespace("ns") is None
    kv.put("ns", "k", "v")
    listed = kv.list_namespace("ns")
    listed["k"] = "changed"
    assert kv.get("ns", "k") == "v"
    kv.delete("ns", "k")
    assert kv.list_namespace("ns") is None


def test_only_real_changes_are_reported():
    changes: list[tuple[str, str]] = []
    kv = KVConfig(on_change=lambda ns, k: changes.append((ns, k)))
    kv.put("ns", "k", "v")
    kv.put("ns", "k", "v")  # same value
    kv.delete("ns", "absent")
    kv.delete("other", "k")
    assert changes == [("ns", "k")]
    kv.put("ns", "k", "v2")
    assert changes == [("ns", "k"), ("ns", "k")]


@pytest.mark.parametrize(("namespace", "key"), [("", "k"), ("ns", "")])
def test_empty_namespace_or_key_is_refused_with_the_values(namespace, key):
    kv = KVConfig()
    with pytest.raises(ValueError, match="must not be empty") as info:
        kv.put(namespace, key, "v")
    assert repr(namespace) in str(info.value) and repr(key) in str(info.value)
    assert kv.list_namespace(namespace) is None


def test_save_writes_upstream_kvconfig_json_and_load_reads_it_back(tmp_path):
    path = str(tmp_path / "kvConfig.json")
    kv = KVConfig()
    kv.put("ns1", "a", "1")
    kv.put("ns2", "b", "two words")
    kv.save(path)
    assert json.loads((tmp_path / "kvConfig.json").read_text()) == {
        "configTable": {"ns1": {"a": "1"}, "ns2": {"b": "two words"}}
    }
    again = KVConfig()
    again.load(path)
    assert again.list_namespace("ns1") == {"a": "1"}
    assert again.get("ns2", "b") == "two words"


def test_missing_file_loads_as_empty_and_is_created_on_first_change(tmp_path):
    path = tmp_path / "sub" / "kvConfig.json"
    kv = KVConfig()
    kv.load(str(path))
    assert kv.list_namespace("ns") is None
    assert not path.exists()
    kv.put("ns", "k", "v")
    assert kv.flush(10)
    assert json.loads(path.read_text()) == {"configTable": {"ns": {"k": "v"}}}


def test_put_and_delete_persist_once_a_path_is_loaded(tmp_path):
    path = tmp_path / "kvConfig.json"
    path.write_text(json.dumps({"configTable": {"keep": {"x": "1"}}}))
    kv = KVConfig(path=str(path))  # the constructor loads, so the file is never clobbered
    kv.put("ns", "k", "v")
    assert kv.flush(10)
    assert json.loads(path.read_text())["configTable"] == {"keep": {"x": "1"}, "ns": {"k": "v"}}
    kv.delete("keep", "x")
    assert kv.flush(10)
    assert json.loads(path.read_text())["configTable"] == {"ns": {"k": "v"}}
    assert KVConfig(path=str(path)).get("ns", "k") == "v"


def test_without_a_path_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    kv = KVConfig()
    kv.put("ns", "k", "v")
    kv.save()
    assert os.listdir(tmp_path) == []


def test_save_replaces_atomically_and_leaves_no_temp_file(tmp_path):
    path = tmp_path / "kvConfig.json"
    path.write_text("old contents")
    kv = KVConfig()
    kv.put("ns", "k", "v")
    kv.save(str(path))
    assert os.listdir(tmp_path) == ["kvConfig.json"]
    assert json.loads(path.read_text()) == {"configTable": {"ns": {"k": "v"}}}


def test_failed_persist_keeps_the_change_in_memory_and_counts_it(tmp_path):
    target = tmp_path / "kvConfig.json"
    changes: list[tuple[str, str]] = []
    kv = KVConfig(on_change=lambda ns, k: changes.append((ns, k)), path=str(target))
    target.mkdir()  # os.replace onto a directory fails
    kv.put("ns", "k", "v")
    assert kv.get("ns", "k") == "v"
    assert kv.flush(10)
    assert kv.persist_failures == 1
    assert changes == [("ns", "k")]
    assert sorted(os.listdir(tmp_path)) == ["kvConfig.json"]  # the temp file was cleaned up


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"\xff\xfe garbage",
        b"[1, 2]",
        b'{"configTable": [1]}',
        b'{"configTable": {"ns": "flat"}}',
        b'{"configTable": {"ns": {"k": 1}}}',
    ],
)
def test_corrupt_file_raises_value_error_naming_the_path(tmp_path, content):
    path = tmp_path / "kvConfig.json"
    path.write_bytes(content)
    kv = KVConfig()
    kv.put("ns", "k", "v")
    with pytest.raises(ValueError, match="is corrupt") as info:
        kv.load(str(path))
    assert str(path) in str(info.value)
    assert kv.get("ns", "k") == "v" and kv.path is None  # nothing replaced, nothing to clobber
    assert path.read_bytes() == content


def test_file_without_config_table_is_empty(tmp_path):
    path = tmp_path / "kvConfig.json"
    path.write_text("{}")
    kv = KVConfig(path=str(path))
    assert kv.list_namespace("ns") is None


def test_puts_past_the_byte_bound_are_refused_and_deletes_free_room(tmp_path):
    path = tmp_path / "kv.json"
    entry = sys.getsizeof("a") + sys.getsizeof("x" * 40) + ENTRY_SLOT_BYTES
    bound = sys.getsizeof("ns") + NAMESPACE_BYTES + 2 * entry
    kv = KVConfig(path=str(path), max_bytes=bound)
    kv.put("ns", "a", "x" * 40)
    kv.put("ns", "b", "y" * 40)
    assert kv.size_bytes == bound
    with pytest.raises(ValueError, match=f"max_kv_config_bytes={bound}"):
        kv.put("ns", "c", "z" * 40)
    assert kv.get("ns", "c") is None
    kv.put("ns", "a", "x")  # a smaller value takes less room ...
    with pytest.raises(ValueError):
        kv.put("ns", "c", "z" * 40)  # ... but not a slot's worth
    kv.delete("ns", "b")
    kv.put("ns", "c", "z" * 40)
    assert kv.size_bytes == bound - (sys.getsizeof("x" * 40) - sys.getsizeof("x"))
    assert kv.flush(10)
    assert KVConfig(path=str(path), max_bytes=bound).size_bytes == kv.size_bytes
    kv.delete("ns", "a")
    kv.delete("ns", "c")
    assert kv.size_bytes == 0


def test_many_tiny_entries_cost_their_memory_not_their_text():
    """The attacker's shape: PUT_KV_CONFIG of tiny keys and values until refused. What the
    table allocates stays within a small factor of the bound (measured by tracemalloc, so
    the figure is the table's own, whatever the process around it does)."""
    bound = 4 * 1024 * 1024
    kv = KVConfig(max_bytes=bound)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        i = 0
        with pytest.raises(ValueError, match="max_kv_config_bytes"):
            while True:
                kv.put("ns", f"{i:x}", str(i))
                i += 1
        held = tracemalloc.get_traced_memory()[0] - before
        kv.listing("ns")  # the encoded listing, kept until the namespace changes
        with_listing = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kv.size_bytes <= bound
    assert i > 20_000  # the refusal came from the bound, after real work
    assert held <= 1.2 * bound, (held, bound, i)
    assert with_listing <= 1.5 * bound, (with_listing, bound, i)


def test_a_listing_is_encoded_once_per_change_of_its_namespace_in_upstreams_form():
    kv = KVConfig()
    for i in range(3):
        kv.put("ns", f"k{i}", f"v\u00e9{i}")
    kv.put("other", "k", "v")
    body = kv.listing("ns")
    assert body == peer_text.dumps(
        {"table": {"k0": "v\u00e90", "k1": "v\u00e91", "k2": "v\u00e92"}}
    )
    assert kv.listing("ns") is body and kv.listing_builds == 1
    kv.put("other", "k", "w")  # another namespace: this listing stands
    assert kv.listing("ns") is body
    kv.put("ns", "k3", "v")
    assert kv.listing("ns") is not body and kv.listing_builds == 2
    assert kv.listing("absent") is None


def test_file_writes_are_coalesced_and_the_last_change_always_lands(tmp_path):
    path = tmp_path / "kvConfig.json"
    kv = KVConfig(path=str(path))
    for i in range(2_000):
        kv.put("ns", "k", str(i))
    assert kv.close(10)
    assert kv.file_writes < 2_000  # one write in flight, one owed, however fast the puts
    assert json.loads(path.read_text())["configTable"] == {"ns": {"k": "1999"}}
    assert os.listdir(tmp_path) == ["kvConfig.json"]


def test_the_file_is_written_on_the_writers_thread_not_the_callers(tmp_path, monkeypatch):
    import namesrv.ops.state_file as state_file

    threads: list[str] = []
    real = state_file.write_atomically

    def spy(path, chunks):
        threads.append(threading.current_thread().name)
        real(path, chunks)

    monkeypatch.setattr(state_file, "write_atomically", spy)
    kv = KVConfig(path=str(tmp_path / "kvConfig.json"))
    kv.put("ns", "k", "v")
    assert kv.flush(10)
    assert threads and threading.current_thread().name not in threads
