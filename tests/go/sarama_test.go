package compat

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
)

func saramaConfig() *sarama.Config {
	c := sarama.NewConfig()
	c.Version = sarama.V3_6_0_0
	c.ClientID = "sluice-compat-sarama"
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Idempotent = true
	c.Producer.Return.Successes = true
	c.Producer.Partitioner = sarama.NewHashPartitioner
	// Sarama's idempotent producer needs one request in flight per broker.
	c.Net.MaxOpenRequests = 1
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.Offsets.AutoCommit.Enable = false
	c.Consumer.Group.Session.Timeout = 6 * time.Second
	c.Consumer.Group.Heartbeat.Interval = 500 * time.Millisecond
	c.Admin.Timeout = waitFor
	return c
}

type collectHandler struct {
	mu   sync.Mutex
	got  []record
	want int
	done chan struct{}
	once sync.Once
}

func (h *collectHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *collectHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *collectHandler) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		h.mu.Lock()
		h.got = append(h.got, record{string(m.Key), string(m.Value), m.Partition, m.Offset})
		full := len(h.got) >= h.want
		h.mu.Unlock()
		s.MarkMessage(m, "")
		if full {
			s.Commit()
			h.once.Do(func() { close(h.done) })
		}
	}
	return nil
}

// sarama: ClusterAdmin topic creation and both config APIs, an idempotent acks=all
// SyncProducer with keyed records, a consumer group that commits, and ListOffsets.
func TestSaramaProduceGroupCommitOffsets(t *testing.T) {
	const topic, group, n, keys = "sarama-topic", "sarama-group", 300, 10
	cfg := saramaConfig()
	client, err := sarama.NewClient([]string{bootstrap(t)}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 1}, false); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	err = admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 1}, false)
	if !errors.Is(err, sarama.ErrTopicAlreadyExists) {
		t.Fatalf("creating an existing topic: %v", err)
	}
	// AlterConfig is the legacy AlterConfigs (API 33): the whole set is replaced.
	v1, v2 := "3600000", "2000000"
	if err := admin.AlterConfig(sarama.TopicResource, topic, map[string]*string{"retention.ms": &v1}, false); err != nil {
		t.Fatalf("alter config: %v", err)
	}
	if err := admin.AlterConfig(sarama.TopicResource, topic, map[string]*string{"max.message.bytes": &v2}, false); err != nil {
		t.Fatalf("alter config: %v", err)
	}
	entries, err := admin.DescribeConfig(sarama.ConfigResource{Type: sarama.TopicResource, Name: topic})
	if err != nil {
		t.Fatalf("describe config: %v", err)
	}
	overrides := map[string]string{}
	for _, e := range entries {
		if e.Source == sarama.SourceTopic {
			overrides[e.Name] = e.Value
		}
	}
	if len(overrides) != 1 || overrides["max.message.bytes"] != v2 {
		t.Fatalf("overrides after two AlterConfigs: %v (want only max.message.bytes)", overrides)
	}

	producer, err := sarama.NewSyncProducer([]string{bootstrap(t)}, cfg)
	if err != nil {
		t.Fatalf("idempotent producer: %v", err)
	}
	ks, vs := keyedValues(n, keys)
	for i := range ks {
		if _, _, err := producer.SendMessage(&sarama.ProducerMessage{Topic: topic,
			Key: sarama.StringEncoder(ks[i]), Value: sarama.StringEncoder(vs[i])}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	if err := producer.Close(); err != nil {
		t.Fatal(err)
	}

	cg, err := sarama.NewConsumerGroup([]string{bootstrap(t)}, group, cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &collectHandler{want: n, done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitFor)
	defer cancel()
	consumeErr := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, []string{topic}, h); err != nil {
				consumeErr <- err
				return
			}
		}
		consumeErr <- nil
	}()
	select {
	case <-h.done:
	case err := <-consumeErr:
		t.Fatalf("consume ended early: %v", err)
	case <-ctx.Done():
		t.Fatalf("consumed %d of %d records in time", len(h.got), n)
	}
	cancel()
	<-consumeErr
	if err := cg.Close(); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	checkPerKeyOrder(t, n, keys, h.got)
	h.mu.Unlock()

	offsets, err := admin.ListConsumerGroupOffsets(group, map[string][]int32{topic: {0, 1, 2}})
	if err != nil {
		t.Fatalf("list group offsets: %v", err)
	}
	var committed, end int64
	for p := int32(0); p < 3; p++ {
		committed += offsets.GetBlock(topic, p).Offset
		newest, err := client.GetOffset(topic, p, sarama.OffsetNewest)
		if err != nil {
			t.Fatalf("list offsets: %v", err)
		}
		end += newest
		if oldest, err := client.GetOffset(topic, p, sarama.OffsetOldest); err != nil || oldest != 0 {
			t.Fatalf("oldest offset of %d: %d %v", p, oldest, err)
		}
	}
	if committed != n || end != n {
		t.Fatalf("committed %d, end offsets %d; want %d each", committed, end, n)
	}
	groups, err := admin.ListConsumerGroups()
	if err != nil || groups[group] != "consumer" {
		t.Fatalf("list groups: %v %v", err, groups)
	}
	if err := admin.DeleteConsumerGroup(group); err != nil {
		t.Fatalf("delete group: %v", err)
	}
	if err := admin.DeleteRecords(topic, map[int32]int64{0: 1}); err != nil {
		t.Fatalf("delete records: %v", err)
	}
	if oldest, err := client.GetOffset(topic, 0, sarama.OffsetOldest); err != nil || oldest != 1 {
		t.Fatalf("oldest offset after delete records: %d %v", oldest, err)
	}
}
