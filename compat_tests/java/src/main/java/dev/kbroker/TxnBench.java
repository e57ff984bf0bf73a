package dev.kbroker;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Transaction benchmarks for tools/bench_txn.py. Prints one JSON result line.
 *
 * <pre>
 * txn-produce --bootstrap H:P --topic T --records N --per-txn K [--value-size 100] --transactional-id ID
 *     → {records, seconds, endTxnMs: [...]}  EndTxn = commitTransaction after an explicit flush,
 *       so it times the EndTxn round trip and the markers, not the last batch
 * txn-consume --bootstrap H:P --topic T --records N   (read_committed, assigned, from the start)
 *     → {records, seconds}
 * </pre>
 */
final class TxnBench {
    private TxnBench() {}

    static int produce(Args a) {
        int records = a.getInt("records", 100000);
        int perTxn = a.getInt("per-txn", 100);
        byte[] value = new byte[a.getInt("value-size", 100)];
        Arrays.fill(value, (byte) 'x');
        String topic = a.require("topic");
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, a.require("bootstrap"));
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, a.require("transactional-id"));
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        List<Double> endTxnMs = new ArrayList<>();
        long start;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            producer.initTransactions();
            start = System.nanoTime();
            for (int sent = 0; sent < records; ) {
                producer.beginTransaction();
                for (int i = 0; i < perTxn && sent < records; i++, sent++) {
                    producer.send(new ProducerRecord<>(topic, value));
                }
                producer.flush();
                long t0 = System.nanoTime();
                producer.commitTransaction();
                endTxnMs.add((System.nanoTime() - t0) / 1e6);
            }
        }
        double seconds = (System.nanoTime() - start) / 1e9;
        Driver.emit(Json.obj("event", "txn-produce", "records", records, "seconds", seconds,
                "endTxnMs", new ArrayList<Object>(endTxnMs)));
        return 0;
    }

    static int consume(Args a) {
        int records = a.getInt("records", 100000);
        String topic = a.require("topic");
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, a.require("bootstrap"));
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        long seen = 0;
        long start;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo pi : consumer.partitionsFor(topic, Duration.ofSeconds(30))) {
                tps.add(new TopicPartition(topic, pi.partition()));
            }
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            start = System.nanoTime();
            long deadline = System.currentTimeMillis() + 120_000;
            while (seen < records && System.currentTimeMillis() < deadline) {
                seen += consumer.poll(Duration.ofMillis(500)).count();
            }
        }
        double seconds = (System.nanoTime() - start) / 1e9;
        Driver.emit(Json.obj("event", "txn-consume", "records", seen, "seconds", seconds));
        return seen >= records ? 0 : 2;
    }
}
