import java.util.HashMap;
import java.util.Map;
import java.util.TreeSet;

import org.apache.kafka.connect.mirror.RemoteClusterUtils;

/**
 * What Kafka's own client library (connect-mirror-client) reads from a cluster's heartbeat topics.
 *
 * Arguments: the cluster's bootstrap servers and an upstream cluster alias. Prints two lines:
 * {@code hops=N} (RemoteClusterUtils.replicationHops; -1 when no heartbeat topic comes from it)
 * and {@code upstream=X,Y} (RemoteClusterUtils.upstreamClusters, sorted).
 */
public class Hops {
    public static void main(String[] args) throws Exception {
        Map<String, Object> props = new HashMap<>();
        props.put("bootstrap.servers", args[0]);
        int hops = RemoteClusterUtils.replicationHops(props, args[1]);
        TreeSet<String> upstream = new TreeSet<>(RemoteClusterUtils.upstreamClusters(props));
        System.out.println("hops=" + hops);
        System.out.println("upstream=" + String.join(",", upstream));
    }
}
