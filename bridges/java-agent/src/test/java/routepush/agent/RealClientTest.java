package routepush.agent;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertSame;
import static org.junit.Assert.assertTrue;
import static org.junit.Assume.assumeTrue;

import java.io.File;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.net.ServerSocket;
import java.net.URL;
import java.net.URLClassLoader;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.Test;

/**
 * The agent against real Apache clients, each loaded in a class loader of its own (as a fat jar
 * or a container would), none of it visible to the agent's own loader: version detection, the
 * members the agent reaches, discovery through the client's registry, and frames handled
 * without ever throwing into the client's threads.
 */
public class RealClientTest {
    @Test
    public void theCurrentClient() throws Exception {
        String version = System.getProperty("routepush.test.version", "");
        File dir = new File(System.getProperty("routepush.test.clients", ""), version);
        assumeTrue("no client jars in " + dir, dir.isDirectory());
        exercise(dir, version);
    }

    @Test
    public void theLegacyClient() throws Exception {
        String lib = System.getProperty("routepush.test.legacyLib", "");
        assumeTrue("routepush.legacyLib not given", !lib.isEmpty() && new File(lib).isDirectory());
        exercise(new File(lib), "4.9");
    }

    private void exercise(File dir, String version) throws Exception {
        URLClassLoader loader = new URLClassLoader(jars(dir), ClassLoader.getSystemClassLoader().getParent());
        // As in a container, the application's threads see its own loader.
        ClassLoader before = Thread.currentThread().getContextClassLoader();
        Thread.currentThread().setContextClassLoader(loader);
        try {
            assertTrue(version, ClientVersion.of(loader).toString().startsWith(version));
            assertTrue(ClientVersion.of(loader).supported());
            Class<?> producerType = loader.loadClass("org.apache.rocketmq.client.producer.DefaultMQProducer");
            Object producer = producerType.getConstructor(String.class).newInstance("routepush_test");
            String namesrv = "127.0.0.1:" + deadPort();
            producerType.getMethod("setNamesrvAddr", String.class).invoke(producer, namesrv);
            producerType.getMethod("setInstanceName", String.class).invoke(producer, "t" + System.nanoTime());
            assertNull("no instance before start()", RoutePush.instanceOf(producer));
            producerType.getMethod("start").invoke(producer);
            Watcher watcher = new Watcher(Options.defaults());
            try {
                Object instance = RoutePush.instanceOf(producer);
                assertNotNull(instance);
                ClientAccess access = ClientAccess.of(instance);
                assertTrue(access.running());
                assertFalse(access.stoppedForGood());
                assertEquals(namesrv, access.nameServers().get(0));
                assertTrue(access.clientId().contains("@"));

                // Found through the client's own registry, in a loader the agent does not share.
                watcher.addLoader(loader);
                watcher.scan();
                List<Attachment> attached = watcher.attachments();
                assertEquals(1, attached.size());
                assertSame(instance, attached.get(0).access.instance());

                // The processor the agent registered takes the extension's frames, and whatever
                // a frame holds, it returns nothing and throws nothing into the client.
                Object processor = processorFor(instance, Messages.NOTIFY);
                assertNotNull(processor);
                assertSame(processor, processorFor(instance, Messages.GO_AWAY));
                Method process = processor.getClass().getMethod("processRequest",
                        loader.loadClass("io.netty.channel.ChannelHandlerContext"),
                        loader.loadClass("org.apache.rocketmq.remoting.protocol.RemotingCommand"));
                assertNull(process.invoke(processor, null, command(loader, Messages.NOTIFY, new byte[] {0x0a, 0x7f})));
                assertNull(process.invoke(processor, null, command(loader, Messages.NOTIFY, null)));
                assertFalse((Boolean) processor.getClass().getMethod("rejectRequest").invoke(processor));

                // A request to a name server that is not there fails inside the agent's call.
                try {
                    access.invoke(namesrv, Messages.SUBSCRIBE, Messages.subscribe(new ArrayList<String>(), "x"), 500);
                } catch (Exception expected) {
                    // the Bridge catches exactly this and backs off
                }
            } finally {
                producerType.getMethod("shutdown").invoke(producer);
            }
            Object instance = RoutePush.instanceOf(producer);
            assertTrue(instance == null || ClientAccess.of(instance).stoppedForGood());
            watcher.scan();
            assertEquals("let go after shutdown", 0, watcher.attachments().size());
            watcher.stop();
        } finally {
            Thread.currentThread().setContextClassLoader(before);
            awaitNettyThreads();
            loader.close();
        }
    }

    /**
     * The client's Netty threads finish their last tasks after shutdown returns; the loader is
     * closed only once they have ended, or a late task cannot load its classes.
     */
    private static void awaitNettyThreads() throws InterruptedException {
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (t.getName().startsWith("NettyClient")) {
                t.join(10000);
            }
        }
    }

    private static Object processorFor(Object instance, int code) throws Exception {
        Object api = instance.getClass().getMethod("getMQClientAPIImpl").invoke(instance);
        Object remoting = api.getClass().getMethod("getRemotingClient").invoke(api);
        Field table = null;
        for (Class<?> c = remoting.getClass(); c != null && table == null; c = c.getSuperclass()) {
            try {
                table = c.getDeclaredField("processorTable");
            } catch (NoSuchFieldException e) {
                // superclass
            }
        }
        assertNotNull(table);
        table.setAccessible(true);
        Object pair = ((Map<?, ?>) table.get(remoting)).get(code);
        return pair == null ? null : pair.getClass().getMethod("getObject1").invoke(pair);
    }

    private static Object command(ClassLoader loader, int code, byte[] body) throws Exception {
        Class<?> type = loader.loadClass("org.apache.rocketmq.remoting.protocol.RemotingCommand");
        Class<?> header = loader.loadClass("org.apache.rocketmq.remoting.CommandCustomHeader");
        Object cmd = type.getMethod("createRequestCommand", int.class, header).invoke(null, code, null);
        type.getMethod("markOnewayRPC").invoke(cmd);
        type.getMethod("setBody", byte[].class).invoke(cmd, (Object) body);
        return cmd;
    }

    private static URL[] jars(File dir) throws Exception {
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

    private static int deadPort() throws Exception {
        ServerSocket s = new ServerSocket(0);
        int port = s.getLocalPort();
        s.close();
        return port;
    }

}
