package dev.kbroker;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ListOffsetsResult.ListOffsetsResultInfo;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TopicListing;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionReplica;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
// Kafka 4.4 moved AppInfoParser (the client version and commit id) into an internals package.
import org.apache.kafka.common.utils.internals.AppInfoParser;

/**
 * kbroker Java compatibility driver. Every subcommand prints JSON lines on stdout.
 *
 * <pre>
 * java -jar kbroker-java-driver.jar version
 * java -jar kbroker-java-driver.jar produce --bootstrap H:P --topic T --count N
 *      [--compression none|gzip|snappy|lz4|zstd] [--acks all|1|0] [--idempotent true|false]
 *      [--key-prefix k] [--value-prefix v] [--null-key-every N] [--headers] [--partition P]
 *      [--linger-ms MS] [--client-id ID] [--property k=v ...] [--timestamp MS] [--value-size N]
 *      [--transactional-id ID [--transaction commit|abort]]  (all records in one transaction)
 * java -jar kbroker-java-driver.jar consume --bootstrap H:P --topic T --count N [--group G]
 *      [--from-beginning] [--timeout-ms MS] [--isolation read_committed|read_uncommitted]
 *      [--client-id ID] [--property k=v ...]
 * java -jar kbroker-java-driver.jar admin --bootstrap H:P create-topic --topic T [--partitions P]
 *      [--replication-factor R] [--config k=v ...]
 * java -jar kbroker-java-driver.jar admin --bootstrap H:P delete-topic|describe-topic --topic T
 * java -jar kbroker-java-driver.jar admin --bootstrap H:P list-topics [--internal]
 * java -jar kbroker-java-driver.jar admin --bootstrap H:P create-partitions --topic T --partitions N
 * java -jar kbroker-java-driver.jar admin --bootstrap H:P describe-configs --topic T
 * java -jar kbroker-java-driver.jar admin --bootstrap H:P alter-configs --topic T --config k=v ...
 * java -jar kbroker-java-driver.jar admin --bootstrap H:P list-offsets --topic T [--timestamp MS]
 * java -jar kbroker-java-driver.jar admin --bootstrap H:P delete-records --topic T --partition P --offset O
 * java -jar kbroker-java-driver.jar admin --bootstrap H:P move-log-dir --topic T --partition P --broker B --log-dir D
 * java -jar kbroker-java-driver.jar share-consume --bootstrap H:P --topic T --group G --count N
 *      [--ack implicit|accept|release|reject|hold] [--timeout-ms MS]  (a share group member, see ShareConsume.java)
 * java -jar kbroker-java-driver.jar eos --bootstrap H:P --input IN --output OUT --group G
 *      --transactional-id TID [--max-per-txn N]  (exactly-once copier, see Eos.java; runs until killed)
 * java -jar kbroker-java-driver.jar eos-member --bootstrap H:P --input IN --output OUT --group G
 *      --transactional-id TID [--transactions N] [--max-ms MS]  (a chain member in a group, see EosMember.java)
 * java -jar kbroker-java-driver.jar sr-produce|sr-consume|sr-register --registry URL ...
 *      (Avro in Confluent's wire format through a Confluent-API registry client, see SchemaRegistry.java)
 * java -jar kbroker-java-driver.jar streams-count --bootstrap H:P --input IN --output OUT
 *      --application-id ID --expect N  (Kafka Streams count with exactly_once_v2, see StreamsCount.java)
 * </pre>
 *
 * Exit codes: 0 ok, 1 error (an {"event":"error"} line is printed), 2 timeout, 64 usage.
 */
public final class Driver {
    private Driver() {}

    public static void main(String[] argv) {
        if (argv.length == 0) {
            usage();
            System.exit(64);
        }
        int rc;
        try {
            rc = switch (argv[0]) {
                case "produce" -> produce(new Args(argv, 1, "headers"));
                case "consume" -> consume(new Args(argv, 1, "from-beginning", "pattern"));
                case "admin" -> admin(new Args(argv, 1, "internal"));
                case "eos" -> Eos.run(new Args(argv, 1));
                case "eos-member" -> EosMember.run(new Args(argv, 1));
                case "streams-count" -> StreamsCount.run(new Args(argv, 1));
                case "txn-produce" -> TxnBench.produce(new Args(argv, 1));
                case "txn-consume" -> TxnBench.consume(new Args(argv, 1));
                case "share-consume" -> ShareConsume.run(new Args(argv, 1));
                case "sr-produce" -> SchemaRegistry.produce(new Args(argv, 1));
                case "sr-consume" -> SchemaRegistry.consume(new Args(argv, 1));
                case "sr-register" -> SchemaRegistry.register(new Args(argv, 1));
                case "version" -> {
                    emit(Json.obj("event", "version", "client", "java",
                            "kafkaClients", AppInfoParser.getVersion(), "commitId", AppInfoParser.getCommitId()));
                    yield 0;
                }
                default -> {
                    usage();
                    yield 64;
                }
            };
        } catch (IllegalArgumentException e) {
            emit(Json.obj("event", "error", "error", "usage", "message", e.getMessage()));
            rc = 64;
        } catch (Exception e) {
            Throwable c = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
            StringBuilder message = new StringBuilder(String.valueOf(c.getMessage()));
            for (Throwable cause = c.getCause(); cause != null && cause != cause.getCause(); cause = cause.getCause())
                message.append("; caused by ").append(cause.getClass().getSimpleName()).append(": ").append(cause.getMessage());
            emit(Json.obj("event", "error", "error", c.getClass().getSimpleName(), "message", message.toString()));
            rc = 1;
        }
        System.out.flush();
        System.exit(rc);
    }

    private static void usage() {
        System.err.println("usage: Driver produce|consume|admin|version ... (see Driver.java javadoc)");
    }

    static synchronized void emit(Map<String, Object> m) {
        System.out.println(Json.write(m));
        System.out.flush();
    }

    static void extraProps(Properties p, Args a) {
        for (String kv : a.all("property")) {
            int eq = kv.indexOf('=');
            if (eq <= 0) throw new IllegalArgumentException("--property wants k=v, got " + kv);
            p.put(kv.substring(0, eq), kv.substring(eq + 1));
        }
    }

    private static byte[] utf8(String s) {
        return s == null ? null : s.getBytes(StandardCharsets.UTF_8);
    }

    static String str(byte[] b) {
        return b == null ? null : new String(b, StandardCharsets.UTF_8);
    }

    // ------------------------------------------------------------------ produce

    static int produce(Args a) throws Exception {
        String topic = a.require("topic");
        int count = a.getInt("count", 10);
        String keyPrefix = a.get("key-prefix", "key-");
        String valuePrefix = a.get("value-prefix", "value-");
        int nullKeyEvery = a.getInt("null-key-every", 0);
        boolean headers = a.flag("headers");
        String partStr = a.get("partition", null);
        Integer partition = partStr == null ? null : Integer.valueOf(partStr);
        String tsStr = a.get("timestamp", null);
        Long timestamp = tsStr == null ? null : Long.valueOf(tsStr);
        int valueSize = a.getInt("value-size", 0);

        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, a.require("bootstrap"));
        p.put(ProducerConfig.CLIENT_ID_CONFIG, a.get("client-id", "kbroker-java-driver"));
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, a.get("compression", "none"));
        p.put(ProducerConfig.ACKS_CONFIG, a.get("acks", "all"));
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, String.valueOf(a.getBool("idempotent", true)));
        p.put(ProducerConfig.LINGER_MS_CONFIG, a.get("linger-ms", "5"));
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        if (valueSize > 0) {
            // room for the largest record plus its batch and request framing
            p.put(ProducerConfig.MAX_REQUEST_SIZE_CONFIG, String.valueOf(Math.max(1048576, valueSize + 4096)));
        }
        String transactionalId = a.get("transactional-id", null);
        String transaction = a.get("transaction", "commit");
        if (transactionalId != null) {
            p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        }
        extraProps(p, a);

        AtomicInteger acked = new AtomicInteger();
        AtomicReference<Exception> failure = new AtomicReference<>();
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            if (transactionalId != null) {
                producer.initTransactions();
                producer.beginTransaction();
            }
            for (int i = 0; i < count; i++) {
                boolean nullKey = nullKeyEvery > 0 && i % nullKeyEvery == nullKeyEvery - 1;
                byte[] key = nullKey ? null : utf8(keyPrefix + i);
                byte[] value = utf8(valuePrefix + i);
                if (value.length < valueSize) {
                    byte[] padded = Arrays.copyOf(value, valueSize);
                    Arrays.fill(padded, value.length, valueSize, (byte) '.');
                    value = padded;
                }
                Long ts = timestamp == null ? null : timestamp + i;
                RecordHeaders hs = new RecordHeaders();
                if (headers) {
                    hs.add("h-index", utf8(Integer.toString(i)));
                    hs.add("h-client", utf8("java"));
                }
                final int idx = i;
                producer.send(new ProducerRecord<>(topic, partition, ts, key, value, hs), (md, ex) -> {
                    if (ex != null) {
                        failure.compareAndSet(null, ex);
                        emit(Json.obj("event", "error", "index", idx, "error", ex.getClass().getSimpleName(),
                                "message", String.valueOf(ex.getMessage())));
                    } else {
                        acked.incrementAndGet();
                        emit(Json.obj("event", "produced", "index", idx, "topic", md.topic(),
                                "partition", md.partition(), "offset", md.offset(), "timestamp", md.timestamp()));
                    }
                });
            }
            producer.flush();
            if (transactionalId != null) {
                if ("abort".equals(transaction)) {
                    producer.abortTransaction();
                } else {
                    producer.commitTransaction();
                }
                emit(Json.obj("event", "transaction", "result", transaction));
            }
        }
        emit(Json.obj("event", "done", "produced", acked.get(), "requested", count));
        return failure.get() == null && acked.get() == count ? 0 : 1;
    }

    // ------------------------------------------------------------------ consume

    static int consume(Args a) {
        String topic = a.require("topic");
        int count = a.getInt("count", 10);
        long timeoutMs = a.getLong("timeout-ms", 30000);
        String group = a.get("group", null);
        boolean fromBeginning = a.flag("from-beginning");
        // --pattern: the topic is a regular expression (a group subscription only). On the
        // consumer protocol the broker evaluates it (RE2J's SubscriptionPattern, KIP-848); on the
        // classic protocol the client matches it against metadata (java.util.regex).
        boolean pattern = a.flag("pattern");
        if (pattern && group == null) throw new IllegalArgumentException("--pattern needs --group");

        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, a.require("bootstrap"));
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, a.get("client-id", "kbroker-java-driver"));
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, fromBeginning ? "earliest" : "latest");
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, a.get("isolation", "read_uncommitted"));
        if (group != null) {
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        } else {
            p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        }
        extraProps(p, a);

        int seen = 0;
        long deadline = System.currentTimeMillis() + timeoutMs;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            if (group != null && pattern) {
                if ("consumer".equalsIgnoreCase(p.getProperty(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic"))) {
                    consumer.subscribe(new SubscriptionPattern(topic));
                } else {
                    consumer.subscribe(java.util.regex.Pattern.compile(topic));
                }
            } else if (group != null) {
                consumer.subscribe(List.of(topic));
            } else {
                List<TopicPartition> tps = new ArrayList<>();
                while (tps.isEmpty() && System.currentTimeMillis() < deadline) {
                    List<PartitionInfo> parts = consumer.partitionsFor(topic, Duration.ofMillis(
                            Math.max(1, deadline - System.currentTimeMillis())));
                    if (parts != null) {
                        for (PartitionInfo pi : parts) tps.add(new TopicPartition(topic, pi.partition()));
                    }
                    if (tps.isEmpty()) sleep(200);
                }
                consumer.assign(tps);
                if (fromBeginning) consumer.seekToBeginning(tps);
                else consumer.seekToEnd(tps);
            }
            while (seen < count && System.currentTimeMillis() < deadline) {
                long left = Math.max(1, Math.min(500, deadline - System.currentTimeMillis()));
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(left))) {
                    List<Object> hs = new ArrayList<>();
                    for (Header h : r.headers()) hs.add(Json.obj("key", h.key(), "value", str(h.value())));
                    emit(Json.obj("event", "record", "topic", r.topic(), "partition", r.partition(),
                            "offset", r.offset(), "key", str(r.key()), "value", str(r.value()), "headers", hs,
                            "timestamp", r.timestamp(), "timestampType", r.timestampType().name,
                            "leaderEpoch", r.leaderEpoch().orElse(null)));
                    seen++;
                }
            }
            if (group != null && seen > 0) consumer.commitSync();
        }
        boolean ok = seen >= count;
        emit(Json.obj("event", "done", "consumed", seen, "requested", count, "timedOut", !ok));
        return ok ? 0 : 2;
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    // ------------------------------------------------------------------ admin

    static int admin(Args a) throws Exception {
        if (a.positional.isEmpty()) throw new IllegalArgumentException("admin needs an action");
        String action = a.positional.get(0);
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, a.require("bootstrap"));
        p.put(AdminClientConfig.CLIENT_ID_CONFIG, a.get("client-id", "kbroker-java-driver"));
        extraProps(p, a);
        try (Admin admin = Admin.create(p)) {
            switch (action) {
                case "create-topic" -> {
                    String topic = a.require("topic");
                    NewTopic nt = new NewTopic(topic, a.getInt("partitions", 1),
                            (short) a.getInt("replication-factor", 1));
                    nt.configs(configs(a));
                    admin.createTopics(List.of(nt)).all().get();
                    emit(Json.obj("event", "created", "topic", topic, "partitions", nt.numPartitions(),
                            "replicationFactor", (int) nt.replicationFactor()));
                }
                case "delete-topic" -> {
                    String topic = a.require("topic");
                    admin.deleteTopics(List.of(topic)).all().get();
                    emit(Json.obj("event", "deleted", "topic", topic));
                }
                case "describe-topic" -> {
                    String topic = a.require("topic");
                    TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
                    List<Object> parts = new ArrayList<>();
                    for (TopicPartitionInfo tp : d.partitions()) {
                        parts.add(Json.obj("partition", tp.partition(),
                                "leader", tp.leader() == null ? null : tp.leader().id(),
                                "replicas", ids(tp.replicas()), "isr", ids(tp.isr())));
                    }
                    emit(Json.obj("event", "topic", "topic", d.name(), "topicId", d.topicId().toString(),
                            "internal", d.isInternal(), "partitions", parts));
                }
                case "list-topics" -> {
                    Collection<TopicListing> ls = admin.listTopics(
                            new org.apache.kafka.clients.admin.ListTopicsOptions().listInternal(a.flag("internal")))
                            .listings().get();
                    Set<String> names = new TreeSet<>();
                    for (TopicListing l : ls) names.add(l.name());
                    emit(Json.obj("event", "topics", "topics", new ArrayList<>(names)));
                }
                case "create-partitions" -> {
                    String topic = a.require("topic");
                    int total = Integer.parseInt(a.require("partitions"));
                    admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(total))).all().get();
                    emit(Json.obj("event", "partitions-created", "topic", topic, "partitions", total));
                }
                case "describe-configs" -> {
                    String topic = a.require("topic");
                    ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
                    Config cfg = admin.describeConfigs(List.of(res)).all().get().get(res);
                    Map<String, Object> configs = new TreeMap<>();
                    for (ConfigEntry e : cfg.entries()) configs.put(e.name(), e.value());
                    emit(Json.obj("event", "configs", "topic", topic, "configs", configs));
                }
                case "alter-configs" -> {
                    String topic = a.require("topic");
                    Map<String, String> wanted = configs(a);
                    if (wanted.isEmpty()) throw new IllegalArgumentException("alter-configs needs --config k=v");
                    List<AlterConfigOp> ops = new ArrayList<>();
                    for (Map.Entry<String, String> e : wanted.entrySet()) {
                        ops.add(new AlterConfigOp(new ConfigEntry(e.getKey(), e.getValue()), AlterConfigOp.OpType.SET));
                    }
                    ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
                    admin.incrementalAlterConfigs(Map.of(res, ops)).all().get();
                    emit(Json.obj("event", "configs-altered", "topic", topic, "configs", wanted));
                }
                case "list-offsets" -> {
                    String topic = a.require("topic");
                    String tsStr = a.get("timestamp", null);
                    TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
                    List<TopicPartition> tps = new ArrayList<>();
                    for (TopicPartitionInfo tp : d.partitions()) tps.add(new TopicPartition(topic, tp.partition()));
                    tps.sort((x, y) -> Integer.compare(x.partition(), y.partition()));
                    Map<String, OffsetSpec> specs = new LinkedHashMap<>();
                    specs.put("earliest", OffsetSpec.earliest());
                    specs.put("latest", OffsetSpec.latest());
                    if (tsStr != null) specs.put("forTimestamp", OffsetSpec.forTimestamp(Long.parseLong(tsStr)));
                    Map<Integer, Map<String, Object>> found = new TreeMap<>();
                    for (TopicPartition tp : tps) found.put(tp.partition(), Json.obj("partition", tp.partition()));
                    for (Map.Entry<String, OffsetSpec> spec : specs.entrySet()) {
                        Map<TopicPartition, OffsetSpec> req = new LinkedHashMap<>();
                        for (TopicPartition tp : tps) req.put(tp, spec.getValue());
                        Map<TopicPartition, ListOffsetsResultInfo> got = admin.listOffsets(req).all().get();
                        for (TopicPartition tp : tps) {
                            // -1: no record at or after the timestamp (Kafka's own answer)
                            found.get(tp.partition()).put(spec.getKey(), got.get(tp).offset());
                        }
                    }
                    emit(Json.obj("event", "offsets", "topic", topic, "partitions", new ArrayList<Object>(found.values())));
                }
                case "delete-records" -> {
                    String topic = a.require("topic");
                    int partition = a.getInt("partition", 0);
                    long offset = Long.parseLong(a.require("offset"));
                    TopicPartition tp = new TopicPartition(topic, partition);
                    long low = admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(offset)))
                            .lowWatermarks().get(tp).get().lowWatermark();
                    emit(Json.obj("event", "records-deleted", "topic", topic, "partition", partition,
                            "lowWatermark", low));
                }
                case "move-log-dir" -> {
                    String topic = a.require("topic");
                    int partition = a.getInt("partition", 0);
                    int broker = Integer.parseInt(a.require("broker"));
                    String dir = a.require("log-dir");
                    TopicPartitionReplica replica = new TopicPartitionReplica(topic, partition, broker);
                    admin.alterReplicaLogDirs(Map.of(replica, dir)).all().get();
                    emit(Json.obj("event", "log-dir-moved", "topic", topic, "partition", partition,
                            "broker", broker, "logDir", dir));
                }
                default -> throw new IllegalArgumentException("unknown admin action " + action);
            }
        }
        return 0;
    }

    /** The --config k=v options, in order. */
    private static Map<String, String> configs(Args a) {
        Map<String, String> cfg = new LinkedHashMap<>();
        for (String kv : a.all("config")) {
            int eq = kv.indexOf('=');
            if (eq <= 0) throw new IllegalArgumentException("--config wants k=v, got " + kv);
            cfg.put(kv.substring(0, eq), kv.substring(eq + 1));
        }
        return cfg;
    }

    private static List<Object> ids(List<Node> nodes) {
        List<Object> out = new ArrayList<>();
        for (Node n : nodes) out.add(n.id());
        return out;
    }
}
