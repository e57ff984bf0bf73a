package main

import (
	"fmt"
	"strconv"
	"strings"
)

// usageError is an argument problem: exit code 64 and {"event":"error","error":"usage"}.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

// args is the same tiny "--name value" / "--name=value" / "--flag [true|false]" parser as the
// Java driver's Args: flags are listed up front, every other option takes a value, repeated
// options accumulate, and anything without "--" is positional.
type args struct {
	positional []string
	opts       map[string][]string
	flags      map[string]bool
}

func parseArgs(argv []string, flagNames ...string) (*args, error) {
	known := map[string]bool{}
	for _, f := range flagNames {
		known[f] = true
	}
	a := &args{opts: map[string][]string{}, flags: map[string]bool{}}
	for i := 0; i < len(argv); i++ {
		s := argv[i]
		if !strings.HasPrefix(s, "--") {
			a.positional = append(a.positional, s)
			continue
		}
		name, value, hasValue := strings.Cut(s[2:], "=")
		if known[name] && !hasValue {
			if i+1 < len(argv) && (argv[i+1] == "true" || argv[i+1] == "false") {
				i++
				if argv[i] == "true" {
					a.flags[name] = true
				}
			} else {
				a.flags[name] = true
			}
			continue
		}
		if !hasValue {
			if i+1 >= len(argv) {
				return nil, usagef("missing value for --%s", name)
			}
			i++
			value = argv[i]
		}
		if known[name] {
			if b, _ := strconv.ParseBool(value); b {
				a.flags[name] = true
			}
		} else {
			a.opts[name] = append(a.opts[name], value)
		}
	}
	return a, nil
}

func (a *args) flag(name string) bool { return a.flags[name] }

func (a *args) has(name string) bool { return len(a.opts[name]) > 0 }

func (a *args) get(name, dflt string) string {
	v := a.opts[name]
	if len(v) == 0 {
		return dflt
	}
	return v[len(v)-1]
}

func (a *args) require(name string) (string, error) {
	v := a.opts[name]
	if len(v) == 0 {
		return "", usagef("--%s is required", name)
	}
	return v[len(v)-1], nil
}

func (a *args) getInt(name string, dflt int64) (int64, error) {
	v := a.get(name, "")
	if v == "" {
		return dflt, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, usagef("--%s wants an integer, got %q", name, v)
	}
	return n, nil
}

func (a *args) getBool(name string, dflt bool) (bool, error) {
	v := a.get(name, "")
	if v == "" {
		return dflt, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, usagef("--%s wants true or false, got %q", name, v)
	}
	return b, nil
}

func (a *args) all(name string) []string { return a.opts[name] }

// keyValues parses repeated "--name k=v" options, keeping their order.
func (a *args) keyValues(name string) ([][2]string, error) {
	var out [][2]string
	for _, kv := range a.opts[name] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usagef("--%s wants k=v, got %s", name, kv)
		}
		out = append(out, [2]string{k, v})
	}
	return out, nil
}
