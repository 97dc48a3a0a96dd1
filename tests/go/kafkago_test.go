package compat

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"
)

// segmentio/kafka-go: topic creation through its Client, an acks=all Writer with keyed
// records (kafka-go has no idempotent producer), a group Reader that commits, ListOffsets
// and OffsetFetch.
func TestKafkaGoProduceGroupCommitOffsets(t *testing.T) {
	const topic, group, n, keys = "kafkago-topic", "kafkago-group", 300, 10
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitFor)
	defer cancel()
	addr := bootstrap(t)
	client := &kafka.Client{Addr: kafka.TCP(addr), Timeout: waitFor}
	created, err := client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{
		{Topic: topic, NumPartitions: 3, ReplicationFactor: 1}}})
	if err != nil || created.Errors[topic] != nil {
		t.Fatalf("create topic: %v %v", err, created)
	}
	again, err := client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{
		{Topic: topic, NumPartitions: 3, ReplicationFactor: 1}}})
	if err != nil || !errors.Is(again.Errors[topic], kafka.TopicAlreadyExists) {
		t.Fatalf("creating an existing topic: %v %v", err, again.Errors[topic])
	}

	w := &kafka.Writer{Addr: kafka.TCP(addr), Topic: topic, RequiredAcks: kafka.RequireAll,
		Balancer: kafka.Murmur2Balancer{}, BatchTimeout: 5 * time.Millisecond}
	ks, vs := keyedValues(n, keys)
	var msgs []kafka.Message
	for i := range ks {
		msgs = append(msgs, kafka.Message{Key: []byte(ks[i]), Value: []byte(vs[i])})
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatalf("write: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{addr}, GroupID: group, Topic: topic,
		StartOffset: kafka.FirstOffset, SessionTimeout: 6 * time.Second,
		HeartbeatInterval: 500 * time.Millisecond, MaxWait: 200 * time.Millisecond})
	var got []record
	for len(got) < n {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatalf("fetch after %d records: %v", len(got), err)
		}
		got = append(got, record{string(m.Key), string(m.Value), int32(m.Partition), m.Offset})
		if err := r.CommitMessages(ctx, m); err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	checkPerKeyOrder(t, n, keys, got)

	req := &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{
		topic: {kafka.LastOffsetOf(0), kafka.LastOffsetOf(1), kafka.LastOffsetOf(2)}}}
	listed, err := client.ListOffsets(ctx, req)
	if err != nil {
		t.Fatalf("list offsets: %v", err)
	}
	var end int64
	for _, p := range listed.Topics[topic] {
		if p.Error != nil {
			t.Fatalf("list offsets of %d: %v", p.Partition, p.Error)
		}
		end += p.LastOffset
	}
	fetched, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group,
		Topics: map[string][]int{topic: {0, 1, 2}}})
	if err != nil || fetched.Error != nil {
		t.Fatalf("offset fetch: %v %v", err, fetched)
	}
	var committed int64
	for _, p := range fetched.Topics[topic] {
		committed += p.CommittedOffset
	}
	if committed != n || end != n {
		t.Fatalf("committed %d, end offsets %d; want %d each", committed, end, n)
	}
	// The low-level Conn API that many kafka-go programs use for admin work.
	conn, err := kafka.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctrl, err := conn.Controller()
	if err != nil {
		t.Fatalf("controller: %v", err)
	}
	cc, err := kafka.Dial("tcp", net.JoinHostPort(ctrl.Host, strconv.Itoa(ctrl.Port)))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if err := cc.CreateTopics(kafka.TopicConfig{Topic: "kafkago-conn", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatalf("Conn.CreateTopics: %v", err)
	}
	parts, err := conn.ReadPartitions("kafkago-conn")
	if err != nil || len(parts) != 1 {
		t.Fatalf("read partitions: %v %v", err, parts)
	}
}
