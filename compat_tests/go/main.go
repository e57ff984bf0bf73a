// Command kbroker-go-driver is kbroker's compatibility driver for franz-go (kgo + kadm).
//
// It implements the same command line and JSON-lines output as the Java driver
// (compat_tests/java/README.md), plus extra admin actions; see README.md beside this file.
//
//	kbroker-go-driver version
//	kbroker-go-driver produce --bootstrap H:P --topic T --count N
//	     [--compression none|gzip|snappy|lz4|zstd] [--acks all|1|0] [--idempotent true|false]
//	     [--key-prefix k] [--value-prefix v] [--null-key-every N] [--headers] [--partition P]
//	     [--linger-ms MS] [--client-id ID] [--property k=v ...]
//	kbroker-go-driver consume --bootstrap H:P --topic T --count N [--group G]
//	     [--from-beginning] [--pattern] [--timeout-ms MS] [--isolation read_committed|read_uncommitted]
//	     [--client-id ID] [--property k=v ...]
//	kbroker-go-driver admin --bootstrap H:P ACTION ...
//	kbroker-go-driver eos-copy --bootstrap H:P --input IN --output OUT --group G --transactional-id ID
//	kbroker-go-driver sr-produce|sr-consume|sr-register --registry URL ... (registry.go)
//
// Exit codes: 0 ok, 1 error (an {"event":"error"} line is printed), 2 consume timed out, 64 usage.
package main

import (
	"context"
	"errors"
	"fmt"
	"go/token"
	"os"
	"reflect"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const defaultClientID = "kbroker-go-driver"

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(64)
	}
	var rc int
	var err error
	ctx := context.Background()
	switch os.Args[1] {
	case "produce":
		rc, err = withArgs(os.Args[2:], []string{"headers"}, func(a *args) (int, error) { return produce(ctx, a) })
	case "consume":
		rc, err = withArgs(os.Args[2:], []string{"from-beginning", "pattern"}, func(a *args) (int, error) { return consume(ctx, a) })
	case "admin":
		rc, err = withArgs(os.Args[2:], []string{"internal"}, func(a *args) (int, error) { return admin(ctx, a) })
	case "share-consume":
		rc, err = withArgs(os.Args[2:], nil, func(a *args) (int, error) { return shareConsume(ctx, a) })
	case "eos-copy":
		rc, err = withArgs(os.Args[2:], nil, func(a *args) (int, error) { return eosCopy(ctx, a) })
	case "sr-produce":
		rc, err = withArgs(os.Args[2:], nil, func(a *args) (int, error) { return srProduce(ctx, a) })
	case "sr-consume":
		rc, err = withArgs(os.Args[2:], nil, func(a *args) (int, error) { return srConsume(ctx, a) })
	case "sr-register":
		rc, err = withArgs(os.Args[2:], nil, func(a *args) (int, error) { return srRegister(ctx, a) })
	case "version":
		emit(versionEvent())
	default:
		usage()
		os.Exit(64)
	}
	if err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			emit(obj{"event", "error", "error", "usage", "message", ue.msg})
			rc = 64
		} else {
			emit(errorEvent(err))
			rc = 1
		}
	}
	os.Exit(rc)
}

func withArgs(argv, flags []string, fn func(*args) (int, error)) (int, error) {
	a, err := parseArgs(argv, flags...)
	if err != nil {
		return 64, err
	}
	return fn(a)
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: kbroker-go-driver produce|consume|share-consume|admin|eos-copy|sr-produce|sr-consume|sr-register|version ... (see compat_tests/go/README.md)")
}

// errorEvent describes an error as the Java driver does: "error" names the failure (for a Kafka
// error code, its protocol name such as UNKNOWN_TOPIC_OR_PARTITION; otherwise the Go type), and
// "code" carries the Kafka error code when there is one.
func errorEvent(err error, extra ...any) obj {
	o := obj{"event", "error"}
	o = append(o, extra...)
	name, code := errorName(err)
	o = append(o, "error", name, "message", err.Error())
	if code != 0 {
		o = append(o, "code", code)
	}
	return o
}

func errorName(err error) (string, int16) {
	var se *kadm.ShardErrors
	if errors.As(err, &se) && len(se.Errs) > 0 && se.Errs[0].Err != nil {
		err = se.Errs[0].Err
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message, ke.Code
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, kgo.ErrRecordTimeout) {
		return "TimeoutException", 0
	}
	t := reflect.TypeOf(err)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Name() == "" || !token.IsExported(t.Name()) {
		return "KafkaError", 0
	}
	return t.Name(), 0
}

func moduleVersion(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == path {
				if m.Replace != nil {
					return m.Replace.Version
				}
				return m.Version
			}
		}
	}
	return "unknown"
}

func versionEvent() obj {
	return obj{
		"event", "version",
		"client", "go",
		"version", strings.TrimPrefix(moduleVersion("github.com/twmb/franz-go"), "v"),
		"kadm", strings.TrimPrefix(moduleVersion("github.com/twmb/franz-go/pkg/kadm"), "v"),
		"sr", strings.TrimPrefix(moduleVersion("github.com/twmb/franz-go/pkg/sr"), "v"),
		"hamba/avro", strings.TrimPrefix(moduleVersion("github.com/hamba/avro/v2"), "v"),
		"go", runtime.Version(),
	}
}
