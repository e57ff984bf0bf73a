package dev.kbroker;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * Consume-transform-produce with exactly-once semantics, the shape of Kafka's own
 * TransactionalMessageCopier: read_committed input, each polled batch copied to the same partition
 * of the output topic inside one transaction, with the input offsets committed in that transaction
 * (sendOffsetsToTransaction with the consumer's group metadata). Runs until killed.
 *
 * <p>Any failure other than being fenced throws both clients away and starts over exactly as a
 * fresh process would: initTransactions aborts whatever the previous incarnation left open, and the
 * consumer resumes from the group's committed offsets. That makes broker crashes and a hard-killed
 * predecessor the same case.
 *
 * <pre>
 * eos --bootstrap H:P --input IN --output OUT --group G --transactional-id TID
 *     [--max-per-txn 500] [--pause-ms 0] [--property producer.k=v|consumer.k=v ...]
 * </pre>
 * Events: {@code txn} (committed, total) after each commit, {@code restart} (error, message) on a
 * failure, {@code fenced} when another instance took over (exit 3).
 */
final class Eos {
    private Eos() {}

    static int run(Args a) {
        long total = 0;
        while (true) {
            try {
                total = copyUntilFailure(a, total);
            } catch (ProducerFencedException e) {
                Driver.emit(Json.obj("event", "fenced", "message", String.valueOf(e.getMessage())));
                return 3;
            } catch (Exception e) {
                Driver.emit(Json.obj("event", "restart", "error", e.getClass().getSimpleName(),
                        "message", String.valueOf(e.getMessage())));
                try {
                    Thread.sleep(500);
                } catch (InterruptedException ie) {
                    Thread.currentThread().interrupt();
                    return 1;
                }
            }
        }
    }

    private static long copyUntilFailure(Args a, long total) throws InterruptedException {
        String input = a.require("input");
        String output = a.require("output");
        int maxPerTxn = a.getInt("max-per-txn", 500);
        long pauseMs = a.getLong("pause-ms", 0);
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(a));
             KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProps(a, maxPerTxn))) {
            producer.initTransactions();
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo pi : consumer.partitionsFor(input, Duration.ofSeconds(30))) {
                tps.add(new TopicPartition(input, pi.partition()));
            }
            consumer.assign(tps);
            resumeFromCommitted(consumer, Set.copyOf(tps));
            while (true) {
                ConsumerRecords<byte[], byte[]> batch = consumer.poll(Duration.ofMillis(200));
                if (batch.isEmpty()) continue;
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : batch) {
                    producer.send(new ProducerRecord<>(output, r.partition(), r.key(), r.value()));
                    offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                }
                producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                producer.commitTransaction();
                total += batch.count();
                Driver.emit(Json.obj("event", "txn", "committed", batch.count(), "total", total));
                if (pauseMs > 0) Thread.sleep(pauseMs);  // a throttle, so faults land mid-run
            }
        }
    }

    /** Seek every partition to the group's committed offset; earliest where there is none. */
    private static void resumeFromCommitted(KafkaConsumer<byte[], byte[]> consumer, Set<TopicPartition> tps) {
        Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(tps, Duration.ofSeconds(30));
        List<TopicPartition> fresh = new ArrayList<>();
        for (TopicPartition tp : tps) {
            OffsetAndMetadata om = committed.get(tp);
            if (om == null) fresh.add(tp);
            else consumer.seek(tp, om.offset());
        }
        if (!fresh.isEmpty()) consumer.seekToBeginning(fresh);
    }

    private static Properties producerProps(Args a) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, a.require("bootstrap"));
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "kbroker-eos-producer");
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, a.require("transactional-id"));
        p.put(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG, "20000");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        extra(p, a, "producer.");
        return p;
    }

    private static Properties consumerProps(Args a, int maxPerTxn) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, a.require("bootstrap"));
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "kbroker-eos-consumer");
        p.put(ConsumerConfig.GROUP_ID_CONFIG, a.require("group"));
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, String.valueOf(maxPerTxn));
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        extra(p, a, "consumer.");
        return p;
    }

    /** --property producer.k=v / consumer.k=v go to that client only. */
    private static void extra(Properties p, Args a, String prefix) {
        for (String kv : a.all("property")) {
            int eq = kv.indexOf('=');
            if (eq <= 0) throw new IllegalArgumentException("--property wants k=v, got " + kv);
            if (kv.startsWith(prefix)) p.put(kv.substring(prefix.length(), eq), kv.substring(eq + 1));
        }
    }
}
