package main

import (
	"context"
	"encoding/base64"
	"errors"
	"sort"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
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
	tds, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return err
	}
	emit(obj{"event", "partitions-created", "topic", topic, "partitions", len(tds[topic].Partitions)})
	return nil
}

// describe-configs --topic T [--name k ...]
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
	configs := []any{}
	for _, c := range rc.Configs {
		if len(want) > 0 && !want[c.Key] {
			continue
		}
		var v any
		if c.Value != nil {
			v = *c.Value
		}
		configs = append(configs, obj{"name", c.Key, "value", v, "source", c.Source.String(),
			"sensitive", c.Sensitive})
	}
	emit(obj{"event", "configs", "topic", topic, "configs", configs})
	return nil
}

// alter-configs --topic T [--set k=v ...] [--delete k ...] [--append k=v ...] [--subtract k=v ...]
// [--incremental true|false]; --incremental false uses the legacy AlterConfigs (whole state:
// only --set, every other dynamic config of the topic is reset).
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
	for _, op := range []struct {
		name string
		op   kadm.IncrementalOp
	}{{"set", kadm.SetConfig}, {"append", kadm.AppendConfig}, {"subtract", kadm.SubtractConfig}} {
		kvs, err := a.keyValues(op.name)
		if err != nil {
			return err
		}
		for _, kv := range kvs {
			alters = append(alters, kadm.AlterConfig{Op: op.op, Name: kv[0], Value: kadm.StringPtr(kv[1])})
		}
	}
	for _, k := range a.all("delete") {
		alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
	}
	if len(alters) == 0 {
		return usagef("alter-configs needs --set, --delete, --append or --subtract")
	}
	var resps kadm.AlterConfigsResponses
	if incremental {
		resps, err = adm.AlterTopicConfigs(ctx, alters, topic)
	} else {
		if a.has("delete") || a.has("append") || a.has("subtract") {
			return usagef("--incremental false takes only --set")
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
	emit(obj{"event", "configs-altered", "topic", topic, "incremental", incremental, "count", len(alters)})
	return nil
}

// list-offsets --topic T [--spec earliest|latest|<timestamp ms>]
func listOffsets(ctx context.Context, adm *kadm.Client, a *args) error {
	topic, err := a.require("topic")
	if err != nil {
		return err
	}
	spec := a.get("spec", "latest")
	var listed kadm.ListedOffsets
	switch spec {
	case "earliest":
		listed, err = adm.ListStartOffsets(ctx, topic)
	case "latest":
		listed, err = adm.ListEndOffsets(ctx, topic)
	default:
		ms, perr := strconv.ParseInt(spec, 10, 64)
		if perr != nil {
			return usagef("--spec wants earliest, latest or a timestamp in ms, got %s", spec)
		}
		listed, err = adm.ListOffsetsAfterMilli(ctx, ms, topic)
	}
	if err != nil {
		return err
	}
	if err := listed.Error(); err != nil {
		return err
	}
	var ps []kadm.ListedOffset
	listed.Each(func(o kadm.ListedOffset) { ps = append(ps, o) })
	if len(ps) == 0 {
		return errors.New("no partitions listed (unknown topic?)")
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].Partition < ps[j].Partition })
	parts := []any{}
	for _, o := range ps {
		var epoch any
		if o.LeaderEpoch >= 0 {
			epoch = o.LeaderEpoch
		}
		parts = append(parts, obj{"partition", o.Partition, "offset", o.Offset, "timestamp", o.Timestamp,
			"leaderEpoch", epoch})
	}
	emit(obj{"event", "offsets", "topic", topic, "spec", spec, "partitions", parts})
	return nil
}

// delete-records --topic T --offset O [--partition P]: every partition unless --partition.
func deleteRecords(ctx context.Context, adm *kadm.Client, a *args) error {
	topic, err := a.require("topic")
	if err != nil {
		return err
	}
	offset, err := a.getInt("offset", -1)
	if err != nil {
		return err
	}
	if !a.has("offset") {
		return usagef("--offset is required (-1 for the high watermark)")
	}
	var parts []int32
	if a.has("partition") {
		p, err := a.getInt("partition", 0)
		if err != nil {
			return err
		}
		parts = []int32{int32(p)}
	} else {
		tds, err := adm.ListTopics(ctx, topic)
		if err != nil {
			return err
		}
		if d := tds[topic]; d.Err != nil {
			return d.Err
		}
		for _, p := range tds[topic].Partitions.Sorted() {
			parts = append(parts, p.Partition)
		}
	}
	os := kadm.Offsets{}
	for _, p := range parts {
		os.Add(kadm.Offset{Topic: topic, Partition: p, At: offset, LeaderEpoch: -1})
	}
	resps, err := adm.DeleteRecords(ctx, os)
	if err != nil {
		return err
	}
	if err := resps.Error(); err != nil {
		return err
	}
	out := []any{}
	for _, p := range parts {
		r, _ := resps.Lookup(topic, p)
		out = append(out, obj{"partition", p, "lowWatermark", r.LowWatermark})
	}
	emit(obj{"event", "records-deleted", "topic", topic, "partitions", out})
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
