package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// baseOpts are the options every subcommand shares: seed brokers and client id.
func baseOpts(a *args) ([]kgo.Opt, error) {
	bootstrap, err := a.require("bootstrap")
	if err != nil {
		return nil, err
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(bootstrap, ",")...),
		kgo.ClientID(a.get("client-id", defaultClientID)),
	}
	// KBROKER_DRIVER_DEBUG=1 (or debug, info, warn) logs franz-go's view of things on stderr.
	if level, ok := map[string]kgo.LogLevel{"1": kgo.LogLevelDebug, "debug": kgo.LogLevelDebug,
		"info": kgo.LogLevelInfo, "warn": kgo.LogLevelWarn}[os.Getenv("KBROKER_DRIVER_DEBUG")]; ok {
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, level, nil)))
	}
	return opts, nil
}

// propertyOpts maps the Java-style "--property k=v" settings that have a franz-go equivalent.
// Settings with no equivalent are reported on stderr and ignored (as Java warns on unknown ones).
// autoCreate is the default for allow.auto.create.topics.
func propertyOpts(a *args, autoCreate bool) ([]kgo.Opt, error) {
	kvs, err := a.keyValues("property")
	if err != nil {
		return nil, err
	}
	var opts []kgo.Opt
	ms := func(v string) (time.Duration, error) {
		n, err := strconv.ParseInt(v, 10, 64)
		return time.Duration(n) * time.Millisecond, err
	}
	security := map[string]string{}
	for _, kv := range kvs {
		k, v := kv[0], kv[1]
		var perr error
		if securityKeys[k] {
			security[k] = v
			continue
		}
		switch k {
		case "allow.auto.create.topics":
			autoCreate, perr = strconv.ParseBool(v)
		case "max.request.size", "batch.max.bytes", "max.message.bytes":
			var n int64
			n, perr = strconv.ParseInt(v, 10, 32)
			opts = append(opts, kgo.ProducerBatchMaxBytes(int32(n)), kgo.BrokerMaxWriteBytes(int32(n)+1<<20))
		case "fetch.max.bytes":
			var n int64
			n, perr = strconv.ParseInt(v, 10, 32)
			opts = append(opts, kgo.FetchMaxBytes(int32(n)))
		case "max.partition.fetch.bytes":
			var n int64
			n, perr = strconv.ParseInt(v, 10, 32)
			opts = append(opts, kgo.FetchMaxPartitionBytes(int32(n)))
		case "fetch.max.wait.ms":
			var d time.Duration
			d, perr = ms(v)
			opts = append(opts, kgo.FetchMaxWait(d))
		case "delivery.timeout.ms":
			var d time.Duration
			d, perr = ms(v)
			opts = append(opts, kgo.RecordDeliveryTimeout(d))
		case "retries":
			var n int64
			n, perr = strconv.ParseInt(v, 10, 32)
			opts = append(opts, kgo.RecordRetries(int(n)))
		case "session.timeout.ms":
			var d time.Duration
			d, perr = ms(v)
			opts = append(opts, kgo.SessionTimeout(d))
		case "heartbeat.interval.ms":
			var d time.Duration
			d, perr = ms(v)
			opts = append(opts, kgo.HeartbeatInterval(d))
		case "rebalance.timeout.ms", "max.poll.interval.ms":
			var d time.Duration
			d, perr = ms(v)
			opts = append(opts, kgo.RebalanceTimeout(d))
		case "group.instance.id":
			opts = append(opts, kgo.InstanceID(v))
		case "group.protocol":
			switch strings.ToLower(v) {
			case "consumer":
				opts = append(opts, kgo.ServerSideBalancer()) // KIP-848
			case "classic":
			default:
				perr = fmt.Errorf("classic or consumer")
			}
		case "metadata.max.age.ms":
			var d time.Duration
			d, perr = ms(v)
			opts = append(opts, kgo.MetadataMaxAge(d))
		default:
			fmt.Fprintf(os.Stderr, "kbroker-go-driver: ignoring --property %s (no franz-go equivalent)\n", k)
		}
		if perr != nil {
			return nil, usagef("--property %s=%s: %v", k, v, perr)
		}
	}
	secure, err := securityOpts(security)
	if err != nil {
		return nil, err
	}
	opts = append(opts, secure...)
	if autoCreate {
		opts = append(opts, kgo.AllowAutoTopicCreation())
	}
	return opts, nil
}

func compression(name string) (kgo.CompressionCodec, error) {
	switch strings.ToLower(name) {
	case "none", "":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, usagef("unknown --compression %s", name)
}

func timestampType(r *kgo.Record) string {
	switch r.Attrs.TimestampType() {
	case 0:
		return "CreateTime"
	case 1:
		return "LogAppendTime"
	}
	return "NoTimestampType"
}
