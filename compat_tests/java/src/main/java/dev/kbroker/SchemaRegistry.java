package dev.kbroker;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericData;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.BinaryEncoder;
import org.apache.avro.io.DecoderFactory;
import org.apache.avro.io.EncoderFactory;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.springframework.cloud.stream.schema.registry.client.ConfluentSchemaRegistryClient;
import org.springframework.web.client.HttpStatusCodeException;

/**
 * The schema-registry commands (compat_tests/README.md) with the one Confluent-API client on Maven
 * Central: Spring Cloud Stream's {@code ConfluentSchemaRegistryClient} (register, fetch by id).
 * Confluent's own serializers are not on Maven Central, so the wire format (magic byte 0, the
 * 4-byte id, the Avro binary) is framed here around Apache Avro's generic datum writer and
 * reader, as an application using that client does.
 *
 * <pre>
 * sr-produce --bootstrap H:P --registry URL --topic T --schema-file F --values-file V [--key-prefix k]
 * sr-consume --bootstrap H:P --registry URL --topic T --count N [--timeout-ms MS]
 * sr-register --registry URL --subject S --schema-file F
 * </pre>
 */
final class SchemaRegistry {
    private SchemaRegistry() {}

    private static final ObjectMapper JSON = new ObjectMapper();

    private static ConfluentSchemaRegistryClient client(Args a) {
        if (!"avro".equals(a.get("format", "avro"))) {
            throw new IllegalArgumentException("unsupported --format " + a.get("format", "") + " (avro only)");
        }
        ConfluentSchemaRegistryClient client = new ConfluentSchemaRegistryClient();
        client.setEndpoint(a.require("registry"));
        return client;
    }

    static int produce(Args a) throws Exception {
        String topic = a.require("topic");
        String keyPrefix = a.get("key-prefix", "key-");
        String text = Files.readString(Path.of(a.require("schema-file")));
        List<String> lines = Files.readAllLines(Path.of(a.require("values-file")));
        String subject = topic + "-value";
        int id = client(a).register(subject, "avro", text).getId();
        Driver.emit(Json.obj("event", "registered", "subject", subject, "id", id));
        Schema schema = new Schema.Parser().parse(text);
        GenericDatumWriter<Object> writer = new GenericDatumWriter<>(schema);

        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, a.require("bootstrap"));
        p.put(ProducerConfig.CLIENT_ID_CONFIG, a.get("client-id", "kbroker-java-driver"));
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        Driver.extraProps(p, a);
        int acked = 0;
        int requested = 0;
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            List<java.util.concurrent.Future<RecordMetadata>> sent = new ArrayList<>();
            for (String line : lines) {
                if (line.isBlank()) continue;
                ByteArrayOutputStream out = new ByteArrayOutputStream();
                out.write(0);
                out.write(ByteBuffer.allocate(4).putInt(id).array());
                BinaryEncoder encoder = EncoderFactory.get().binaryEncoder(out, null);
                writer.write(datum(schema, JSON.readTree(line)), encoder);
                encoder.flush();
                byte[] key = (keyPrefix + requested++).getBytes(StandardCharsets.UTF_8);
                sent.add(producer.send(new ProducerRecord<>(topic, key, out.toByteArray())));
            }
            for (int i = 0; i < sent.size(); i++) {
                RecordMetadata md = sent.get(i).get();
                Driver.emit(Json.obj("event", "produced", "index", i, "topic", topic,
                        "partition", md.partition(), "offset", md.offset()));
                acked++;
            }
        }
        Driver.emit(Json.obj("event", "done", "produced", acked, "requested", requested));
        return acked == requested ? 0 : 1;
    }

    static int consume(Args a) throws Exception {
        String topic = a.require("topic");
        int count = a.getInt("count", 10);
        long deadline = System.currentTimeMillis() + a.getLong("timeout-ms", 30000);
        ConfluentSchemaRegistryClient registry = client(a);
        Map<Integer, GenericDatumReader<Object>> readers = new HashMap<>();

        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, a.require("bootstrap"));
        p.put(ConsumerConfig.CLIENT_ID_CONFIG, a.get("client-id", "kbroker-java-driver"));
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        Driver.extraProps(p, a);
        int seen = 0;
        try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
            List<TopicPartition> parts = new ArrayList<>();
            consumer.partitionsFor(topic, Duration.ofMillis(Math.max(1, deadline - System.currentTimeMillis())))
                    .forEach(info -> parts.add(new TopicPartition(topic, info.partition())));
            consumer.assign(parts);
            consumer.seekToBeginning(parts);
            while (seen < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(200))) {
                    ByteBuffer wire = ByteBuffer.wrap(r.value());
                    if (wire.get() != 0) throw new IllegalStateException("offset " + r.offset() + ": magic byte is not 0");
                    int id = wire.getInt();
                    GenericDatumReader<Object> reader = readers.computeIfAbsent(id,
                            i -> new GenericDatumReader<>(new Schema.Parser().parse(registry.fetch(i))));
                    Object value = reader.read(null, DecoderFactory.get().binaryDecoder(
                            r.value(), 5, r.value().length - 5, null));
                    Driver.emit(Json.obj("event", "record", "topic", r.topic(), "partition", r.partition(),
                            "offset", r.offset(), "key", Driver.str(r.key()), "schemaId", id, "value", plain(value)));
                    seen++;
                }
            }
        }
        boolean ok = seen >= count;
        Driver.emit(Json.obj("event", "done", "consumed", seen, "requested", count, "timedOut", !ok));
        return ok ? 0 : 2;
    }

    /** A refusal is an error event with the registry's HTTP status (the client wraps it). */
    static int register(Args a) throws Exception {
        String subject = a.require("subject");
        String text = Files.readString(Path.of(a.require("schema-file")));
        try {
            int id = client(a).register(subject, "avro", text).getId();
            Driver.emit(Json.obj("event", "registered", "subject", subject, "id", id));
            return 0;
        } catch (RuntimeException e) {
            for (Throwable c = e; c != null; c = c.getCause()) {
                if (c instanceof HttpStatusCodeException http) {
                    Driver.emit(Json.obj("event", "error", "error", "refused",
                            "status", http.getStatusCode().value(), "message", e.getMessage()));
                    return 1;
                }
            }
            throw e;
        }
    }

    /** A JSON value as the generic datum of {@code schema} (unions take the branch that fits). */
    static Object datum(Schema schema, JsonNode node) {
        switch (schema.getType()) {
            case RECORD -> {
                GenericRecord record = new GenericData.Record(schema);
                for (Schema.Field f : schema.getFields()) {
                    JsonNode v = node.get(f.name());
                    record.put(f.pos(), v == null ? GenericData.get().getDefaultValue(f) : datum(f.schema(), v));
                }
                return record;
            }
            case ARRAY -> {
                List<Object> items = new ArrayList<>();
                node.forEach(item -> items.add(datum(schema.getElementType(), item)));
                return items;
            }
            case UNION -> {
                for (Schema branch : schema.getTypes()) {
                    if (fits(branch, node)) return datum(branch, node);
                }
                throw new IllegalArgumentException("no branch of " + schema + " fits " + node);
            }
            case NULL -> { return null; }
            case STRING -> { return node.asText(); }
            case LONG -> { return node.asLong(); }
            case INT -> { return node.asInt(); }
            case DOUBLE -> { return node.asDouble(); }
            case BOOLEAN -> { return node.asBoolean(); }
            default -> throw new IllegalArgumentException("values of type " + schema.getType() + " are not mapped");
        }
    }

    private static boolean fits(Schema branch, JsonNode node) {
        return switch (branch.getType()) {
            case NULL -> node.isNull();
            case STRING -> node.isTextual();
            case LONG, INT -> node.isIntegralNumber();
            case DOUBLE -> node.isNumber();
            case BOOLEAN -> node.isBoolean();
            case ARRAY -> node.isArray();
            case RECORD -> node.isObject();
            default -> false;
        };
    }

    /** A decoded datum as plain JSON values (Avro's Utf8 as String, records as ordered maps). */
    static Object plain(Object value) {
        if (value instanceof GenericRecord record) {
            Map<String, Object> out = new LinkedHashMap<>();
            for (Schema.Field f : record.getSchema().getFields()) out.put(f.name(), plain(record.get(f.pos())));
            return out;
        }
        if (value instanceof List<?> list) {
            List<Object> out = new ArrayList<>();
            for (Iterator<?> it = list.iterator(); it.hasNext(); ) out.add(plain(it.next()));
            return out;
        }
        if (value instanceof CharSequence s) return s.toString();
        return value;
    }
}
