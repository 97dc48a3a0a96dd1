package compat

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// franz-go's exactly-once loop (issue 28 point 4, KIP-98, KIP-447): a GroupTransactSession
// consumes 300 inputs over 3 partitions at read_committed and produces "out-<value>" to the
// same partition of the output topic, the consumed offsets committed in each transaction
// (TxnOffsetCommit). The second transaction is aborted: the session rewinds to the committed
// offsets and the inputs are processed again. A read_committed reader then sees each output
// exactly once, a read_uncommitted reader also the aborted ones, and the group's committed
// offsets are the input's end offsets.
func TestFranzGroupTransactSessionExactlyOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*waitFor)
	defer cancel()
	const in, out, group, n = "franz-eos-in", "franz-eos-out", "franz-eos-group", 300
	adm := kadm.NewClient(franzClient(t))
	created, err := adm.CreateTopics(ctx, 3, 1, nil, in, out)
	if err != nil || created[in].Err != nil || created[out].Err != nil {
		t.Fatalf("create topics: %v %v %v", err, created[in].Err, created[out].Err)
	}
	producer := franzClient(t, kgo.DefaultProduceTopic(in),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var inputs []*kgo.Record
	for i := 0; i < n; i++ {
		inputs = append(inputs, &kgo.Record{Value: []byte(fmt.Sprint(i)), Partition: int32(i % 3)})
	}
	if err := producer.ProduceSync(ctx, inputs...).FirstErr(); err != nil {
		t.Fatalf("produce inputs: %v", err)
	}

	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(bootstrap(t)),
		kgo.TransactionalID("franz-eos-txn"), kgo.TransactionTimeout(60*time.Second),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RequireStableFetchOffsets(),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(in), kgo.SessionTimeout(6*time.Second),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DefaultProduceTopic(out), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	var aborted []string
	done, transactions := 0, 0
	for done < n && ctx.Err() == nil {
		fetches := sess.PollRecords(ctx, 40) // several transactions
		if errs := fetches.Errors(); len(errs) > 0 {
			t.Fatalf("poll: %v", errs)
		}
		if fetches.NumRecords() == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			t.Fatalf("begin: %v", err)
		}
		var mu sync.Mutex
		var produceErr error
		var values []string
		fetches.EachRecord(func(r *kgo.Record) {
			v := "out-" + string(r.Value)
			values = append(values, v)
			sess.Produce(ctx, &kgo.Record{Value: []byte(v), Partition: r.Partition},
				func(_ *kgo.Record, err error) {
					mu.Lock()
					defer mu.Unlock()
					if err != nil && produceErr == nil {
						produceErr = err
					}
				})
		})
		transactions++
		try := kgo.TryCommit
		if transactions == 2 {
			try = kgo.TryAbort
		}
		// Every record written before the end, the aborted ones too (an abort would fail
		// the records still buffered).
		if err := sess.Client().Flush(ctx); err != nil {
			t.Fatalf("flush transaction %d: %v", transactions, err)
		}
		committed, err := sess.End(ctx, try)
		if err != nil {
			t.Fatalf("end transaction %d: %v", transactions, err)
		}
		mu.Lock()
		if produceErr != nil {
			t.Fatalf("produce in transaction %d: %v", transactions, produceErr)
		}
		mu.Unlock()
		switch {
		case committed:
			done += len(values)
		case try == kgo.TryAbort:
			aborted = append(aborted, values...)
		default:
			t.Fatalf("transaction %d was not committed", transactions)
		}
	}
	if done != n || len(aborted) == 0 {
		t.Fatalf("committed %d outputs in %d transactions (want %d), aborted %d (want some)",
			done, transactions, n, len(aborted))
	}

	// RequireStable (KIP-447): the last transaction's offsets are pending until its markers
	// are written, which End does not wait for (in Kafka either): a partition answers
	// UNSTABLE_OFFSET_COMMIT until then, and the client asks again.
	var committedSum int64
	for unstable := true; unstable; {
		committedOffsets, err := adm.FetchOffsets(kadm.RequireStable(ctx), group)
		if err != nil {
			t.Fatalf("fetch offsets: %v", err)
		}
		committedSum, unstable = 0, false
		committedOffsets.Each(func(o kadm.OffsetResponse) {
			switch {
			case errors.Is(o.Err, kerr.UnstableOffsetCommit) && ctx.Err() == nil:
				unstable = true
			case o.Err != nil:
				t.Fatalf("fetch the offset of %s-%d: %v", o.Topic, o.Partition, o.Err)
			}
			committedSum += o.At
		})
		if unstable {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if committedSum != n {
		t.Fatalf("the group committed offsets summing to %d, want %d", committedSum, n)
	}

	// A plain record after the last transaction marks each output partition's end.
	endMarkers := franzClient(t, kgo.DefaultProduceTopic(out),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := int32(0); p < 3; p++ {
		if err := endMarkers.ProduceSync(ctx, &kgo.Record{Value: []byte("end"), Partition: p}).FirstErr(); err != nil {
			t.Fatalf("produce the end marker: %v", err)
		}
	}
	got := readToEndMarkers(ctx, t, out, kgo.ReadCommitted())
	if len(got) != n {
		t.Fatalf("read_committed read %d outputs, want %d", len(got), n)
	}
	for i := 0; i < n; i++ {
		if c := got[fmt.Sprintf("out-%d", i)]; c != 1 {
			t.Fatalf("read_committed read out-%d %d times, want once", i, c)
		}
	}
	all := readToEndMarkers(ctx, t, out, kgo.ReadUncommitted())
	for _, v := range aborted {
		if all[v] < 2 {
			t.Fatalf("read_uncommitted read %s %d times, want the aborted and the committed copy", v, all[v])
		}
	}
}

// readToEndMarkers counts the values of topic's 3 partitions read at isolation up to the
// "end" record of each partition.
func readToEndMarkers(ctx context.Context, t *testing.T, topic string, isolation kgo.IsolationLevel) map[string]int {
	t.Helper()
	cl := franzClient(t, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(isolation),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got, ended := map[string]int{}, map[int32]bool{}
	for len(ended) < 3 && ctx.Err() == nil {
		fetches := cl.PollFetches(ctx)
		if errs := fetches.Errors(); len(errs) > 0 {
			t.Fatalf("poll %s: %v", topic, errs)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if string(r.Value) == "end" {
				ended[r.Partition] = true
			} else if !ended[r.Partition] {
				got[string(r.Value)]++
			}
		})
	}
	if len(ended) < 3 {
		t.Fatalf("reading %s: the end markers of %d partitions were not reached", topic, 3-len(ended))
	}
	return got
}
