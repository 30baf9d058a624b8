package routepush.agent;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;

import org.junit.Test;

public class FrameInboxTest {
    private static final int MIB = 1 << 20;

    /** 1,024 frames of 8 MiB once reached 514 MB of the application's heap: now none is kept. */
    @Test
    public void framesOverTheFrameBoundAreNeverKept() {
        Options o = Options.defaults();
        FrameInbox inbox = new FrameInbox(o.maxPendingNotifications, o.maxPendingBytes, o.maxFrameBytes);
        byte[] big = new byte[8 * MIB];
        for (int i = 0; i < 1024; i++) {
            inbox.offer(this, Messages.NOTIFY, big);
        }
        assertEquals(0, inbox.size());
        assertEquals(0, inbox.peakBytes());
        assertEquals(1024, inbox.oversized());
        assertEquals(1024, inbox.takeLost());
        assertEquals(0, inbox.takeLost());
    }

    @Test
    public void whatWaitsIsBoundedInBytesNotOnlyInCount() {
        Options o = Options.defaults();
        FrameInbox inbox = new FrameInbox(o.maxPendingNotifications, o.maxPendingBytes, o.maxFrameBytes);
        byte[] large = new byte[o.maxFrameBytes];
        for (int i = 0; i < 1024; i++) {
            inbox.offer(this, Messages.NOTIFY, large);
        }
        assertTrue(inbox.peakBytes() <= o.maxPendingBytes);
        assertEquals(3, inbox.size());
        assertEquals(1021, inbox.dropped());
        assertEquals(1021, inbox.takeLost());
    }

    @Test
    public void whatWaitsIsBoundedInCount() {
        FrameInbox inbox = new FrameInbox(10, 1 << 20, 1024);
        for (int i = 0; i < 100; i++) {
            inbox.offer(this, Messages.NOTIFY, new byte[1]);
        }
        assertEquals(10, inbox.size());
        assertEquals(90, inbox.dropped());
    }

    @Test
    public void oneDrainIsOwedUntilTheInboxIsEmptied() {
        FrameInbox inbox = new FrameInbox(10, 1 << 20, 1024);
        assertTrue(inbox.offer(this, Messages.NOTIFY, new byte[1]));
        assertFalse(inbox.offer(this, Messages.NOTIFY, new byte[1]));
        assertEquals(2 * (FrameInbox.FRAME_OVERHEAD_BYTES + 1), inbox.bytes());
        inbox.poll();
        inbox.poll();
        assertEquals(0, inbox.bytes());
        assertNull(inbox.poll());
        // A frame too large to keep still owes a drain: its loss must be seen.
        assertTrue(inbox.offer(this, Messages.NOTIFY, new byte[2048]));
        assertEquals(1, inbox.takeLost());
    }
}
