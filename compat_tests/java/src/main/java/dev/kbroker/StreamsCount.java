package dev.kbroker;

import java.time.Duration;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.Stores;

/**
 * A Kafka Streams word-count-shaped app with {@code processing.guarantee=exactly_once_v2}: reads
 * the input topic (String keys), counts records per key in a state store (in memory, so no RocksDB
 * native library; its changelog topic is still written transactionally), and writes every updated
 * count to the output topic (key, count as a decimal string). The record cache is off, so each
 * input record yields exactly one output record: a read_committed reader of the output must see
 * counts 1..n per key, nothing twice.
 *
 * <pre>
 * streams-count --bootstrap H:P --input IN --output OUT --application-id ID --expect N
 *     [--timeout-ms 60000] [--property k=v ...]
 * </pre>
 * Runs until N input records were processed and the app closed cleanly (close commits the last
 * transaction). Events: {@code running} (startupMs: from start() to RUNNING), {@code done}
 * (processed, expected, runMs); an {@code error} if the app failed or the time ran out.
 */
final class StreamsCount {
    private StreamsCount() {}

    static int run(Args a) throws Exception {
        String input = a.require("input");
        String output = a.require("output");
        long expect = a.getLong("expect", -1);
        long timeoutMs = a.getLong("timeout-ms", 60000);
        if (expect <= 0) throw new IllegalArgumentException("--expect N (input records) is required");

        Properties p = new Properties();
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, a.require("bootstrap"));
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, a.require("application-id"));
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.STATE_DIR_CONFIG, System.getProperty("java.io.tmpdir") + "/kbroker-streams-"
                + a.require("application-id"));
        p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        for (String kv : a.all("property")) {
            int eq = kv.indexOf('=');
            if (eq <= 0) throw new IllegalArgumentException("--property wants k=v, got " + kv);
            p.put(kv.substring(0, eq), kv.substring(eq + 1));
        }

        AtomicLong processed = new AtomicLong();
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .peek((k, v) -> processed.incrementAndGet())
                .groupByKey(Grouped.with(Serdes.String(), Serdes.String()))
                .count(Materialized.<String, Long>as(Stores.inMemoryKeyValueStore("counts"))
                        .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long()))
                .toStream()
                .map((k, count) -> KeyValue.pair(k, Long.toString(count)))
                .to(output, Produced.with(Serdes.String(), Serdes.String()));

        CountDownLatch running = new CountDownLatch(1);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        long start = System.nanoTime();
        try (KafkaStreams streams = new KafkaStreams(builder.build(), p)) {
            streams.setStateListener((now, before) -> {
                if (now == KafkaStreams.State.RUNNING) running.countDown();
            });
            streams.setUncaughtExceptionHandler(e -> {
                failure.set(e);
                return org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler
                        .StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
            });
            streams.start();
            long deadline = start + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
            if (!running.await(timeoutMs, TimeUnit.MILLISECONDS)) {
                return fail("timeout", "not RUNNING after " + timeoutMs + " ms (state " + streams.state() + ")");
            }
            Driver.emit(Json.obj("event", "running", "startupMs", (System.nanoTime() - start) / 1_000_000));
            while (processed.get() < expect && failure.get() == null && System.nanoTime() < deadline
                    && streams.state().isRunningOrRebalancing()) {
                Thread.sleep(20);
            }
            if (failure.get() != null) {
                Throwable e = failure.get();
                return fail(e.getClass().getSimpleName(), String.valueOf(e.getMessage()));
            }
            if (processed.get() < expect) {
                return fail("timeout", "processed " + processed.get() + " of " + expect + " records (state "
                        + streams.state() + ")");
            }
            if (!streams.close(Duration.ofMillis(Math.max(1000, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime()))))) {
                return fail("timeout", "close did not finish");
            }
        }
        Driver.emit(Json.obj("event", "done", "processed", processed.get(), "expected", expect,
                "runMs", (System.nanoTime() - start) / 1_000_000));
        return 0;
    }

    private static int fail(String error, String message) {
        Driver.emit(Json.obj("event", "error", "error", error, "message", message));
        return 1;
    }
}
