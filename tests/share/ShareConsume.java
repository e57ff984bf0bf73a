// A Java KafkaShareConsumer (kafka-clients 4.4) for the share-group scenarios, run as a
// single-file program with the driver jar on the class path:
//   java -cp kbroker-java-driver.jar ShareConsume.java BOOTSTRAP GROUP TOPIC SECONDS MODE
// MODE: "implicit" (records accepted by the next poll), or "explicit:POLICY" where POLICY picks
// each record's acknowledgement from its value's number n (value "x<n>"): "accept",
// "release-mod3" (n%3==0 released on its first delivery, n%3==1 rejected, the rest accepted),
// "hold" (acknowledge nothing: print the first records, then sleep holding their locks).
// Prints "record <offset> <deliveryCount> <value>" per record and "ack-error <message>" for
// failed acknowledgements, then "closed"; it stops early after STOP_AFTER records if set.
import java.time.Duration;
import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.StringDeserializer;

public class ShareConsume {
    public static void main(String[] args) throws Exception {
        String mode = args[4];
        boolean explicit = mode.startsWith("explicit");
        String policy = explicit ? mode.substring("explicit:".length()) : "";
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("group.id", args[1]);
        props.put("client.id", "share-consume");
        props.put("share.acknowledgement.mode", explicit ? "explicit" : "implicit");
        props.put("key.deserializer", StringDeserializer.class.getName());
        props.put("value.deserializer", StringDeserializer.class.getName());
        long until = System.currentTimeMillis() + Long.parseLong(args[3]) * 1000;
        try (KafkaShareConsumer<String, String> consumer = new KafkaShareConsumer<>(props)) {
            consumer.setAcknowledgementCommitCallback((offsets, exception) -> {
                if (exception != null) {
                    System.out.println("ack-error " + exception.getMessage());
                }
            });
            consumer.subscribe(List.of(args[2]));
            while (System.currentTimeMillis() < until) {
                var records = consumer.poll(Duration.ofMillis(500));
                for (ConsumerRecord<String, String> r : records) {
                    int count = r.deliveryCount().orElse((short) -1);
                    System.out.println("record " + r.offset() + " " + count + " " + r.value());
                    if (explicit && !policy.equals("hold")) {
                        consumer.acknowledge(r, choose(policy, r.value(), count));
                    }
                }
                if (policy.equals("hold") && !records.isEmpty()) {
                    System.out.println("holding");
                    System.out.flush();
                    Thread.sleep(Long.MAX_VALUE);  // until killed
                }
                if (explicit) {
                    consumer.commitSync();
                }
                System.out.flush();
            }
        }
        System.out.println("closed");
    }

    static AcknowledgeType choose(String policy, String value, int deliveryCount) {
        if (!policy.equals("release-mod3")) {
            return AcknowledgeType.ACCEPT;
        }
        int n = Integer.parseInt(value.substring(1));
        if (n % 3 == 0 && deliveryCount == 1) {
            return AcknowledgeType.RELEASE;
        }
        return n % 3 == 1 ? AcknowledgeType.REJECT : AcknowledgeType.ACCEPT;
    }
}
