package routepush.agent;

import java.util.ArrayDeque;

/**
 * The extension's frames waiting for an instance's control thread, bounded in count and in
 * bytes: a name server sending large frames faster than the agent reads them costs the
 * application at most {@code maxBytes} (plus the frame the client's Netty is reading), never a
 * queue of whole bodies. A frame longer than {@code maxFrameBytes} is never kept. A frame not
 * kept is counted as lost; the reader learns how many were lost and refetches what it holds
 * instead (what they announced is unknown). Thread-safe: offered from the client's Netty thread,
 * taken on the control thread.
 */
final class FrameInbox {
    /** What one kept frame costs beyond its body (the entry and its references). */
    static final int FRAME_OVERHEAD_BYTES = 64;

    static final class Frame {
        final Object connection;
        final int code;
        final byte[] body;

        Frame(Object connection, int code, byte[] body) {
            this.connection = connection;
            this.code = code;
            this.body = body;
        }

        long cost() {
            return FRAME_OVERHEAD_BYTES + (body == null ? 0 : body.length);
        }
    }

    private final int maxFrames;
    private final long maxBytes;
    private final int maxFrameBytes;
    private final ArrayDeque<Frame> frames = new ArrayDeque<Frame>();
    private long bytes;
    private long lost;
    private long dropped;
    private long oversized;
    private long peakBytes;
    private boolean drainOwed;

    FrameInbox(int maxFrames, long maxBytes, int maxFrameBytes) {
        this.maxFrames = maxFrames;
        this.maxBytes = maxBytes;
        this.maxFrameBytes = maxFrameBytes;
    }

    /**
     * Keeps the frame if it fits; returns whether the caller must arrange a {@link #poll} drain
     * (none is owed yet). A frame not kept still owes a drain, so its loss is seen.
     */
    synchronized boolean offer(Object connection, int code, byte[] body) {
        int length = body == null ? 0 : body.length;
        if (length > maxFrameBytes) {
            oversized++;
            lost++;
        } else {
            Frame f = new Frame(connection, code, body);
            if (frames.size() >= maxFrames || bytes + f.cost() > maxBytes) {
                dropped++;
                lost++;
            } else {
                frames.add(f);
                bytes += f.cost();
                peakBytes = Math.max(peakBytes, bytes);
            }
        }
        if (drainOwed) {
            return false;
        }
        drainOwed = true;
        return true;
    }

    /** The oldest frame, or null when none is left (the next offer then owes a drain again). */
    synchronized Frame poll() {
        Frame f = frames.poll();
        if (f == null) {
            drainOwed = false;
            return null;
        }
        bytes -= f.cost();
        return f;
    }

    /** Frames lost since the last call. */
    synchronized long takeLost() {
        long n = lost;
        lost = 0;
        return n;
    }

    synchronized long bytes() {
        return bytes;
    }

    synchronized long peakBytes() {
        return peakBytes;
    }

    synchronized int size() {
        return frames.size();
    }

    /** Frames not kept because the inbox was full. */
    synchronized long dropped() {
        return dropped;
    }

    /** Frames not kept because they were longer than the frame bound. */
    synchronized long oversized() {
        return oversized;
    }
}
