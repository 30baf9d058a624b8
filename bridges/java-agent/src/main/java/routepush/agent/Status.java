package routepush.agent;

import java.io.PrintStream;
import java.lang.reflect.Method;
import java.util.Set;
import java.util.TreeSet;
import javax.management.MBeanServerConnection;
import javax.management.ObjectName;
import javax.management.remote.JMXConnector;
import javax.management.remote.JMXConnectorFactory;
import javax.management.remote.JMXServiceURL;

/**
 * The operator's status command: {@code java -jar rocketmq-routepush-agent.jar PID} prints the
 * agent's MBean ({@code routepush:type=Agent}) of a local JVM, attaching to it as {@code jcmd}
 * and {@code jconsole} do (same user; the JDK's attach API, in {@code lib/tools.jar} on Java 8).
 * Exit status: 0 the agent serves clients there, 2 no MBean (agent absent, off, or no client
 * served yet), 1 the JVM could not be reached.
 */
public final class Status {
    /** The attributes printed, in this order (every one of {@link AgentMXBean}). */
    static final String[] ATTRIBUTES = {
        "Version", "ClientVersions", "Options", "Clients", "ClientsWithoutPush", "ClientsWarming",
        "SubscribedTopics", "Subscribes", "SubscribeFailures", "Notifications", "Refreshes",
        "RefreshFailures", "CoalescedRefreshes", "Resyncs", "DroppedFrames", "OversizedFrames",
        "MalformedFrames", "ForeignFrames", "IgnoredEntries", "GoAways", "SuppressedLogLines",
    };

    private Status() {
    }

    public static void main(String[] args) {
        if (args.length != 1 || !args[0].matches("[0-9]+")) {
            System.err.println("rocketmq-routepush-agent " + AgentVersion.text() + " (RocketMQ Java clients "
                    + AgentVersion.CLIENTS + ")\n"
                    + "as an agent: java '-javaagent:rocketmq-routepush-agent.jar=KEY=VALUE,...' -jar app.jar\n"
                    + "status:      java -jar rocketmq-routepush-agent.jar PID   (a local JVM, same user)");
            System.exit(args.length == 0 ? 0 : 1);
        }
        int code;
        try {
            String address = localManagementAddress(args[0]);
            JMXConnector connector = JMXConnectorFactory.connect(new JMXServiceURL(address));
            try {
                code = print(connector.getMBeanServerConnection(), System.out) ? 0 : 2;
            } finally {
                connector.close();
            }
        } catch (ClassNotFoundException e) {
            System.err.println("the JDK's attach API is missing: run this with a JDK, and on Java 8 as\n"
                    + "  java -cp rocketmq-routepush-agent.jar:$JAVA_HOME/lib/tools.jar routepush.agent.Status "
                    + args[0]);
            code = 1;
        } catch (Exception e) {
            Throwable root = e;
            while (root.getCause() != null && root.getCause() != root) {
                root = root.getCause();
            }
            System.err.println("cannot read JVM " + args[0] + ": " + root
                    + " (it must be a local JVM of the same user; jconsole reads the same MBean)");
            code = 1;
        }
        System.exit(code);
    }

    /**
     * Prints every route push MBean {@code server} holds: its summary line, its attributes one
     * per line ({@code Name  value}) and a line per client served. False when there is none.
     */
    static boolean print(MBeanServerConnection server, PrintStream out) throws Exception {
        Set<ObjectName> names = new TreeSet<ObjectName>(server.queryNames(new ObjectName(AgentStatus.NAME + ",*"), null));
        if (names.isEmpty()) {
            out.println("no " + AgentStatus.NAME + " MBean: the agent is not loaded, is off (enabled=false or "
                    + "jmx=false), or serves no client yet; its start line in the application's log says which");
            return false;
        }
        for (ObjectName name : names) {
            out.println(name);
            out.println("  " + server.getAttribute(name, "Summary"));
            for (String attribute : ATTRIBUTES) {
                out.println(String.format("  %-20s %s", attribute, server.getAttribute(name, attribute)));
            }
            for (String line : (String[]) server.getAttribute(name, "ClientLines")) {
                out.println("  " + line);
            }
        }
        return true;
    }

    /** Attaches to {@code pid} and starts (or finds) its local JMX connector. */
    private static String localManagementAddress(String pid) throws Exception {
        Class<?> vmClass = Class.forName("com.sun.tools.attach.VirtualMachine");
        Object vm = vmClass.getMethod("attach", String.class).invoke(null, pid);
        try {
            Method start = vmClass.getMethod("startLocalManagementAgent");
            return (String) start.invoke(vm);
        } finally {
            vmClass.getMethod("detach").invoke(vm);
        }
    }
}
