package dev.kbroker;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/** Tiny "--name value" / "--flag" parser. Flags are listed up front; everything else takes a value. */
final class Args {
    final List<String> positional = new ArrayList<>();
    private final Map<String, List<String>> opts = new HashMap<>();
    private final Set<String> flags = new HashSet<>();

    Args(String[] argv, int from, String... flagNames) {
        Set<String> known = Set.of(flagNames);
        for (int i = from; i < argv.length; i++) {
            String a = argv[i];
            if (a.startsWith("--")) {
                String name = a.substring(2);
                String value = null;
                int eq = name.indexOf('=');
                if (eq >= 0) {
                    value = name.substring(eq + 1);
                    name = name.substring(0, eq);
                }
                if (known.contains(name) && value == null) {
                    // a flag; accept an explicit true/false after it too
                    if (i + 1 < argv.length && (argv[i + 1].equals("true") || argv[i + 1].equals("false"))) {
                        if (argv[++i].equals("true")) flags.add(name);
                    } else {
                        flags.add(name);
                    }
                    continue;
                }
                if (value == null) {
                    if (i + 1 >= argv.length) throw new IllegalArgumentException("missing value for --" + name);
                    value = argv[++i];
                }
                if (known.contains(name)) {
                    if (Boolean.parseBoolean(value)) flags.add(name);
                } else {
                    opts.computeIfAbsent(name, k -> new ArrayList<>()).add(value);
                }
            } else {
                positional.add(a);
            }
        }
    }

    boolean flag(String name) {
        return flags.contains(name);
    }

    String get(String name, String dflt) {
        List<String> v = opts.get(name);
        return v == null ? dflt : v.get(v.size() - 1);
    }

    String require(String name) {
        String v = get(name, null);
        if (v == null) throw new IllegalArgumentException("--" + name + " is required");
        return v;
    }

    int getInt(String name, int dflt) {
        String v = get(name, null);
        return v == null ? dflt : Integer.parseInt(v);
    }

    long getLong(String name, long dflt) {
        String v = get(name, null);
        return v == null ? dflt : Long.parseLong(v);
    }

    boolean getBool(String name, boolean dflt) {
        String v = get(name, null);
        return v == null ? dflt : Boolean.parseBoolean(v);
    }

    List<String> all(String name) {
        return opts.getOrDefault(name, List.of());
    }
}
