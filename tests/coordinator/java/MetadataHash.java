// Computes group metadata hashes with Apache Kafka's own code, for
// tests/coordinator/test_metadata_hash_kafka.py: the topics and brokers are replayed as KRaft
// metadata records into Kafka's MetadataImage, and the hashes come from the group coordinator's
// Utils.computeTopicHash and ModernGroup.computeMetadataHash, so the rack lookup, the sorting and
// the hash4j byte stream are all Kafka's.
//
// Input (stdin), one command a line, fields separated by tabs, strings as hex of their UTF-8:
//   B <broker id> <rack hex, or "-" for none>          register a broker
//   T <topic uuid> <name hex> <replicas>                create a topic; replicas "1,2;2,3" (one
//                                                       comma list per partition, ';' between)
//   H <name hex>                                        print the topic's hash
//   G <name hex>,<name hex>,...                         print the group hash of these names
// Topics and brokers come first; the hashes are printed one a line, in input order.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;

import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.metadata.PartitionRecord;
import org.apache.kafka.common.metadata.RegisterBrokerRecord;
import org.apache.kafka.common.metadata.TopicRecord;
import org.apache.kafka.coordinator.common.runtime.CoordinatorMetadataImage;
import org.apache.kafka.coordinator.common.runtime.KRaftCoordinatorMetadataImage;
import org.apache.kafka.coordinator.group.Utils;
import org.apache.kafka.coordinator.group.modern.ModernGroup;
import org.apache.kafka.coordinator.group.modern.SubscriptionCount;
import org.apache.kafka.image.MetadataDelta;
import org.apache.kafka.image.MetadataImage;
import org.apache.kafka.image.MetadataProvenance;

public class MetadataHash {
    static String text(String hex) {
        return new String(HexFormat.of().parseHex(hex), StandardCharsets.UTF_8);
    }

    static List<Integer> ids(String list) {
        List<Integer> out = new ArrayList<>();
        for (String id : list.split(",")) {
            if (!id.isEmpty()) out.add(Integer.parseInt(id));
        }
        return out;
    }

    public static void main(String[] args) throws Exception {
        MetadataDelta delta = new MetadataDelta.Builder().setImage(MetadataImage.EMPTY).build();
        List<String[]> queries = new ArrayList<>();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            if (line.isBlank()) continue;
            String[] f = line.split("\t", -1);
            switch (f[0]) {
                case "B" -> {
                    RegisterBrokerRecord broker = new RegisterBrokerRecord()
                        .setBrokerId(Integer.parseInt(f[1]))
                        .setIncarnationId(Uuid.randomUuid())
                        .setBrokerEpoch(1);
                    // The record's rack defaults to "", but a broker without broker.rack
                    // registers null (no rack), as Kafka's BrokerLifecycleManager does.
                    broker.setRack(f[2].equals("-") ? null : text(f[2]));
                    delta.replay(broker);
                }
                case "T" -> {
                    Uuid id = Uuid.fromString(f[1]);
                    delta.replay(new TopicRecord().setName(text(f[2])).setTopicId(id));
                    String[] partitions = f[3].split(";", -1);
                    for (int p = 0; p < partitions.length; p++) {
                        List<Integer> replicas = ids(partitions[p]);
                        delta.replay(new PartitionRecord().setTopicId(id).setPartitionId(p)
                            .setReplicas(replicas).setIsr(replicas)
                            .setLeader(replicas.isEmpty() ? -1 : replicas.get(0))
                            .setLeaderEpoch(0).setPartitionEpoch(0));
                    }
                }
                case "H", "G" -> queries.add(f);
                default -> throw new IllegalArgumentException("unknown command " + f[0]);
            }
        }
        CoordinatorMetadataImage image = new KRaftCoordinatorMetadataImage(delta.apply(MetadataProvenance.EMPTY));
        StringBuilder out = new StringBuilder();
        for (String[] q : queries) {
            if (q[0].equals("H")) {
                out.append(Utils.computeTopicHash(text(q[1]), image)).append('\n');
            } else {
                Map<String, SubscriptionCount> subscribed = new HashMap<>();
                for (String name : q.length > 1 ? q[1].split(",") : new String[0]) {
                    if (!name.isEmpty()) subscribed.put(text(name), new SubscriptionCount(1, 0));
                }
                out.append(ModernGroup.computeMetadataHash(subscribed, new HashMap<>(), image)).append('\n');
            }
        }
        System.out.print(out);
    }
}
