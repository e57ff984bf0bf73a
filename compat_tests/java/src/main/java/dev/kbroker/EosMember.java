package dev.kbroker;

import java.time.Duration;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

/**
 * One member of a transactional consume-transform-produce chain in a consumer group, as Kafka's
 * documentation writes it (KIP-447: one transactional id per member, offsets committed with the
 * consumer's group metadata): each poll's records go to the same partition of the output topic in
 * one transaction. The group rebalances as members come and go; a revoked or failed transaction is
 * aborted and the member rewinds to the group's committed offsets.
 *
 * <pre>
 * eos-member --bootstrap H:P --input IN --output OUT --group G --transactional-id TID
 *     [--transactions N] [--max-ms MS] [--property producer.k=v|consumer.k=v ...]
 * </pre>
 * It stops after N transactions (leaving the group), after MS, or on SIGTERM, and prints one
 * {@code done} event: copied, committed, aborted, and every error by where and class.
 */
final class EosMember {
    private EosMember() {}

    static int run(Args a) {
        String input = a.require("input");
        String output = a.require("output");
        int maxTxns = a.getInt("transactions", 0);
        long deadline = System.currentTimeMillis() + a.getLong("max-ms", 120_000);
        Map<String, Integer> errors = new TreeMap<>();
        long copied = 0, committed = 0, aborted = 0;
        AtomicBoolean stopping = new AtomicBoolean();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(a));
             KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(consumerProps(a))) {
            Thread main = Thread.currentThread();
            Thread hook = new Thread(() -> {
                stopping.set(true);
                consumer.wakeup();
                try {
                    main.join(20_000);
                } catch (InterruptedException ignored) {
                    Thread.currentThread().interrupt();
                }
            });
            Runtime.getRuntime().addShutdownHook(hook);
            producer.initTransactions();
            consumer.subscribe(List.of(input), new ConsumerRebalanceListener() {
                @Override public void onPartitionsRevoked(Collection<TopicPartition> partitions) {}
                @Override public void onPartitionsAssigned(Collection<TopicPartition> partitions) {}
            });
            while (!stopping.get() && System.currentTimeMillis() < deadline
                    && (maxTxns == 0 || committed + aborted < maxTxns)) {
                ConsumerRecords<byte[], byte[]> batch;
                try {
                    batch = consumer.poll(Duration.ofMillis(200));
                } catch (WakeupException e) {
                    break;
                }
                if (batch.isEmpty()) continue;
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
                try {
                    for (ConsumerRecord<byte[], byte[]> r : batch) {
                        producer.send(new ProducerRecord<>(output, r.partition(), r.key(), r.value()),
                                (md, e) -> {
                                    if (e != null) count(errors, "produce", e);
                                });
                        offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                    }
                    producer.sendOffsetsToTransaction(offsets, consumer.groupMetadata());
                    producer.commitTransaction();
                    committed++;
                    copied += batch.count();
                } catch (ProducerFencedException e) {
                    count(errors, "end", e);
                    break;
                } catch (KafkaException e) {
                    // Abortable (a rebalance fenced our group generation, a produce failed):
                    // abort and read again from what the group committed.
                    count(errors, "end", e);
                    try {
                        producer.abortTransaction();
                    } catch (KafkaException fatal) {
                        count(errors, "abort", fatal);
                        break;
                    }
                    aborted++;
                    rewind(consumer);
                }
            }
        }
        synchronized (errors) {
            Driver.emit(Json.obj("event", "done", "copied", copied, "committed", committed,
                    "aborted", aborted, "errors", new TreeMap<>(errors)));
        }
        return 0;
    }

    private static void count(Map<String, Integer> errors, String where, Throwable e) {
        Throwable cause = e instanceof KafkaException && e.getCause() instanceof KafkaException ? e.getCause() : e;
        synchronized (errors) {
            errors.merge(where + ":" + cause.getClass().getSimpleName(), 1, Integer::sum);
        }
    }

    private static void rewind(KafkaConsumer<byte[], byte[]> consumer) {
        var assigned = consumer.assignment();
        Map<TopicPartition, OffsetAndMetadata> committed = consumer.committed(assigned, Duration.ofSeconds(30));
        for (TopicPartition tp : assigned) {
            OffsetAndMetadata om = committed.get(tp);
            if (om != null) consumer.seek(tp, om.offset());
            else consumer.seekToBeginning(List.of(tp));
        }
    }

    private static Properties producerProps(Args a) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, a.require("bootstrap"));
        p.put(ProducerConfig.CLIENT_ID_CONFIG, "kbroker-eos-member");
        p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, a.require("transactional-id"));
        p.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        extra(p, a, "producer.");
        return p;
    }

    private static Properties consumerProps(Args a) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, a.require("bootstrap"));
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, "kbroker-eos-member");
        p.put(ConsumerConfig.GROUP_ID_CONFIG, a.require("group"));
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        extra(p, a, "consumer.");
        return p;
    }

    private static void extra(Properties p, Args a, String prefix) {
        for (String kv : a.all("property")) {
            int eq = kv.indexOf('=');
            if (eq <= 0) throw new IllegalArgumentException("--property wants k=v, got " + kv);
            if (kv.startsWith(prefix)) p.put(kv.substring(prefix.length(), eq), kv.substring(eq + 1));
        }
    }
}
