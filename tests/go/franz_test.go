package compat

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func franzClient(t *testing.T, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(bootstrap(t))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// franz-go: idempotent producer (its default) with acks=all, keyed records, a consumer group
// that commits, and the committed and listed offsets read back with kadm.
func TestFranzProduceGroupCommitOffsets(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitFor)
	defer cancel()
	const topic, group, n, keys = "franz-topic", "franz-group", 300, 10
	adm := kadm.NewClient(franzClient(t))
	created, err := adm.CreateTopics(ctx, 3, 1, nil, topic)
	if err != nil || created[topic].Err != nil {
		t.Fatalf("create topic: %v %v", err, created[topic].Err)
	}

	producer := franzClient(t, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic))
	ks, vs := keyedValues(n, keys)
	var recs []*kgo.Record
	for i := range ks {
		recs = append(recs, &kgo.Record{Key: []byte(ks[i]), Value: []byte(vs[i])})
	}
	if err := producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	if recs[0].ProducerID < 0 {
		t.Fatalf("the producer is not idempotent: producer id %d", recs[0].ProducerID)
	}

	consumer := franzClient(t, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(6*time.Second))
	var got []record
	for len(got) < n && ctx.Err() == nil {
		fetches := consumer.PollFetches(ctx)
		if errs := fetches.Errors(); len(errs) > 0 {
			t.Fatalf("poll: %v", errs)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			got = append(got, record{string(r.Key), string(r.Value), r.Partition, r.Offset})
		})
	}
	checkPerKeyOrder(t, n, keys, got)
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}

	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("fetch offsets: %v", err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("list end offsets: %v", err)
	}
	var committedSum, endSum int64
	committed.Each(func(o kadm.OffsetResponse) { committedSum += o.At })
	ends.Each(func(o kadm.ListedOffset) { endSum += o.Offset })
	if committedSum != n || endSum != n {
		t.Fatalf("committed %d, end offsets %d; want %d each", committedSum, endSum, n)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("list start offsets: %v", err)
	}
	starts.Each(func(o kadm.ListedOffset) {
		if o.Offset != 0 || o.Err != nil {
			t.Fatalf("start offset of %d: %d %v", o.Partition, o.Offset, o.Err)
		}
	})
	lags, err := adm.Lag(ctx, group)
	if err != nil {
		t.Fatalf("lag: %v", err)
	}
	if total := lags[group].Lag.Total(); total != 0 {
		t.Fatalf("lag %d after committing everything", total)
	}
}

// kadm: topic admin, both config APIs (IncrementalAlterConfigs and the legacy AlterConfigs'
// whole-set replace), DeleteRecords, and group listing/description/deletion.
func TestFranzAdmin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitFor)
	defer cancel()
	const topic, group = "kadm-topic", "kadm-group"
	cl := franzClient(t)
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"retention.ms": kadm.StringPtr("3600000")}, topic); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	again, err := adm.CreateTopic(ctx, 2, 1, nil, topic)
	if !errors.Is(err, kerr.TopicAlreadyExists) && !errors.Is(again.Err, kerr.TopicAlreadyExists) {
		t.Fatalf("creating an existing topic: %v %v", err, again.Err)
	}
	details, err := adm.ListTopics(ctx, topic)
	if err != nil || len(details[topic].Partitions) != 2 {
		t.Fatalf("list topics: %v %+v", err, details[topic])
	}
	meta, err := adm.BrokerMetadata(ctx)
	if err != nil || len(meta.Brokers) != 1 {
		t.Fatalf("broker metadata: %v %+v", err, meta)
	}

	value := func() map[string]string {
		rc, err := adm.DescribeTopicConfigs(ctx, topic)
		if err != nil {
			t.Fatalf("describe configs: %v", err)
		}
		c, err := rc.On(topic, nil)
		if err != nil || c.Err != nil {
			t.Fatalf("describe configs of %s: %v %v", topic, err, c.Err)
		}
		out := map[string]string{}
		for _, e := range c.Configs {
			if e.Source == 1 { // DYNAMIC_TOPIC_CONFIG
				out[e.Key] = e.MaybeValue()
			}
		}
		return out
	}
	if v := value(); v["retention.ms"] != "3600000" || len(v) != 1 {
		t.Fatalf("overrides after create: %v", v)
	}
	alt, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "segment.ms", Value: kadm.StringPtr("60000")}}, topic)
	if err != nil || alt[0].Err != nil {
		t.Fatalf("incremental alter: %v %+v", err, alt)
	}
	if v := value(); v["retention.ms"] != "3600000" || v["segment.ms"] != "60000" || len(v) != 2 {
		t.Fatalf("overrides after incremental alter: %v", v)
	}
	// AlterConfigs (API 33) replaces the whole set: retention.ms and segment.ms go.
	alt, err = adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "max.message.bytes", Value: kadm.StringPtr("2000000")}}, topic)
	if err != nil || alt[0].Err != nil {
		t.Fatalf("legacy alter: %v %+v", err, alt)
	}
	if v := value(); v["max.message.bytes"] != "2000000" || len(v) != 1 {
		t.Fatalf("overrides after AlterConfigs: %v", v)
	}

	producer := franzClient(t, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := 0; i < 20; i++ {
		if err := producer.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	toDelete := kadm.Offsets{}
	toDelete.Add(kadm.Offset{Topic: topic, Partition: 0, At: 12})
	deleted, err := adm.DeleteRecords(ctx, toDelete)
	if err != nil {
		t.Fatalf("delete records: %v", err)
	}
	if d, _ := deleted.Lookup(topic, 0); d.Err != nil || d.LowWatermark != 12 {
		t.Fatalf("delete records: %+v", d)
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("list start offsets: %v", err)
	}
	if s, _ := starts.Lookup(topic, 0); s.Offset != 12 {
		t.Fatalf("start offset after delete records: %+v", s)
	}

	commit := kadm.Offsets{}
	commit.Add(kadm.Offset{Topic: topic, Partition: 0, At: 15, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(ctx, group, commit); err != nil {
		t.Fatalf("commit offsets: %v", err)
	}
	listed, err := adm.ListGroups(ctx)
	if err != nil || !contains(listed.Groups(), group) {
		t.Fatalf("list groups: %v %v", err, listed.Groups())
	}
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil || described[group].Err != nil || described[group].State != "Empty" {
		t.Fatalf("describe groups: %v %+v", err, described[group])
	}
	dg, err := adm.DeleteGroup(ctx, group)
	if err != nil || dg.Err != nil {
		t.Fatalf("delete group: %v %v", err, dg.Err)
	}
	if resp, err := adm.DeleteTopic(ctx, topic); err != nil || resp.Err != nil {
		t.Fatalf("delete topic: %v %v", err, resp.Err)
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
