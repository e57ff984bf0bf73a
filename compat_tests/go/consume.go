package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// consume reads until --count records arrived or --timeout-ms passed. Without --group it assigns
// every partition of the topic directly (kgo.ConsumePartitions; start or end per
// --from-beginning) and commits nothing; with --group it joins the group (kgo.ConsumerGroup +
// ConsumeTopics) and commits what it read at the end.
func consume(ctx context.Context, a *args) (int, error) {
	topic, err := a.require("topic")
	if err != nil {
		return 64, err
	}
	count, err := a.getInt("count", 10)
	if err != nil {
		return 64, err
	}
	timeoutMs, err := a.getInt("timeout-ms", 30000)
	if err != nil {
		return 64, err
	}
	group := a.get("group", "")
	start := kgo.NewOffset().AtEnd()
	if a.flag("from-beginning") {
		start = kgo.NewOffset().AtStart()
	}
	isolation := kgo.ReadUncommitted()
	switch iso := a.get("isolation", "read_uncommitted"); iso {
	case "read_uncommitted":
	case "read_committed":
		isolation = kgo.ReadCommitted()
	default:
		return 64, usagef("unknown --isolation %s", iso)
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
	opts = append(opts, kgo.FetchIsolationLevel(isolation), kgo.FetchMaxWait(500*time.Millisecond))

	deadline := time.Now().Add(time.Duration(timeoutMs) * time.Millisecond)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()

	owned := &assignment{parts: map[int32]bool{}}
	if a.flag("pattern") {
		// --pattern: the topic is a regular expression (a group subscription only).
		if group == "" {
			return 64, usagef("--pattern needs --group")
		}
		opts = append(opts, kgo.ConsumeRegex())
	}
	if group != "" {
		opts = append(opts, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(start), kgo.DisableAutoCommit(),
			// "assigned" carries the whole current assignment (as an eager rebalance hands it
			// out); franz-go's default cooperative-sticky balancer reports increments.
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
				owned.add(m[topic])
			}),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
				owned.remove(m[topic], false)
			}),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
				owned.remove(m[topic], true)
			}))
	} else {
		parts, err := partitionsOf(ctx, opts, topic)
		if err != nil {
			// As the Java driver: no partitions before the deadline is a timeout.
			emit(errorEvent(err, "topic", topic, "fatal", false))
			emit(obj{"event", "done", "consumed", 0, "requested", count, "timedOut", true})
			return 2, nil
		}
		offsets := map[int32]kgo.Offset{}
		for _, p := range parts {
			offsets[p] = start
		}
		opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return 1, err
	}
	defer cl.Close()

	seen := int64(0)
	reported := map[string]bool{}
	for seen < count && ctx.Err() == nil {
		fetches := cl.PollRecords(ctx, int(count-seen))
		fetches.EachError(func(t string, p int32, err error) {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return
			}
			// Fetch errors are mostly retried by the client; print each distinct one once.
			if key := err.Error(); !reported[key] {
				reported[key] = true
				emit(errorEvent(err, "topic", t, "partition", p, "fatal", false))
			}
		})
		fetches.EachRecord(func(r *kgo.Record) {
			hs := make([]any, 0, len(r.Headers))
			for _, h := range r.Headers {
				hs = append(hs, obj{"key", h.Key, "value", str(h.Value)})
			}
			var epoch any
			if r.LeaderEpoch >= 0 {
				epoch = r.LeaderEpoch
			}
			emit(obj{"event", "record", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset,
				"key", str(r.Key), "value", str(r.Value), "headers", hs,
				"timestamp", r.Timestamp.UnixMilli(), "timestampType", timestampType(r),
				"leaderEpoch", epoch})
			seen++
		})
	}
	if group != "" && seen > 0 {
		commitCtx, cancelCommit := context.WithTimeout(context.Background(), 10*time.Second)
		err := cl.CommitUncommittedOffsets(commitCtx)
		cancelCommit()
		if err != nil {
			return 1, err
		}
	}
	ok := seen >= count
	emit(obj{"event", "done", "consumed", seen, "requested", count, "timedOut", !ok})
	if !ok {
		return 2, nil
	}
	return 0, nil
}

// partitionsOf waits (until ctx ends) for the topic's metadata and returns its partitions.
func partitionsOf(ctx context.Context, opts []kgo.Opt, topic string) ([]int32, error) {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var last error
	for {
		td, err := adm.ListTopics(ctx, topic)
		if err == nil {
			d, ok := td[topic]
			switch {
			case !ok:
				err = errors.New("topic missing from metadata response")
			case d.Err != nil:
				err = d.Err
			case len(d.Partitions) == 0:
				err = errors.New("topic has no partitions")
			default:
				var ps []int32
				for _, p := range d.Partitions.Sorted() {
					ps = append(ps, p.Partition)
				}
				return ps, nil
			}
		}
		last = err
		select {
		case <-ctx.Done():
			return nil, last
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func sortedParts(ps []int32) []int32 {
	out := append([]int32{}, ps...)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// assignment tracks a group member's partitions and prints "assigned" when they change.
type assignment struct {
	mu      sync.Mutex
	parts   map[int32]bool
	printed string
}

func (a *assignment) add(ps []int32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range ps {
		a.parts[p] = true
	}
	now := a.sorted()
	if key := fmt.Sprint(now); key != a.printed {
		a.printed = key
		emit(obj{"event", "assigned", "partitions", now})
	}
}

func (a *assignment) remove(ps []int32, lost bool) {
	if len(ps) == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range ps {
		delete(a.parts, p)
	}
	a.printed = ""
	o := obj{"event", "revoked", "partitions", sortedParts(ps)}
	if lost {
		o = append(o, "lost", true)
	}
	emit(o)
}

func (a *assignment) sorted() []int32 {
	out := make([]int32, 0, len(a.parts))
	for p := range a.parts {
		out = append(out, p)
	}
	return sortedParts(out)
}
