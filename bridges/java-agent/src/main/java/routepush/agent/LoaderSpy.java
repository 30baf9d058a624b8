package routepush.agent;

import java.lang.instrument.ClassFileTransformer;
import java.security.ProtectionDomain;

/**
 * Notes each class loader that defines RocketMQ's client registry, so clients in any loader (a
 * fat jar's, a container's) are found, and each that defines a 5.x proxy's start-up class, so
 * its route cache is found. It changes no class: it always returns null.
 */
final class LoaderSpy implements ClassFileTransformer {
    private static final String MANAGER = Watcher.MANAGER.replace('.', '/');
    private static final String PROXY = ProxyFinder.STARTUP.replace('.', '/');
    private final Watcher watcher;

    LoaderSpy(Watcher watcher) {
        this.watcher = watcher;
    }

    @Override
    public byte[] transform(ClassLoader loader, String className, Class<?> redefined,
            ProtectionDomain domain, byte[] classfile) {
        try {
            if (MANAGER.equals(className)) {
                watcher.addLoader(loader);
            } else if (PROXY.equals(className)) {
                watcher.addProxyLoader(loader);
            }
        } catch (Throwable t) {
            // never into the class-loading thread
        }
        return null;
    }
}
