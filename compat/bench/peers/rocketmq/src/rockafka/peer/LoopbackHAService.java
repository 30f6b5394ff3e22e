package rockafka.peer;

import java.io.IOException;
import java.lang.reflect.Field;
import java.net.InetSocketAddress;

import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.ha.DefaultHAService;

/**
 * RocketMQ's default HA service, listening on 127.0.0.1 instead of every interface.
 *
 * <p>The stock DefaultHAService binds its replication port (haListenPort) to the wildcard
 * address and has no setting to change that; the benchmark peer must listen on loopback only.
 * The broker picks this class up through RocketMQ's own service hook
 * (META-INF/service/org.apache.rocketmq.store.ha.HAService, read by ServiceProvider), so the
 * broker's code is used unchanged: only the accept address differs.
 */
public class LoopbackHAService extends DefaultHAService {

    @Override
    public void init(DefaultMessageStore store) throws IOException {
        super.init(store);
        try {
            Field address = DefaultHAService.AcceptSocketService.class.getDeclaredField("socketAddressListen");
            address.setAccessible(true);
            address.set(acceptSocketService,
                    new InetSocketAddress("127.0.0.1", store.getMessageStoreConfig().getHaListenPort()));
        } catch (ReflectiveOperationException e) {
            throw new IOException("cannot bind the HA listener to 127.0.0.1 in this RocketMQ version", e);
        }
    }
}
