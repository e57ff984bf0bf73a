// Transactional producer with the Java client (transaction version 2 against Kafka 4.x), used by
// capture_internal_records.py:  java -cp <kafka classpath> TxnProducer.java <bootstrap> <txn id> <topic>
import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

public class TxnProducer {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("transactional.id", args[1]);
        props.put("client.id", "golden-java-txn");
        props.put("transaction.timeout.ms", "60000");
        props.put("key.serializer", StringSerializer.class.getName());
        props.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> p = new KafkaProducer<>(props)) {
            p.initTransactions();
            p.beginTransaction();
            p.send(new ProducerRecord<>(args[2], 0, "jk", "jv")).get();
            p.commitTransaction();
        }
    }
}
