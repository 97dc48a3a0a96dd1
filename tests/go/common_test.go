// Package compat runs the Go Kafka clients — franz-go (kgo, kadm), IBM/sarama and
// segmentio/kafka-go — against a Sluice broker (issue 17). Each test reads the broker's
// address from SLUICE_BOOTSTRAP; tests/compat/test_go_clients.py starts a fresh broker per
// test and runs the compiled test binary with -test.run for that one test.
package compat

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// waitFor bounds every loop that waits on the broker.
const waitFor = 30 * time.Second

func bootstrap(t *testing.T) string {
	t.Helper()
	b := os.Getenv("SLUICE_BOOTSTRAP")
	if b == "" {
		t.Skip("SLUICE_BOOTSTRAP is not set: run through tests/compat/test_go_clients.py")
	}
	return b
}

// keyedValues are the records every client produces: key k-<i%keys>, value <i>.
func keyedValues(n, keys int) (ks, vs []string) {
	for i := 0; i < n; i++ {
		ks = append(ks, fmt.Sprintf("k-%d", i%keys))
		vs = append(vs, fmt.Sprintf("%d", i))
	}
	return ks, vs
}

// checkPerKeyOrder fails unless each key's values arrive in produce order, each once, and
// every key lives in one partition.
func checkPerKeyOrder(t *testing.T, n, keys int, got []record) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("consumed %d records, want %d", len(got), n)
	}
	last := map[string]int{}
	part := map[string]int32{}
	for _, r := range got {
		var v int
		if _, err := fmt.Sscanf(r.value, "%d", &v); err != nil {
			t.Fatalf("value %q: %v", r.value, err)
		}
		if prev, ok := last[r.key]; ok && v <= prev {
			t.Fatalf("key %s: value %d after %d (order lost or duplicate)", r.key, v, prev)
		}
		last[r.key] = v
		if p, ok := part[r.key]; ok && p != r.partition {
			t.Fatalf("key %s in partitions %d and %d", r.key, p, r.partition)
		}
		part[r.key] = r.partition
	}
	if len(last) != keys {
		t.Fatalf("%d keys consumed, want %d", len(last), keys)
	}
}

type record struct {
	key, value string
	partition  int32
	offset     int64
}
