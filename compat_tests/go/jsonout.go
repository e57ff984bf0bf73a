package main

import (
	"bytes"
	"encoding/json"
	"os"
	"sync"
)

// obj is a JSON object that keeps its keys in the order given (the Java driver's Json.obj).
type obj []any

func (o obj) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i := 0; i+1 < len(o); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(o[i].(string))
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		v, err := marshal(o[i+1])
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

var emitMu sync.Mutex

// emit prints one JSON line on stdout.
func emit(o obj) {
	line, err := marshal(o)
	if err != nil {
		line, _ = marshal(obj{"event", "error", "error", "json", "message", err.Error()})
	}
	emitMu.Lock()
	defer emitMu.Unlock()
	os.Stdout.Write(append(line, '\n'))
}

// str returns bytes as a UTF-8 string, nil for nil (a null key or value).
func str(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}
