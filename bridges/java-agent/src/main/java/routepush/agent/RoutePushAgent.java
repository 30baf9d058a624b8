package routepush.agent;

import java.lang.instrument.Instrumentation;

/** The {@code -javaagent} entry points; see {@link RoutePush}. */
public final class RoutePushAgent {
    private RoutePushAgent() {
    }

    public static void premain(String args, Instrumentation inst) {
        agentmain(args, inst);
    }

    public static void agentmain(String args, Instrumentation inst) {
        try {
            RoutePush.start(args, inst);
        } catch (Throwable t) {
            Log.warn("start", "route push agent not started", t);
        }
    }
}
