// The acknowledgement round trip of a Java KafkaShareConsumer (kafka-clients 4.4) in explicit
// mode, for tools/bench_share.py; run as a single-file program with the driver jar on the class
// path:  java -cp kbroker-java-driver.jar ShareAckLatency.java BOOTSTRAP GROUP TOPIC RECORDS SECONDS
// Each poll's records are accepted one by one, then commitSync() sends them (a ShareAcknowledge,
// or the next ShareFetch's piggy-backed acknowledgements) and waits for the broker's answer: that
// wait is one sample. Prints one JSON line: {"commits": n, "records": n, "p50_ms": .., "p99_ms": ..}.
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public class ShareAckLatency {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("group.id", args[1]);
        props.put("client.id", "share-ack-latency");
        props.put("share.acknowledgement.mode", "explicit");
        // Small polls so that there are many round trips to time, each acknowledging a few records.
        // batch_optimized (the default) would hand out whole produced batches, all at once.
        props.put("max.poll.records", "10");
        props.put("share.acquire.mode", "record_limit");
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        long wanted = Long.parseLong(args[3]);
        long until = System.currentTimeMillis() + Long.parseLong(args[4]) * 1000;
        List<Double> samples = new ArrayList<>();
        long records = 0;
        int errors = 0;
        try (KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(props)) {
            consumer.subscribe(List.of(args[2]));
            while (records < wanted && System.currentTimeMillis() < until) {
                var batch = consumer.poll(Duration.ofMillis(500));
                if (batch.isEmpty()) {
                    continue;
                }
                for (ConsumerRecord<byte[], byte[]> r : batch) {
                    consumer.acknowledge(r, AcknowledgeType.ACCEPT);
                    records++;
                }
                long start = System.nanoTime();
                var result = consumer.commitSync();
                samples.add((System.nanoTime() - start) / 1e6);
                for (var e : result.values()) {
                    if (e.isPresent()) {
                        errors++;
                    }
                }
            }
        }
        Collections.sort(samples);
        System.out.printf("{\"commits\": %d, \"records\": %d, \"errors\": %d, \"p50_ms\": %.3f, "
                          + "\"p99_ms\": %.3f}%n", samples.size(), records, errors,
                          quantile(samples, 0.50), quantile(samples, 0.99));
    }

    static double quantile(List<Double> sorted, double q) {
        if (sorted.isEmpty()) {
            return -1;
        }
        return sorted.get(Math.min(sorted.size() - 1, (int) Math.floor(q * sorted.size())));
    }
}
