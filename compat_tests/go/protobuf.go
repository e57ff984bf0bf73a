package main

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/bufbuild/protocompile"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// protobufCodec encodes and decodes the first message of a .proto text. franz-go's Serde wants
// the application's message types; this driver has only the schema text (its own, or a writer's
// fetched by id), so it compiles the text with Buf's protocompile and uses dynamic messages.
// Values go in and out in Protobuf's JSON mapping (protojson, field names as in the .proto).
func protobufCodec(text string) (func(any) ([]byte, error), func([]byte, any) error, error) {
	compiler := protocompile.Compiler{Resolver: protocompile.WithStandardImports(&protocompile.SourceResolver{
		Accessor: protocompile.SourceAccessorFromMap(map[string]string{"schema.proto": text}),
	})}
	files, err := compiler.Compile(context.Background(), "schema.proto")
	if err != nil {
		return nil, nil, err
	}
	messages := files[0].Messages()
	if messages.Len() == 0 {
		return nil, nil, fmt.Errorf("the schema defines no message")
	}
	md := messages.Get(0)
	encode := func(v any) ([]byte, error) {
		text, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		msg := dynamicpb.NewMessage(md)
		if err := protojson.Unmarshal(text, msg); err != nil {
			return nil, err
		}
		return proto.Marshal(msg)
	}
	decode := func(b []byte, v any) error {
		msg := dynamicpb.NewMessage(md)
		if err := proto.Unmarshal(b, msg); err != nil {
			return err
		}
		return fromMessage(msg, v)
	}
	return encode, decode, nil
}

func fromMessage(msg protoreflect.ProtoMessage, v any) error {
	text, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(msg)
	if err != nil {
		return err
	}
	return json.Unmarshal(text, v)
}
