package main

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// produce sends --count records and prints one "produced" (or "error") line per record, then
// "done". franz-go's producer is idempotent unless --idempotent false; franz-go requires acks=all
// for idempotence, so when --idempotent is not given it follows --acks. With --transactional-id
// every record goes into one transaction that ends as --transaction says (commit, the default, or
// abort), then a "transaction" event, as the Java driver does.
func produce(ctx context.Context, a *args) (int, error) {
	topic, err := a.require("topic")
	if err != nil {
		return 64, err
	}
	count, err := a.getInt("count", 10)
	if err != nil {
		return 64, err
	}
	nullKeyEvery, err := a.getInt("null-key-every", 0)
	if err != nil {
		return 64, err
	}
	lingerMs, err := a.getInt("linger-ms", 5)
	if err != nil {
		return 64, err
	}
	timestamp, err := a.getInt("timestamp", -1)
	if err != nil {
		return 64, err
	}
	valueSize, err := a.getInt("value-size", 0)
	if err != nil {
		return 64, err
	}
	timeoutMs, err := a.getInt("timeout-ms", 0)
	if err != nil {
		return 64, err
	}
	keyPrefix := a.get("key-prefix", "key-")
	valuePrefix := a.get("value-prefix", "value-")
	headers := a.flag("headers")
	partition := int32(-1)
	if a.has("partition") {
		p, err := a.getInt("partition", 0)
		if err != nil {
			return 64, err
		}
		partition = int32(p)
	}
	transactionalID := a.get("transactional-id", "")
	transaction := a.get("transaction", "commit")
	if transaction != "commit" && transaction != "abort" {
		return 64, usagef("unknown --transaction %s (commit or abort)", transaction)
	}
	codec, err := compression(a.get("compression", "none"))
	if err != nil {
		return 64, err
	}

	opts, err := baseOpts(a)
	if err != nil {
		return 64, err
	}
	var acks kgo.Acks
	acksName := a.get("acks", "all")
	switch acksName {
	case "all", "-1":
		acks = kgo.AllISRAcks()
	case "1":
		acks = kgo.LeaderAck()
	case "0":
		acks = kgo.NoAck()
	default:
		return 64, usagef("unknown --acks %s", acksName)
	}
	idempotent, err := a.getBool("idempotent", acks == kgo.AllISRAcks())
	if err != nil {
		return 64, err
	}
	if idempotent && acks != kgo.AllISRAcks() {
		return 64, usagef("--idempotent true needs --acks all")
	}
	opts = append(opts,
		kgo.RequiredAcks(acks),
		kgo.ProducerBatchCompression(codec),
		kgo.ProducerLinger(time.Duration(lingerMs)*time.Millisecond),
		kgo.DefaultProduceTopic(topic),
	)
	if timeoutMs > 0 {
		// Not kgo.RecordDeliveryTimeout: franz-go measures it from the record's Timestamp, so an
		// explicit --timestamp in the past would expire records before they are sent. The
		// records' context ends delivery instead.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(timeoutMs)*time.Millisecond)
		defer cancel()
	}
	if valueSize > 0 {
		// Leave room for the batch and request framing around the largest record.
		opts = append(opts, kgo.ProducerBatchMaxBytes(int32(valueSize)+64<<10),
			kgo.BrokerMaxWriteBytes(int32(valueSize)+1<<20))
	}
	if !idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	if transactionalID != "" {
		if !idempotent {
			return 64, usagef("--transactional-id needs an idempotent producer (--idempotent true)")
		}
		opts = append(opts, kgo.TransactionalID(transactionalID))
	}
	if partition >= 0 {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	// Java's producer asks for auto-creation in its metadata requests; so does this driver unless
	// --property allow.auto.create.topics=false.
	props, err := propertyOpts(a, true)
	if err != nil {
		return 64, err
	}
	opts = append(opts, props...)

	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return 1, err
	}
	defer cl.Close()
	if transactionalID != "" {
		// franz-go initialises the producer id (InitProducerId) lazily, on the first produce.
		if err := cl.BeginTransaction(); err != nil {
			return 1, err
		}
	}

	var mu sync.Mutex
	acked := 0
	failed := false
	var wg sync.WaitGroup
	for i := int64(0); i < count; i++ {
		idx := i
		value := []byte(valuePrefix + strconv.FormatInt(i, 10))
		if int64(len(value)) < valueSize {
			value = append(value, bytes.Repeat([]byte{'.'}, int(valueSize)-len(value))...)
		}
		r := &kgo.Record{Topic: topic, Partition: partition, Value: value}
		if a.has("timestamp") {
			r.Timestamp = time.UnixMilli(timestamp + i)
		}
		if !(nullKeyEvery > 0 && i%nullKeyEvery == nullKeyEvery-1) {
			r.Key = []byte(keyPrefix + strconv.FormatInt(i, 10))
		}
		if headers {
			r.Headers = []kgo.RecordHeader{
				{Key: "h-index", Value: []byte(strconv.FormatInt(i, 10))},
				{Key: "h-client", Value: []byte("go")},
			}
		}
		wg.Add(1)
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				failed = true
				mu.Unlock()
				emit(errorEvent(err, "index", idx))
				return
			}
			mu.Lock()
			acked++
			mu.Unlock()
			emit(obj{"event", "produced", "index", idx, "topic", r.Topic, "partition", r.Partition,
				"offset", r.Offset, "timestamp", r.Timestamp.UnixMilli()})
		})
	}
	if err := cl.Flush(ctx); err != nil {
		// --timeout-ms passed: fail what is still buffered (their callbacks print the errors).
		emit(obj{"event", "error", "error", "TimeoutError", "message",
			fmt.Sprintf("records undelivered after %d ms", timeoutMs)})
		cl.PurgeTopicsFromProducing(topic)
		waitUpTo(&wg, 5*time.Second)
		mu.Lock()
		failed = true
		mu.Unlock()
	}
	waitUpTo(&wg, 5*time.Second)
	mu.Lock()
	defer mu.Unlock()
	if transactionalID != "" && !failed {
		end := kgo.TryCommit
		if transaction == "abort" {
			end = kgo.TryAbort
		}
		if err := cl.EndTransaction(ctx, end); err != nil {
			emit(errorEvent(err))
			failed = true
		} else {
			emit(obj{"event", "transaction", "result", transaction})
		}
	}
	emit(obj{"event", "done", "produced", acked, "requested", count})
	if failed || int64(acked) != count {
		return 1, nil
	}
	return 0, nil
}

func waitUpTo(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
	}
}
