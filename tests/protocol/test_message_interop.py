"""SEND_MESSAGE_V2 against upstream's own Java code (rocketmq 5.3.3), both ways.

Our frame goes through ``RemotingCommand.decode`` and ``SendMessageRequestHeaderV2``, as a
broker reads it; the body through upstream's decompressor and the properties through
``MessageDecoder.string2messageProperties`` into a ``Message``, as a consumer gets it; the unique
key through ``MessageClientIDSetter``. And upstream's ``DefaultMQProducer``, routed by our name
server, sends to the broker stand-in: it must send the header fields and properties we send and
accept the stand-in's answer. Needs Java 17+ and ``ROCKETMQ_LIB_DIR`` naming a directory of
RocketMQ 5.x jars (rocketmq-client and its dependencies, e.g. rocketmq-tools 5.3.3 copied with
``mvn dependency:copy-dependencies``); skipped otherwise.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import pytest_twisted
from support import apache_rocketmq as apache
from support.process_output import Collect
from twisted.internet import reactor

from namesrv_sandbox.standin import BrokerStandIn
from protocol.frame import RemotingCommand, encode_command
from protocol.message import MessageIdGenerator, decode_properties, encode_message, send_header

pytestmark = pytest.mark.interop

READER = """
import java.nio.ByteBuffer;
import java.nio.file.*;
import java.util.*;
import org.apache.rocketmq.common.compression.CompressorFactory;
import org.apache.rocketmq.common.message.*;
import org.apache.rocketmq.common.sysflag.MessageSysFlag;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.remoting.protocol.header.*;

public class ReadSend {
    public static void main(String[] args) throws Exception {
        byte[] frame = Files.readAllBytes(Paths.get(args[0]));
        RemotingCommand cmd = RemotingCommand.decode(
            ByteBuffer.wrap(frame, 4, frame.length - 4).slice());
        SendMessageRequestHeaderV2 v2 = (SendMessageRequestHeaderV2)
            cmd.decodeCommandCustomHeader(SendMessageRequestHeaderV2.class);
        SendMessageRequestHeader h =
            SendMessageRequestHeaderV2.createSendMessageRequestHeaderV1(v2);
        byte[] body = cmd.getBody();
        if ((h.getSysFlag() & MessageSysFlag.COMPRESSED_FLAG) != 0) {
            body = CompressorFactory
                .getCompressor(MessageSysFlag.getCompressionType(h.getSysFlag()))
                .decompress(body);
        }
        Message m = new Message(h.getTopic(), body);
        MessageAccessor.setProperties(
            m, MessageDecoder.string2messageProperties(h.getProperties()));
        String uniq = MessageClientIDSetter.getUniqID(m);
        System.out.println("code\\t" + cmd.getCode());
        System.out.println("group\\t" + h.getProducerGroup());
        System.out.println("topic\\t" + m.getTopic());
        System.out.println("queueId\\t" + h.getQueueId());
        System.out.println("bornTimestamp\\t" + h.getBornTimestamp());
        System.out.println("brokerName\\t" + h.getBrokerName());
        System.out.println("batch\\t" + h.isBatch());
        System.out.println("body\\t" + Base64.getEncoder().encodeToString(m.getBody()));
        System.out.println("tags\\t" + m.getTags());
        String keys = String.join(",", m.getKeys().split(MessageConst.KEY_SEPARATOR));
        System.out.println("keys\\t" + keys);
        System.out.println("wait\\t" + m.isWaitStoreMsgOK());
        System.out.println("uniq\\t" + uniq);
        System.out.println("ip\\t" + MessageClientIDSetter.getIPStrFromID(uniq));
        System.out.println("pid\\t" + MessageClientIDSetter.getPidFromID(uniq));
        System.out.println("user.color\\t" + m.getUserProperty("color"));
        System.out.println("user.emoji\\t" + m.getUserProperty("emoji"));
    }
}
"""


def classpath() -> str:
    """RocketMQ 5.x jars from ``ROCKETMQ_LIB_DIR`` or the jar cache (as the interop tests)."""
    lib = apache.LIB
    if not lib or not Path(lib).is_dir() or not shutil.which("java"):
        pytest.skip("set ROCKETMQ_LIB_DIR to a directory of RocketMQ 5.x jars (and have Java)")
    if not any(Path(lib).glob("rocketmq-client-*.jar")):
        pytest.skip(f"no rocketmq-client jar in {lib}")
    return str(Path(lib) / "*")


def read_with_upstream(tmp_path: Path, frame: bytes) -> dict[str, str]:
    cp = classpath()
    (tmp_path / "ReadSend.java").write_text(READER)
    (tmp_path / "frame.bin").write_bytes(frame)
    done = subprocess.run(
        ["java", "-cp", cp, str(tmp_path / "ReadSend.java"), str(tmp_path / "frame.bin")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(line.split("\t", 1) for line in done.stdout.splitlines() if "\t" in line)


@pytest.mark.parametrize("size", [11, 50_000])
def test_upstreams_broker_and_consumer_classes_read_our_message_intact(tmp_path, size):
    body = (b"payload-" * (size // 8 + 1))[:size]
    ids = MessageIdGenerator(bytes([192, 168, 7, 9]), pid=4242, salt=99)
    uniq = ids.next_id(1_763_856_000_123)
    msg = encode_message(
        "TopicTest",
        body,
        keys=["order-1", "user-7"],
        tags="TagA",
        properties={"color": "red", "emoji": "é✓"},
        uniq_key=uniq,
    )
    assert bool(msg.sys_flag & 1) == (size >= 4096)
    header = send_header(
        msg, producer_group="pg", queue_id=3, broker_name="broker-a", born_timestamp_ms=1_700
    )
    frame = encode_command(RemotingCommand.request(310, header.to_wire(), msg.body))
    got = read_with_upstream(tmp_path, frame)
    assert got["code"] == "310" and got["group"] == "pg" and got["topic"] == "TopicTest"
    assert (got["queueId"], got["bornTimestamp"], got["brokerName"]) == ("3", "1700", "broker-a")
    assert got["batch"] == "false" and got["wait"] == "true"
    assert base64.b64decode(got["body"]) == body
    assert got["tags"] == "TagA" and got["keys"] == "order-1,user-7"
    assert got["user.color"] == "red" and got["user.emoji"] == "é✓"
    assert got["uniq"] == uniq and got["ip"] == "192.168.7.9" and got["pid"] == "4242"


JAVA_PRODUCER = """
import org.apache.rocketmq.client.producer.*;
import org.apache.rocketmq.common.message.Message;

public class JavaSend {
    public static void main(String[] args) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer("java-pg");
        producer.setNamesrvAddr(args[0]);
        // Hang guards, not measures: this checks bytes, and on a loaded machine the client's
        // start-up and route fetch can take most of a short send budget.
        producer.setSendMsgTimeout(120000);
        producer.setMqClientApiTimeout(60000);
        int code = 1;
        try {
            producer.start();
            Message m = new Message("T", "TagJ", "kj1 kj2", "hello from java".getBytes("UTF-8"));
            m.putUserProperty("color", "blue");
            SendResult r = producer.send(m);
            System.out.println("status\\t" + r.getSendStatus());
            System.out.println("msgId\\t" + r.getMsgId());
            System.out.println("offsetMsgId\\t" + r.getOffsetMsgId());
            System.out.println("queueOffset\\t" + r.getQueueOffset());
            System.out.println("broker\\t" + r.getMessageQueue().getBrokerName());
            code = 0;
        } catch (Exception e) {
            e.printStackTrace();
        } finally {
            producer.shutdown();
        }
        // A failed send leaves the client's non-daemon threads running: exit either way.
        System.exit(code);
    }
}
"""


@pytest_twisted.ensureDeferred
async def test_upstreams_java_producer_writes_what_we_write_and_reads_the_stand_ins_answer(
    cluster, tmp_path
):
    cp = classpath()
    (tmp_path / "JavaSend.java").write_text(JAVA_PRODUCER)
    _server, port = cluster.start_server()
    broker = BrokerStandIn(
        "broker-j", {"T": 4}, [f"127.0.0.1:{port}"], reactor=reactor, clock=cluster.clock
    )
    await broker.start()
    out = Collect()
    reactor.spawnProcess(  # type: ignore[attr-defined]
        out,
        shutil.which("java") or "java",
        ["java", "-cp", cp, str(tmp_path / "JavaSend.java"), f"127.0.0.1:{port}"],
        env=dict(os.environ),
    )
    try:
        code = await out.ended
    finally:
        await broker.kill()
    assert code == 0, out.err.decode()[-3000:]
    answer = dict(line.split("\t", 1) for line in out.out.decode().splitlines() if "\t" in line)
    assert answer["status"] == "SEND_OK" and answer["broker"] == "broker-j"
    assert answer["queueOffset"] == "0"
    got = broker.messages[-1]
    assert got.body == b"hello from java" and got.tags == "TagJ"
    assert got.keys == ("kj1", "kj2") and got.properties["color"] == "blue"
    assert got.uniq_key == answer["msgId"] and got.producer_group == "java-pg"
    # the header fields upstream's producer sends are the ones we send
    ours = send_header(
        encode_message("T", b"x", uniq_key="U"),
        producer_group="pg",
        queue_id=0,
        broker_name="broker-j",
        born_timestamp_ms=0,
    ).to_wire()
    assert set(broker.last_send_fields) == set(ours)
    java_props = set(got.properties) - {"color"}
    ours_props = set(decode_properties(ours["i"]))
    assert java_props == ours_props | {"KEYS", "TAGS"}
