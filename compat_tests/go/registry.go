package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
)

// The schema-registry commands (compat_tests/README.md): franz-go's sr client registers the
// schema and fetches writers' schemas by id, sr.Serde frames values in Confluent's wire format
// (magic byte 0, the 4-byte id), and hamba/avro does the Avro binary encoding (--format json:
// JSON Schema, the values as JSON).
//
//	sr-produce --bootstrap H:P --registry URL --topic T --schema-file F --values-file V [--key-prefix k] [--format avro|json|protobuf]
//	sr-consume --bootstrap H:P --registry URL --topic T --count N [--timeout-ms MS]
//	sr-register --registry URL --subject S --schema-file F [--format avro|json|protobuf]

func registryClient(a *args) (*sr.Client, error) {
	url, err := a.require("registry")
	if err != nil {
		return nil, err
	}
	return sr.NewClient(sr.URLs(url))
}

// valueFormat is how one --format encodes and decodes values with a schema's text: Avro through
// hamba/avro, JSON Schema as plain encoding/json (franz-go validates nothing; neither does this),
// Protobuf through dynamic messages (protobuf.go).
type valueFormat struct {
	schemaType sr.SchemaType
	codec      func(schema string) (encode func(any) ([]byte, error), decode func([]byte, any) error, err error)
	// Protobuf values carry the message indexes after the id: [0], the schema's first message.
	indexes []int
}

// serdeOpts are the sr.Serde registration options of a format's codec.
func (f valueFormat) serdeOpts(opts ...sr.EncodingOpt) []sr.EncodingOpt {
	if f.indexes != nil {
		opts = append(opts, sr.Index(f.indexes...))
	}
	return opts
}

var valueFormats = map[string]valueFormat{
	"avro": {schemaType: sr.TypeAvro, codec: func(text string) (func(any) ([]byte, error), func([]byte, any) error, error) {
		schema, err := avro.Parse(text)
		if err != nil {
			return nil, nil, err
		}
		return func(v any) ([]byte, error) { return avro.Marshal(schema, v) },
			func(b []byte, v any) error { return avro.Unmarshal(schema, b, v) }, nil
	}},
	"json": {schemaType: sr.TypeJSON, codec: func(string) (func(any) ([]byte, error), func([]byte, any) error, error) {
		return json.Marshal, json.Unmarshal, nil
	}},
	"protobuf": {schemaType: sr.TypeProtobuf, codec: protobufCodec, indexes: []int{0}},
}

func formatOf(a *args) (valueFormat, error) {
	name := a.get("format", "avro")
	f, ok := valueFormats[name]
	if !ok {
		return f, usagef("unsupported --format %s (avro, json or protobuf)", name)
	}
	return f, nil
}

// schemaToRegister reads what the registering commands share: --schema-file, --format and the
// registry client; on an error, the exit code to return (64: usage, 1: the file).
func schemaToRegister(a *args) ([]byte, valueFormat, *sr.Client, int, error) {
	var format valueFormat
	schemaFile, err := a.require("schema-file")
	if err != nil {
		return nil, format, nil, 64, err
	}
	text, err := os.ReadFile(schemaFile)
	if err != nil {
		return nil, format, nil, 1, err
	}
	if format, err = formatOf(a); err != nil {
		return nil, format, nil, 64, err
	}
	rcl, err := registryClient(a)
	if err != nil {
		return nil, format, nil, 64, err
	}
	return text, format, rcl, 0, nil
}

// srProduce registers --schema-file under <topic>-value, encodes each JSON object of
// --values-file with it, and produces record i keyed <key-prefix>i.
func srProduce(ctx context.Context, a *args) (int, error) {
	topic, err := a.require("topic")
	if err != nil {
		return 64, err
	}
	valuesFile, err := a.require("values-file")
	if err != nil {
		return 64, err
	}
	values, err := readValues(valuesFile)
	if err != nil {
		return 1, err
	}
	text, format, rcl, code, err := schemaToRegister(a)
	if err != nil {
		return code, err
	}
	subject := topic + "-value"
	id, err := rcl.RegisterSchema(ctx, subject, sr.Schema{Schema: string(text), Type: format.schemaType}, -1, -1)
	if err != nil {
		return 1, err
	}
	emit(obj{"event", "registered", "subject", subject, "id", id})
	encode, _, err := format.codec(string(text))
	if err != nil {
		return 1, err
	}
	var serde sr.Serde
	serde.Register(id, map[string]any{}, format.serdeOpts(sr.EncodeFn(encode))...)

	opts, err := baseOpts(a)
	if err != nil {
		return 64, err
	}
	cl, err := kgo.NewClient(append(opts, kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())...)
	if err != nil {
		return 1, err
	}
	defer cl.Close()
	keyPrefix := a.get("key-prefix", "key-")
	records := make([]*kgo.Record, len(values))
	index := map[*kgo.Record]int{} // ProduceSync's results come in completion order
	for i, v := range values {
		wire, err := serde.Encode(v)
		if err != nil {
			return 1, fmt.Errorf("value %d: %w", i, err)
		}
		records[i] = &kgo.Record{Key: []byte(fmt.Sprintf("%s%d", keyPrefix, i)), Value: wire}
		index[records[i]] = i
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	acked := 0
	for _, res := range cl.ProduceSync(ctx, records...) {
		if res.Err != nil {
			emit(errorEvent(res.Err, "index", index[res.Record]))
			continue
		}
		acked++
		emit(obj{"event", "produced", "index", index[res.Record], "topic", topic, "partition", res.Record.Partition,
			"offset", res.Record.Offset})
	}
	emit(obj{"event", "done", "produced", acked, "requested", len(values)})
	if acked != len(values) {
		return 1, nil
	}
	return 0, nil
}

// readValues reads one JSON object per line; integers become int64 (Avro's long and int want
// Go integers, not the float64 encoding/json would make).
func readValues(path string) ([]any, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []any
	lines := bufio.NewScanner(f)
	lines.Buffer(make([]byte, 1<<20), 1<<24)
	for lines.Scan() {
		if strings.TrimSpace(lines.Text()) == "" {
			continue
		}
		d := json.NewDecoder(strings.NewReader(lines.Text()))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, integers(v))
	}
	return out, lines.Err()
}

func integers(v any) any {
	switch v := v.(type) {
	case json.Number:
		if n, err := v.Int64(); err == nil {
			return n
		}
		f, _ := v.Float64()
		return f
	case map[string]any:
		for k, x := range v {
			v[k] = integers(x)
		}
	case []any:
		for i, x := range v {
			v[i] = integers(x)
		}
	}
	return v
}

// srConsume reads every partition from the beginning and decodes each value with the schema
// its id names, fetched from the registry the first time the id is seen.
func srConsume(ctx context.Context, a *args) (int, error) {
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
	if _, err := formatOf(a); err != nil {
		return 64, err
	}
	rcl, err := registryClient(a)
	if err != nil {
		return 64, err
	}
	opts, err := baseOpts(a)
	if err != nil {
		return 64, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(timeoutMs)*time.Millisecond)
	defer cancel()
	parts, err := partitionsOf(ctx, opts, topic)
	if err != nil {
		return 1, err
	}
	offsets := map[int32]kgo.Offset{}
	for _, p := range parts {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	cl, err := kgo.NewClient(append(opts, kgo.FetchMaxWait(500*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}))...)
	if err != nil {
		return 1, err
	}
	defer cl.Close()

	var serde sr.Serde
	seen := int64(0)
	for seen < count && ctx.Err() == nil {
		fetches := cl.PollRecords(ctx, int(count-seen))
		var failed error
		fetches.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				failed = err
			}
		})
		if failed != nil {
			return 1, failed
		}
		for _, r := range fetches.Records() {
			id, _, err := serde.DecodeID(r.Value)
			if err != nil {
				return 1, fmt.Errorf("offset %d: %w", r.Offset, err)
			}
			if !serde.IsRegistered(id) {
				if err := registerDecoder(ctx, rcl, &serde, id); err != nil {
					return 1, err
				}
			}
			value, err := serde.DecodeNew(r.Value)
			if err != nil {
				return 1, fmt.Errorf("offset %d (schema %d): %w", r.Offset, id, err)
			}
			emit(obj{"event", "record", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset,
				"key", str(r.Key), "schemaId", id, "value", *value.(*map[string]any)})
			seen++
		}
	}
	ok := seen >= count
	emit(obj{"event", "done", "consumed", seen, "requested", count, "timedOut", !ok})
	if !ok {
		return 2, nil
	}
	return 0, nil
}

// registerDecoder fetches schema id from the registry and teaches the serde to decode it in the
// format the registry says the schema is in.
func registerDecoder(ctx context.Context, rcl *sr.Client, serde *sr.Serde, id int) error {
	fetched, err := rcl.SchemaByID(ctx, id)
	if err != nil {
		return fmt.Errorf("schema %d: %w", id, err)
	}
	for _, format := range valueFormats {
		if format.schemaType != fetched.Type {
			continue
		}
		_, decode, err := format.codec(fetched.Schema)
		if err != nil {
			return fmt.Errorf("schema %d: %w", id, err)
		}
		serde.Register(id, map[string]any{}, format.serdeOpts(
			sr.GenerateFn(func() any { return &map[string]any{} }), sr.DecodeFn(decode))...)
		return nil
	}
	return fmt.Errorf("schema %d is %s, which this driver does not decode", id, fetched.Type)
}

// srRegister registers --schema-file under --subject: "registered" {subject, id}, or the
// registry's refusal as an error event with its HTTP status and Confluent error code.
func srRegister(ctx context.Context, a *args) (int, error) {
	subject, err := a.require("subject")
	if err != nil {
		return 64, err
	}
	text, format, rcl, code, err := schemaToRegister(a)
	if err != nil {
		return code, err
	}
	id, err := rcl.RegisterSchema(ctx, subject, sr.Schema{Schema: string(text), Type: format.schemaType}, -1, -1)
	var refused *sr.ResponseError
	if errors.As(err, &refused) {
		emit(obj{"event", "error", "error", "refused", "status", refused.StatusCode,
			"code", refused.ErrorCode, "message", refused.Message})
		return 1, nil
	}
	if err != nil {
		return 1, err
	}
	emit(obj{"event", "registered", "subject", subject, "id", id})
	return 0, nil
}
