"""How the report names a client: by the id and host its telemetry carries."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pyspark")

from namesrv_pipeline.spark.client_names import client_labels, label


def test_a_client_is_named_by_its_id_and_host():
    line = json.dumps({"topic": "T", "client_id": "orders-7", "host": "app-3"}).encode()
    assert label(line, "file:/var/log/client-1.jsonl") == "orders-7 (app-3)"
    # the default id, host@pid, names its host already
    line = json.dumps({"topic": "T", "client_id": "app-3@4411", "host": "app-3"}).encode()
    assert label(line, "file:/var/log/client-1.jsonl") == "app-3@4411"


@pytest.mark.parametrize("line", [b'{"topic":"T"}', b"not json", b"[1]", b'{"client_id":""}'])
def test_a_file_without_an_id_is_named_by_its_file(line):
    assert label(line, "file:/var/log/client-1.jsonl") == "client-1.jsonl"


def test_two_files_with_one_id_are_told_apart_by_their_files(spark, tmp_path):
    same = json.dumps({"client_id": "svc", "host": "h"}) + "\n"
    for name in ("a.jsonl", "b.jsonl"):
        (tmp_path / name).write_text(same)
    (tmp_path / "c d.jsonl").write_text(json.dumps({"client_id": "other"}) + "\n")
    files = [(tmp_path / n).as_uri() for n in ("a.jsonl", "b.jsonl", "c d.jsonl")]
    assert list(client_labels(spark, files).values()) == [
        "svc (h) [a.jsonl]",
        "svc (h) [b.jsonl]",
        "other",
    ]
