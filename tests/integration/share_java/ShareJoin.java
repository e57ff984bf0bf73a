// A Java KafkaShareConsumer (kafka-clients 4.4) that subscribes, polls for a while and closes:
// run as a single-file program with the driver jar on the class path, e.g.
//   java -cp kbroker-java-driver.jar ShareJoin.java BOOTSTRAP GROUP TOPIC SECONDS
// It prints "polling" once running, every record as "record <partition> <offset> <value>",
// each poll error as "error <class>: <message>" (ShareFetch may be unsupported), then "closed".
import java.time.Duration;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.StringDeserializer;

public class ShareJoin {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("group.id", args[1]);
        props.put("client.id", "share-join");
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        long until = System.currentTimeMillis() + Long.parseLong(args[3]) * 1000;
        try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(props)) {
            consumer.subscribe(List.of(args[2]));
            System.out.println("polling");
            System.out.flush();
            String lastError = "";
            while (System.currentTimeMillis() < until) {
                try {
                    for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(500))) {
                        System.out.println("record " + r.partition() + " " + r.offset() + " " + r.value());
                    }
                } catch (Exception e) {
                    String error = "error " + e.getClass().getSimpleName() + ": " + e.getMessage();
                    if (!error.equals(lastError)) {
                        System.out.println(error);
                        lastError = error;
                    }
                    Thread.sleep(200);
                }
                System.out.flush();
            }
        }
        System.out.println("closed");
    }
}
