package main

import (
	"context"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// shareConsume is the contract's share-consume command: one member of a share group (KIP-932,
// kgo.ShareGroup). --ack implicit lets the next poll accept what the previous one returned;
// accept, release and reject mark every record explicitly and flush the acknowledgements after
// each poll; hold marks nothing, prints "holding" and blocks until killed, keeping the records'
// acquisition locks (the lock-expiry scenario).
func shareConsume(ctx context.Context, a *args) (int, error) {
	topic, err := a.require("topic")
	if err != nil {
		return 64, err
	}
	group, err := a.require("group")
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
	ack := a.get("ack", "implicit")
	status := kgo.AckStatus(0)
	switch ack {
	case "implicit", "hold":
	case "accept":
		status = kgo.AckAccept
	case "release":
		status = kgo.AckRelease
	case "reject":
		status = kgo.AckReject
	default:
		return 64, usagef("--ack: implicit|accept|release|reject|hold, got %s", ack)
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
	opts = append(opts, kgo.ShareGroup(group), kgo.ConsumeTopics(topic),
		kgo.FetchMaxWait(500*time.Millisecond))

	ctx, cancel := context.WithDeadline(ctx, time.Now().Add(time.Duration(timeoutMs)*time.Millisecond))
	defer cancel()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return 1, err
	}
	defer cl.Close()

	seen := int64(0)
	reported := map[string]bool{}
	for seen < count && ctx.Err() == nil {
		fetches := cl.PollRecords(ctx, 0)
		fetches.EachError(func(t string, p int32, err error) {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return
			}
			if key := err.Error(); !reported[key] {
				reported[key] = true
				emit(errorEvent(err, "topic", t, "partition", p, "fatal", false))
			}
		})
		fetches.EachRecord(func(r *kgo.Record) {
			emit(obj{"event", "record", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset,
				"key", str(r.Key), "value", str(r.Value), "deliveryCount", r.DeliveryCount()})
			if status != 0 {
				r.Ack(status)
			}
			seen++
		})
		if ack == "hold" && seen > 0 {
			emit(obj{"event", "holding", "records", seen})
			select {} // keep the locks until the scenario kills this process
		}
		if status != 0 && fetches.NumRecords() > 0 {
			if err := cl.FlushAcks(context.Background()); err != nil {
				return 1, err
			}
		}
	}
	ok := seen >= count
	emit(obj{"event", "done", "consumed", seen, "requested", count, "timedOut", !ok})
	if !ok {
		return 2, nil
	}
	return 0, nil
}
