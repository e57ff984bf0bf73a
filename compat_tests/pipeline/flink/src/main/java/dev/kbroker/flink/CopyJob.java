package dev.kbroker.flink;

import java.time.Duration;
import java.util.Properties;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.serialization.SimpleStringSchema;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.ExternalizedCheckpointRetention;
import org.apache.flink.configuration.RestartStrategyOptions;
import org.apache.flink.configuration.StateRecoveryOptions;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * Reads a topic with Flink's Kafka source, tags each record, and writes it with KafkaSink at
 * DeliveryGuarantee.EXACTLY_ONCE (Kafka transactions committed on checkpoints), in a local
 * mini-cluster. Checkpoints every 500 ms into CHECKPOINT_DIR, retained, so a killed job restarts
 * from the latest one when RESTORE_FROM names it.
 *
 *   CopyJob BOOTSTRAP INPUT OUTPUT CHECKPOINT_DIR [RESTORE_FROM]
 */
public final class CopyJob {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], input = args[1], output = args[2], checkpoints = args[3];
        Configuration conf = new Configuration();
        conf.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, "file://" + checkpoints);
        conf.set(CheckpointingOptions.EXTERNALIZED_CHECKPOINT_RETENTION,
                 ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION);
        conf.set(RestartStrategyOptions.RESTART_STRATEGY, "fixed-delay");
        conf.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_ATTEMPTS, 20);
        conf.set(RestartStrategyOptions.RESTART_STRATEGY_FIXED_DELAY_DELAY, Duration.ofSeconds(1));
        if (args.length > 4) {
            conf.set(StateRecoveryOptions.SAVEPOINT_PATH, args[4]);
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(2);
        env.enableCheckpointing(500);

        KafkaSource<String> source = KafkaSource.<String>builder()
            .setBootstrapServers(bootstrap)
            .setTopics(input)
            .setGroupId("flink-copy")
            .setStartingOffsets(OffsetsInitializer.earliest())
            .setValueOnlyDeserializer(new SimpleStringSchema())
            .build();

        Properties producer = new Properties();
        // below the broker's transaction.max.timeout.ms (15 minutes, Kafka's default)
        producer.setProperty("transaction.timeout.ms", "60000");
        KafkaSink<String> sink = KafkaSink.<String>builder()
            .setBootstrapServers(bootstrap)
            .setKafkaProducerConfig(producer)
            .setRecordSerializer(KafkaRecordSerializationSchema.builder()
                .setTopic(output)
                .setValueSerializationSchema(new SimpleStringSchema())
                .build())
            .setDeliveryGuarantee(DeliveryGuarantee.EXACTLY_ONCE)
            .setTransactionalIdPrefix("kbroker-flink-copy")
            .build();

        env.fromSource(source, WatermarkStrategy.noWatermarks(), "kafka-source")
            .map(value -> {
                Thread.sleep(5); // spread the records over several checkpoints
                return value + "|copied";
            })
            .sinkTo(sink);
        env.execute("kbroker-copy");
    }
}
