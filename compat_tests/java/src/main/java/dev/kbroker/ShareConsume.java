package dev.kbroker;

import java.time.Duration;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * The driver contract's {@code share-consume} command: one member of a share group (KIP-932)
 * through kafka-clients' {@link KafkaShareConsumer}.
 *
 * <pre>
 * share-consume --bootstrap H:P --topic T --group G --count N [--timeout-ms MS]
 *     [--ack implicit|accept|release|reject|hold] [--client-id ID] [--property k=v ...]
 * </pre>
 *
 * {@code implicit} lets the next poll accept what the last one returned; accept, release and
 * reject acknowledge every record explicitly and commit after each poll; {@code hold}
 * acknowledges nothing, prints {@code holding} and sleeps until killed, keeping the records'
 * acquisition locks (the lock-expiry scenario). Events: {@code record} (with deliveryCount),
 * {@code done}; exit 2 when fewer than --count records arrived in time.
 */
final class ShareConsume {
    private ShareConsume() {}

    static int run(Args a) throws InterruptedException {
        String ack = a.get("ack", "implicit");
        AcknowledgeType type = switch (ack) {
            case "implicit", "hold" -> null;
            case "accept" -> AcknowledgeType.ACCEPT;
            case "release" -> AcknowledgeType.RELEASE;
            case "reject" -> AcknowledgeType.REJECT;
            default -> throw new IllegalArgumentException("--ack: implicit|accept|release|reject|hold, got " + ack);
        };
        boolean explicit = !ack.equals("implicit");
        int count = a.getInt("count", 10);
        long deadline = System.currentTimeMillis() + a.getLong("timeout-ms", 30000);
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, a.require("bootstrap"));
        p.put(ConsumerConfig.GROUP_ID_CONFIG, a.require("group"));
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, a.get("client-id", "kbroker-java-driver"));
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.SHARE_ACKNOWLEDGEMENT_MODE_CONFIG, explicit ? "explicit" : "implicit");
        Driver.extraProps(p, a);

        int seen = 0;
        try (KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(p)) {
            consumer.subscribe(List.of(a.require("topic")));
            while (seen < count && System.currentTimeMillis() < deadline) {
                long left = Math.max(1, Math.min(500, deadline - System.currentTimeMillis()));
                ConsumerRecords<byte[], byte[]> records = consumer.poll(Duration.ofMillis(left));
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    Driver.emit(Json.obj("event", "record", "topic", r.topic(), "partition", r.partition(),
                            "offset", r.offset(), "key", Driver.str(r.key()), "value", Driver.str(r.value()),
                            "deliveryCount", r.deliveryCount().map(Integer::valueOf).orElse(null)));
                    if (type != null) consumer.acknowledge(r, type);
                    seen++;
                }
                if (ack.equals("hold") && seen > 0) {
                    Driver.emit(Json.obj("event", "holding", "records", seen));
                    System.out.flush();
                    Thread.sleep(Long.MAX_VALUE);  // keep the locks until the scenario kills us
                }
                if (type != null && !records.isEmpty()) consumer.commitSync();
            }
        }
        Driver.emit(Json.obj("event", "done", "consumed", seen, "requested", count, "timedOut", seen < count));
        return seen >= count ? 0 : 2;
    }
}
