package main

import (
	"context"
	"encoding/base64"
	"errors"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// admin runs one kadm action. The Java driver's four actions print the same events as Java
// (created, deleted, topic, topics); the others are documented in README.md.
func admin(ctx context.Context, a *args) (int, error) {
	if len(a.positional) == 0 {
		return 64, usagef("admin needs an action")
	}
	action := a.positional[0]
	opts, err := baseOpts(a)
	if err != nil {
		return 64, err
	}
	props, err := propertyOpts(a, false)
	if err != nil {
		return 64, err
	}
	opts = append(opts, props...)
	timeoutMs, err := a.getInt("timeout-ms", 30000)
	if err != nil {
		return 64, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(timeoutMs)*time.Millisecond)
	defer cancel()
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return 1, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	run, ok := adminActions[action]
	if !ok {
		return 64, usagef("unknown admin action %s", action)
	}
	if err := run(ctx, adm, a); err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			return 64, err
		}
		return 1, err
	}
	return 0, nil
}

var adminActions = map[string]func(context.Context, *kadm.Client, *args) error{
	"create-topic":      createTopic,
	"delete-topic":      deleteTopic,
	"describe-topic":    describeTopic,
	"list-topics":       listTopics,
	"create-partitions": createPartitions,
	"describe-configs":  describeConfigs,
	"alter-configs":     alterConfigs,
	"list-offsets":      listOffsets,
	"delete-records":    deleteRecords,
	"move-log-dir":      moveLogDir,
	"describe-cluster":  describeCluster,
	"api-versions":      apiVersions,
}

// topicID prints a topic id as Kafka's Uuid.toString does (URL-safe base64, no padding).
func topicID(id kadm.TopicID) string { return base64.RawURLEncoding.EncodeToString(id[:]) }

func createTopic(ctx context.Context, adm *kadm.Client, a *args) error {
	topic, err := a.require("topic")
	if err != nil {
		return err
	}
	partitions, err := a.getInt("partitions", 1)
	if err != nil {
		return err
	}
	rf, err := a.getInt("replication-factor", 1)
	if err != nil {
		return err
	}
	kvs, err := a.keyValues("config")
	if err != nil {
		return err
	}
	configs := map[string]*string{}
	for _, kv := range kvs {
		configs[kv[0]] = kadm.StringPtr(kv[1])
	}
	resp, err := adm.CreateTopic(ctx, int32(partitions), int16(rf), configs, topic)
	if err != nil {
		return err
	}
	emit(obj{"event", "created", "topic", topic, "partitions", partitions, "replicationFactor", rf,
		"topicId", topicID(resp.ID)})
	return nil
}

func deleteTopic(ctx context.Context, adm *kadm.Client, a *args) error {
	topic, err := a.require("topic")
	if err != nil {
		return err
	}
	resp, err := adm.DeleteTopic(ctx, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return err
	}
	emit(obj{"event", "deleted", "topic", topic})
	return nil
}

func describeTopic(ctx context.Context, adm *kadm.Client, a *args) error {
	topic, err := a.require("topic")
	if err != nil {
		return err
	}
	tds, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return err
	}
	d, ok := tds[topic]
	if !ok {
		return errors.New("topic missing from metadata response")
	}
	if d.Err != nil {
		return d.Err
	}
	parts := []any{}
	for _, p := range d.Partitions.Sorted() {
		var leader any
		if p.Leader >= 0 {
			leader = p.Leader
		}
		parts = append(parts, obj{"partition", p.Partition, "leader", leader,
			"replicas", ints(p.Replicas), "isr", ints(p.ISR)})
	}
	emit(obj{"event", "topic", "topic", d.Topic, "topicId", topicID(d.ID), "internal", d.IsInternal,
		"partitions", parts})
	return nil
}

func ints(xs []int32) []int32 {
	if xs == nil {
		return []int32{}
	}
	return xs
}

func listTopics(ctx context.Context, adm *kadm.Client, a *args) error {
	var tds kadm.TopicDetails
	var err error
	if a.flag("internal") {
		tds, err = adm.ListTopicsWithInternal(ctx)
	} else {
		tds, err = adm.ListTopics(ctx)
	}
	if err != nil {
		return err
	}
	emit(obj{"event", "topics", "topics", tds.Names()})
	return nil
}

// create-partitions --topic T --partitions N (the new total) | --add N
func createPartitions(ctx context.Context, adm *kadm.Client, a *args) error {
	topic, err := a.require("topic")
	if err != nil {
		return err
	}
	var resps kadm.CreatePartitionsResponses
	switch {
	case a.has("partitions"):
		n, err := a.getInt("partitions", 0)
		if err != nil {
			return err
		}
		resps, err = adm.UpdatePartitions(ctx, int(n), topic)
		if err != nil {
			return err
		}
	case a.has("add"):
		n, err := a.getInt("add", 0)
		if err != nil {
			return err
		}
		resps, err = adm.CreatePartitions(ctx, int(n), topic)
		if err != nil {
			return err
		}
	default:
		return usagef("create-partitions needs --partitions N (total) or --add N")
	}
	r, err := resps.On(topic, nil)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		return err
	}
	total, err := a.getInt("partitions", 0)
	if err != nil {
		return err
	}
	if !a.has("partitions") {
		tds, err := adm.ListTopics(ctx, topic)
		if err != nil {
			return err
		}
		total = int64(len(tds[topic].Partitions))
	}
	emit(obj{"event", "partitions-created", "topic", topic, "partitions", total})
	return nil
}

// describe-configs --topic T [--name k ...]: "configs" maps name to value; "sources" maps name
// to where the value comes from (DEFAULT_CONFIG, DYNAMIC_TOPIC_CONFIG, ...).
func describeConfigs(ctx context.Context, adm *kadm.Client, a *args) error {
	topic, err := a.require("topic")
	if err != nil {
		return err
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return err
	}
	rc, err := rcs.On(topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, n := range a.all("name") {
		want[n] = true
	}
	sort.Slice(rc.Configs, func(i, j int) bool { return rc.Configs[i].Key < rc.Configs[j].Key })
	configs, sources := obj{}, obj{}
	for _, c := range rc.Configs {
		if len(want) > 0 && !want[c.Key] {
			continue
		}
		var v any
		if c.Value != nil {
			v = *c.Value
		}
		configs = append(configs, c.Key, v)
		sources = append(sources, c.Key, c.Source.String())
	}
	emit(obj{"event", "configs", "topic", topic, "configs", configs, "sources", sources})
	return nil
}

// alter-configs --topic T [--config k=v ...] [--delete k ...] [--append k=v ...]
// [--subtract k=v ...] [--incremental true|false]: IncrementalAlterConfigs (SET for --config);
// --incremental false uses the legacy AlterConfigs, which replaces the topic's whole dynamic
// config with the --config values.
func alterConfigs(ctx context.Context, adm *kadm.Client, a *args) error {
	topic, err := a.require("topic")
	if err != nil {
		return err
	}
	incremental, err := a.getBool("incremental", true)
	if err != nil {
		return err
	}
	var alters []kadm.AlterConfig
	wanted := obj{}
	for _, op := range []struct {
		name string
		op   kadm.IncrementalOp
	}{{"config", kadm.SetConfig}, {"append", kadm.AppendConfig}, {"subtract", kadm.SubtractConfig}} {
		kvs, err := a.keyValues(op.name)
		if err != nil {
			return err
		}
		for _, kv := range kvs {
			alters = append(alters, kadm.AlterConfig{Op: op.op, Name: kv[0], Value: kadm.StringPtr(kv[1])})
			if op.op == kadm.SetConfig {
				wanted = append(wanted, kv[0], kv[1])
			}
		}
	}
	for _, k := range a.all("delete") {
		alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
	}
	if len(alters) == 0 {
		return usagef("alter-configs needs --config k=v, --delete k, --append k=v or --subtract k=v")
	}
	var resps kadm.AlterConfigsResponses
	if incremental {
		resps, err = adm.AlterTopicConfigs(ctx, alters, topic)
	} else {
		if a.has("delete") || a.has("append") || a.has("subtract") {
			return usagef("--incremental false takes only --config")
		}
		resps, err = adm.AlterTopicConfigsState(ctx, alters, topic)
	}
	if err != nil {
		return err
	}
	r, err := resps.On(topic, nil)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		return err
	}
	deleted := a.all("delete")
	if deleted == nil {
		deleted = []string{}
	}
	emit(obj{"event", "configs-altered", "topic", topic, "configs", wanted, "deleted", deleted,
		"incremental", incremental})
	return nil
}

// list-offsets --topic T [--timestamp MS]: per partition the earliest and latest offsets and,
// with --timestamp, the first offset whose timestamp is at or after MS (-1 when none is).
func listOffsets(ctx context.Context, adm *kadm.Client, a *args) error {
	topic, err := a.require("topic")
	if err != nil {
		return err
	}
	type lister func() (kadm.ListedOffsets, error)
	specs := []struct {
		name string
		list lister
	}{
		{"earliest", func() (kadm.ListedOffsets, error) { return adm.ListStartOffsets(ctx, topic) }},
		{"latest", func() (kadm.ListedOffsets, error) { return adm.ListEndOffsets(ctx, topic) }},
	}
	if a.has("timestamp") {
		ms, err := a.getInt("timestamp", 0)
		if err != nil {
			return err
		}
		specs = append(specs, struct {
			name string
			list lister
		}{"forTimestamp", func() (kadm.ListedOffsets, error) { return adm.ListOffsetsAfterMilli(ctx, ms, topic) }})
	}
	found := map[int32]obj{}
	for _, spec := range specs {
		listed, err := spec.list()
		if err != nil {
			return err
		}
		if err := listed.Error(); err != nil {
			return err
		}
		listed.Each(func(o kadm.ListedOffset) {
			if o.Topic != topic {
				return
			}
			if found[o.Partition] == nil {
				found[o.Partition] = obj{"partition", o.Partition}
			}
			offset := o.Offset
			// kadm answers "no record at or after MS" with the end offset and no timestamp;
			// Kafka's own answer (and the contract's) is -1.
			if spec.name == "forTimestamp" && o.Timestamp < 0 {
				offset = -1
			}
			found[o.Partition] = append(found[o.Partition], spec.name, offset)
		})
	}
	if len(found) == 0 {
		return kerr.UnknownTopicOrPartition
	}
	var ps []int32
	for p := range found {
		ps = append(ps, p)
	}
	parts := []any{}
	for _, p := range sortedParts(ps) {
		parts = append(parts, found[p])
	}
	emit(obj{"event", "offsets", "topic", topic, "partitions", parts})
	return nil
}

// delete-records --topic T [--partition P (default 0)] --offset O (-1: the high watermark)
func deleteRecords(ctx context.Context, adm *kadm.Client, a *args) error {
	topic, err := a.require("topic")
	if err != nil {
		return err
	}
	if !a.has("offset") {
		return usagef("--offset is required (-1 for the high watermark)")
	}
	offset, err := a.getInt("offset", -1)
	if err != nil {
		return err
	}
	partition, err := a.getInt("partition", 0)
	if err != nil {
		return err
	}
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: topic, Partition: int32(partition), At: offset, LeaderEpoch: -1})
	resps, err := adm.DeleteRecords(ctx, os)
	if err != nil {
		return err
	}
	r, ok := resps.Lookup(topic, int32(partition))
	if !ok {
		return kerr.UnknownTopicOrPartition
	}
	if r.Err != nil {
		return r.Err
	}
	emit(obj{"event", "records-deleted", "topic", topic, "partition", partition, "lowWatermark", r.LowWatermark})
	return nil
}

// move-log-dir --topic T [--partition P (default 0)] --broker B --log-dir D: AlterReplicaLogDirs
// on broker B; "log-dir-moved" once the broker accepted the move (the copy goes on after it).
func moveLogDir(ctx context.Context, adm *kadm.Client, a *args) error {
	topic, err := a.require("topic")
	if err != nil {
		return err
	}
	dir, err := a.require("log-dir")
	if err != nil {
		return err
	}
	partition, err := a.getInt("partition", 0)
	if err != nil {
		return err
	}
	broker, err := a.getInt("broker", -1)
	if err != nil {
		return err
	}
	var set kadm.TopicsSet
	set.Add(topic, int32(partition))
	var req kadm.AlterReplicaLogDirsReq
	req.Add(dir, set)
	resps, err := adm.AlterBrokerReplicaLogDirs(ctx, int32(broker), req)
	if err != nil {
		return err
	}
	moved := false
	var failed error
	resps.Each(func(r kadm.AlterReplicaLogDirsResponse) {
		if r.Err != nil {
			failed = r.Err
		} else if r.Topic == topic && r.Partition == int32(partition) {
			moved = true
		}
	})
	if failed != nil {
		return failed
	}
	if !moved {
		return kerr.UnknownTopicOrPartition
	}
	emit(obj{"event", "log-dir-moved", "topic", topic, "partition", partition, "broker", broker,
		"logDir", dir})
	return nil
}

func describeCluster(ctx context.Context, adm *kadm.Client, a *args) error {
	m, err := adm.BrokerMetadata(ctx)
	if err != nil {
		return err
	}
	brokers := []any{}
	for _, b := range m.Brokers {
		var rack any
		if b.Rack != nil {
			rack = *b.Rack
		}
		brokers = append(brokers, obj{"id", b.NodeID, "host", b.Host, "port", b.Port, "rack", rack})
	}
	var controller any
	if m.Controller >= 0 {
		controller = m.Controller
	}
	emit(obj{"event", "cluster", "clusterId", m.Cluster, "controller", controller, "brokers", brokers})
	return nil
}

func apiVersions(ctx context.Context, adm *kadm.Client, a *args) error {
	vs, err := adm.ApiVersions(ctx)
	if err != nil {
		return err
	}
	for _, v := range vs.Sorted() {
		if v.Err != nil {
			return v.Err
		}
		apis := []any{}
		for _, k := range v.Raw().ApiKeys {
			apis = append(apis, obj{"key", k.ApiKey, "min", k.MinVersion, "max", k.MaxVersion})
		}
		emit(obj{"event", "api-versions", "node", v.NodeID, "apis", apis})
	}
	return nil
}
