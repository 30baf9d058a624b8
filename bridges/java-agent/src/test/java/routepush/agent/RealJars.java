package routepush.agent;

import java.io.File;
import java.net.URL;
import java.net.URLClassLoader;
import java.util.ArrayList;
import java.util.List;

/**
 * Real RocketMQ jars for the tests, each set in a class loader of its own whose parent sees only
 * the JDK (as a fat jar or a container would), and a wait for what their threads do.
 */
final class RealJars {
    interface Check {
        boolean ok() throws Exception;
    }

    private RealJars() {
    }

    /** Waits up to 20 s for {@code check}, failing with {@code what}. */
    static void await(Check check, String what) throws Exception {
        long deadline = System.nanoTime() + 20_000_000_000L;
        while (!check.ok()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError(what + ": not within 20 s");
            }
            Thread.sleep(10);
        }
    }

    static URL[] jars(File dir) throws Exception {
        List<URL> out = new ArrayList<URL>();
        File[] files = dir.listFiles();
        if (files != null) {
            for (File f : files) {
                if (f.getName().endsWith(".jar")) {
                    out.add(f.toURI().toURL());
                }
            }
        }
        return out.toArray(new URL[0]);
    }

    /** A loader of every jar in {@code dir}, none of it visible to the agent's own loader. */
    static URLClassLoader loader(File dir) throws Exception {
        return new URLClassLoader(jars(dir), ClassLoader.getSystemClassLoader().getParent());
    }
}
