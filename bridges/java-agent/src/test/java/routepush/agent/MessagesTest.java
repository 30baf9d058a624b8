package routepush.agent;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.util.Arrays;
import java.util.Random;
import org.junit.Test;

public class MessagesTest {
    /** The example bytes of docs/protocol-extension.md: topic T at version 3, sequence 1, epoch e1. */
    private static final byte[] EXAMPLE = bytes(
            0x0a, 0x05, 0x0a, 0x01, 0x54, 0x10, 0x03, 0x18, 0xe8, 0x07, 0x22, 0x02, 0x65, 0x31, 0x10, 0x01);

    @Test
    public void theContractsExampleNotificationReads() throws Exception {
        Messages.Notify n = Messages.notify(EXAMPLE);
        assertEquals(1, n.sequence);
        assertEquals("e1", n.epoch);
        assertEquals(1, n.changes.size());
        assertEquals("T", n.changes.get(0).topic);
        assertEquals(3, n.changes.get(0).version);
    }

    @Test
    public void brokerEntriesAndUnknownFieldsRead() throws Exception {
        byte[] step = new Proto.Writer().string(1, "T").uint(2, 9).uint(3, 8).toByteArray();
        byte[] broker = new Proto.Writer().uint(1, Messages.BROKER_ARRIVED).string(2, "broker-b")
                .bytes(8, step).uint(9, 250).uint(99, 1).toByteArray();
        byte[] body = new Proto.Writer().bytes(5, broker).uint(2, 4).string(4, "e").string(77, "future")
                .toByteArray();
        Messages.Notify n = Messages.notify(body);
        assertEquals(4, n.sequence);
        Messages.BrokerChange b = n.brokers.get(0);
        assertEquals("broker-b", b.brokerName);
        assertEquals(Messages.BROKER_ARRIVED, b.kind);
        assertEquals(250, b.refetchWindowMs);
        assertEquals("T", b.topics.get(0).topic);
        assertEquals(9, b.topics.get(0).version);
    }

    @Test
    public void aSubscribeCarriesTopicsAndClientId() throws Exception {
        byte[] body = Messages.subscribe(Arrays.asList("A", "B"), "c@1");
        Proto.Reader r = new Proto.Reader(body);
        StringBuilder seen = new StringBuilder();
        for (int f = r.next(); f != 0; f = r.next()) {
            seen.append(f).append('=').append(r.string()).append(' ');
        }
        assertEquals("1=A 1=B 2=c@1 ", seen.toString());
    }

    @Test
    public void anAckReads() throws Exception {
        byte[] tv = new Proto.Writer().string(1, "A").uint(2, 12).uint(3, 1).toByteArray();
        Messages.Ack ack = Messages.ack(new Proto.Writer().bytes(1, tv).string(2, "ep").toByteArray());
        assertEquals("ep", ack.epoch);
        assertEquals(12, ack.topics.get(0).version);
        assertTrue(ack.topics.get(0).exists);
    }

    @Test
    public void truncatedBodiesAreMalformedNeverAnotherError() {
        for (int cut = 1; cut < EXAMPLE.length; cut++) {
            try {
                Messages.notify(Arrays.copyOf(EXAMPLE, cut));
            } catch (Proto.Malformed e) {
                continue;
            } catch (RuntimeException e) {
                fail("cut " + cut + ": " + e);
            }
        }
    }

    @Test
    public void randomBytesAreReadOrRefusedWithoutAnyOtherError() {
        Random random = new Random(42);
        for (int i = 0; i < 20_000; i++) {
            byte[] body = new byte[random.nextInt(64)];
            random.nextBytes(body);
            for (int kind = 0; kind < 3; kind++) {
                try {
                    if (kind == 0) {
                        Messages.notify(body);
                    } else if (kind == 1) {
                        Messages.ack(body);
                    } else {
                        Messages.goAway(body);
                    }
                } catch (Proto.Malformed e) {
                    // refused: fine
                } catch (RuntimeException e) {
                    fail(Arrays.toString(body) + ": " + e);
                }
            }
        }
    }

    @Test(expected = Proto.Malformed.class)
    public void aLengthPastTheEndIsRefused() throws Exception {
        Messages.notify(bytes(0x0a, 0xff, 0xff, 0xff, 0xff, 0x07));
    }

    private static byte[] bytes(int... values) {
        byte[] out = new byte[values.length];
        for (int i = 0; i < values.length; i++) {
            out[i] = (byte) values[i];
        }
        return out;
    }
}
