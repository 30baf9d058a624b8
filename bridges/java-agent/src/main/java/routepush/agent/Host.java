package routepush.agent;

import java.util.List;

/**
 * A process part the agent serves: what {@link Bridge} needs ({@link ClientPort}) plus what its
 * {@link Attachment} needs to hook and name it. Two kinds: a client instance
 * ({@link ClientAccess}) and a proxy's route cache ({@link ProxyAccess}). Both reach their name
 * servers through a RocketMQ remoting client ({@link #remoting}), so the name-server side of
 * {@link ClientPort} is written here once.
 */
interface Host extends ClientPort {
    /** "client" or "proxy", for the agent's lines. */
    String kind();

    /** The host's id and RocketMQ version, e.g. {@code 10.0.0.7@12345 (RocketMQ client V5_3_3)}. */
    String label();

    /** Whether the host was shut down (or failed to start): it will not run again. */
    boolean stoppedForGood();

    /** The remoting client the subscriptions and the frames go over. */
    Remoting remoting();

    @Override
    default String nameServer() {
        return remoting().nameServer();
    }

    @Override
    default List<String> nameServers() {
        return remoting().nameServers();
    }

    @Override
    default Object connection(String addr) {
        return remoting().connection(addr);
    }

    @Override
    default Reply invoke(String addr, int code, byte[] body, long timeoutMs) throws Exception {
        return remoting().invoke(addr, code, body, timeoutMs);
    }

    @Override
    default boolean switchNameServer(String addr) {
        return remoting().switchNameServer(addr);
    }

    /** Hands the extension's frames ({@code codes}) read on the host's connections to {@code handler}. */
    default void registerFrames(Remoting.FrameHandler handler, int... codes) throws ReflectiveOperationException {
        remoting().registerFrames(handler, codes);
    }
}
