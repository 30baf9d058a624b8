package routepush.agent;

import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeSet;

/**
 * Topics owed a route refresh, each with the time it is due. Coalescing: a topic is owed at most
 * once; offering it again only moves it earlier, so a burst of notifications for one topic costs
 * one refresh. A topic taken for refreshing may be offered again at once: a notification that
 * arrives while its refresh runs gets a refresh of its own afterwards, so the route it announced
 * is never missed. Thread-safe; time comes from the caller.
 */
final class RefreshQueue {
    private static final class Slot implements Comparable<Slot> {
        final long due;
        final long order;
        final String topic;

        Slot(long due, long order, String topic) {
            this.due = due;
            this.order = order;
            this.topic = topic;
        }

        @Override
        public int compareTo(Slot o) {
            if (due != o.due) {
                return due < o.due ? -1 : 1;
            }
            return Long.compare(order, o.order);
        }
    }

    private final int bound;
    private final Map<String, Slot> owed = new HashMap<String, Slot>();
    private final TreeSet<Slot> byDue = new TreeSet<Slot>();
    private long orders;
    private long coalesced;
    private long refused;

    /** At most {@code bound} topics owed; an offer past it is refused and counted. */
    RefreshQueue(int bound) {
        this.bound = bound;
    }

    /** Owes {@code topic} a refresh at {@code dueMs} or earlier; false if it was owed already. */
    synchronized boolean offer(String topic, long dueMs) {
        Slot slot = owed.get(topic);
        if (slot != null) {
            coalesced++;
            if (slot.due <= dueMs) {
                return false;
            }
            byDue.remove(slot);
        } else if (owed.size() >= bound) {
            refused++;
            return false;
        }
        Slot fresh = new Slot(dueMs, orders++, topic);
        owed.put(topic, fresh);
        byDue.add(fresh);
        notifyAll();
        return slot == null;
    }

    /**
     * Owes each of {@code topics} a refresh spread over {@code windowMs} from {@code nowMs}: in a
     * random order, {@code windowMs / n} apart from a random offset, so one client never asks for
     * more than about {@code n / windowMs} routes at once.
     */
    synchronized void offerSpread(Collection<String> topics, long nowMs, long windowMs, Random random) {
        if (topics.isEmpty()) {
            return;
        }
        List<String> order = new ArrayList<String>(topics);
        Collections.shuffle(order, random);
        double step = windowMs <= 0 ? 0.0 : (double) windowMs / order.size();
        double at = nowMs + random.nextDouble() * step;
        for (String topic : order) {
            offer(topic, (long) at);
            at += step;
        }
    }

    /** The topics due at {@code nowMs}, earliest first, no longer owed. */
    synchronized List<String> takeDue(long nowMs) {
        List<String> out = new ArrayList<String>();
        while (!byDue.isEmpty() && byDue.first().due <= nowMs) {
            Slot slot = byDue.pollFirst();
            owed.remove(slot.topic);
            out.add(slot.topic);
        }
        return out;
    }

    /** The earliest due time, or {@code Long.MAX_VALUE} when nothing is owed. */
    synchronized long nextDue() {
        return byDue.isEmpty() ? Long.MAX_VALUE : byDue.first().due;
    }

    synchronized int size() {
        return owed.size();
    }

    synchronized long coalesced() {
        return coalesced;
    }

    synchronized long refused() {
        return refused;
    }

    /** Waits until something may be due or {@code maxWaitMs} passed (or a new offer arrives). */
    synchronized void await(long nowMs, long maxWaitMs) throws InterruptedException {
        long next = nextDue();
        long wait = next == Long.MAX_VALUE ? maxWaitMs : Math.min(maxWaitMs, next - nowMs);
        if (wait > 0) {
            wait(wait);
        }
    }
}
