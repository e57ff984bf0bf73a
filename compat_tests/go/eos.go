package main

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// eosCopy is one member of a transactional consume-transform-produce chain, written as franz-go's
// documentation shows it (kgo.GroupTransactSession): it reads --input in the consumer group
// --group (read_committed), writes each record to --output (same key, same partition, value
// prefixed with --value-prefix), and commits the group's offsets in the same transaction. The
// records of one poll form one transaction.
//
// It stops after --max-ms, after --idle-ms without a record once it has copied something, after
// --transactions transactions (a member leaving mid-stream), or on SIGTERM; then it prints a
// "done" event with its counts and every error by name (produce callbacks, End, fetches), so a
// harness can tell Kafka's answers apart. The event also times the transactions (milliseconds,
// p50/p99/max): "cycle_ms" from one End's return to the next (a whole poll, produce, End
// cycle), "poll_ms" the PollFetches that fed a transaction, "end_ms" the End (flush, offsets in
// the transaction, EndTxn).
//
//	kbroker-go-driver eos-copy --bootstrap H:P --input IN --output OUT --group G
//	     --transactional-id ID [--value-prefix P] [--max-ms 120000] [--idle-ms 10000]
//	     [--transactions N] [--client-id ID] [--property k=v ...]
func eosCopy(ctx context.Context, a *args) (int, error) {
	input, err := a.require("input")
	if err != nil {
		return 64, err
	}
	output, err := a.require("output")
	if err != nil {
		return 64, err
	}
	group, err := a.require("group")
	if err != nil {
		return 64, err
	}
	txnID, err := a.require("transactional-id")
	if err != nil {
		return 64, err
	}
	prefix := a.get("value-prefix", "")
	maxMs, err := a.getInt("max-ms", 120000)
	if err != nil {
		return 64, err
	}
	idleMs, err := a.getInt("idle-ms", 10000)
	if err != nil {
		return 64, err
	}
	maxTxns, err := a.getInt("transactions", 0)
	if err != nil {
		return 64, err
	}
	opts, err := baseOpts(a)
	if err != nil {
		return 64, err
	}
	props, err := propertyOpts(a, false)
	if err != nil {
		return 64, err
	}
	opts = append(opts, props...)
	opts = append(opts,
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(input),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets(),
		kgo.TransactionalID(txnID), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.FetchMaxWait(500*time.Millisecond))

	ctx, cancel := context.WithTimeout(ctx, time.Duration(maxMs)*time.Millisecond)
	defer cancel()
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-signals
		cancel()
	}()

	sess, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		return 1, err
	}
	defer sess.Close()

	var mu sync.Mutex
	errs := map[string]int{}
	countError := func(where string, err error) {
		name, _ := errorName(err)
		mu.Lock()
		errs[where+":"+name]++
		mu.Unlock()
	}
	copied, committed, aborted := 0, 0, 0
	lastRecord := time.Now()
	var cycles, polls, ends []float64
	var lastEnd time.Time
	for ctx.Err() == nil {
		if maxTxns > 0 && int64(committed+aborted) >= maxTxns {
			break
		}
		if copied > 0 && time.Since(lastRecord) > time.Duration(idleMs)*time.Millisecond {
			break
		}
		pollStart := time.Now()
		fetches := sess.PollFetches(ctx)
		if fetches.IsClientClosed() {
			break
		}
		fetches.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				countError("fetch", err)
			}
		})
		if fetches.NumRecords() == 0 {
			continue
		}
		lastRecord = time.Now()
		polls = append(polls, ms(lastRecord.Sub(pollStart)))
		if err := sess.Begin(); err != nil {
			countError("begin", err)
			return 1, err
		}
		n := 0
		fetches.EachRecord(func(r *kgo.Record) {
			n++
			value := append([]byte(prefix), r.Value...)
			sess.Produce(ctx, &kgo.Record{Topic: output, Partition: r.Partition, Key: r.Key,
				Value: value}, func(_ *kgo.Record, err error) {
				if err != nil {
					countError("produce", err)
				}
			})
		})
		endStart := time.Now()
		ok, err := sess.End(ctx, kgo.TryCommit)
		now := time.Now()
		ends = append(ends, ms(now.Sub(endStart)))
		if !lastEnd.IsZero() {
			cycles = append(cycles, ms(now.Sub(lastEnd)))
		}
		lastEnd = now
		if err != nil {
			countError("end", err)
		}
		if ok {
			committed++
			copied += n
		} else {
			aborted++
		}
	}
	emit(obj{"event", "done", "copied", copied, "committed", committed, "aborted", aborted,
		"errors", sortedCounts(errs), "cycle_ms", quantiles(cycles), "poll_ms", quantiles(polls),
		"end_ms", quantiles(ends)})
	return 0, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// quantiles is {"n", "p50", "p99", "max"} of xs (milliseconds), null without any.
func quantiles(xs []float64) any {
	if len(xs) == 0 {
		return nil
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	at := func(q float64) float64 {
		i := int(q * float64(len(s)))
		if i >= len(s) {
			i = len(s) - 1
		}
		return s[i]
	}
	return obj{"n", len(s), "p50", at(0.5), "p99", at(0.99), "max", s[len(s)-1]}
}

// sortedCounts is errs as a JSON object with its keys in order (stable output).
func sortedCounts(counts map[string]int) obj {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	o := obj{}
	for _, k := range keys {
		o = append(o, k, counts[k])
	}
	return o
}
