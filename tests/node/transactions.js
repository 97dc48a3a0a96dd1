// KafkaJS transactions against a Kafka-API broker (issue 28 point 4; KIP-98, KIP-447).
// tests/compat/test_kafkajs.py runs one scenario per test:
//
//   node transactions.js commit-abort <bootstrap> <topic>
//   node transactions.js consume-transform-produce <bootstrap> <topic>
//
// Prints `PASS <scenario>` when every check held; a failed check throws (exit code 1).
'use strict';

const assert = require('node:assert/strict');
const { Kafka, logLevel } = require('kafkajs');

const PARTITIONS = 3;
const WAIT_MS = 60000;

function client(bootstrap) {
  return new Kafka({ clientId: 'sluice-compat-kafkajs', brokers: [bootstrap],
                     logLevel: logLevel.WARN, retry: { retries: 8 } });
}

async function createTopics(kafka, topics) {
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ waitForLeaders: true,
                             topics: topics.map(topic => ({ topic, numPartitions: PARTITIONS })) });
  await admin.disconnect();
}

async function transactionalProducer(kafka, transactionalId) {
  const producer = kafka.producer({ transactionalId, idempotent: true, maxInFlightRequests: 1,
                                    transactionTimeout: 60000 });
  await producer.connect();
  return producer;
}

// Values sent round robin over the partitions.
function messages(values) {
  return values.map((value, i) => ({ value, partition: i % PARTITIONS }));
}

// A plain record "end" on each partition, after every transaction of the scenario: a reader
// has read a partition to its end when it meets it.
async function sendEndMarkers(kafka, topic) {
  const producer = kafka.producer();
  await producer.connect();
  const ends = [];
  for (let p = 0; p < PARTITIONS; p++) ends.push({ value: 'end', partition: p });
  await producer.send({ topic, acks: -1, messages: ends });
  await producer.disconnect();
}

// The values of topic up to the end markers, as a consumer at the isolation level reads them
// (KafkaJS: readUncommitted false is read_committed), sorted.
async function readToEndMarkers(kafka, topic, readUncommitted) {
  const consumer = kafka.consumer({ groupId: `${topic}-reader-${readUncommitted}`,
                                    readUncommitted });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const got = [];
  const ended = new Set();
  let resolve;
  const done = new Promise(r => { resolve = r; });
  await consumer.run({ autoCommit: false, eachMessage: async ({ partition, message }) => {
    const value = message.value.toString();
    if (value === 'end') ended.add(partition);
    else if (!ended.has(partition)) got.push(value);
    if (ended.size === PARTITIONS) resolve();
  } });
  await withTimeout(done, `reading ${topic} to its end markers (read ${got})`);
  await consumer.disconnect();
  return got.sort();
}

async function withTimeout(promise, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out: ${what}`)), WAIT_MS);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

// Commit, abort, commit: a read_committed consumer sees only the committed values, a
// read_uncommitted one all of them.
async function commitAbort(kafka, topic) {
  await createTopics(kafka, [topic]);
  const producer = await transactionalProducer(kafka, `${topic}-txn`);
  let txn = await producer.transaction();
  await txn.send({ topic, messages: messages(['c1', 'c2', 'c3']) });
  await txn.commit();
  txn = await producer.transaction();
  await txn.send({ topic, messages: messages(['a1', 'a2']) });
  await txn.abort();
  txn = await producer.transaction();
  await txn.send({ topic, messages: messages(['c4']) });
  await txn.commit();
  await producer.disconnect();
  await sendEndMarkers(kafka, topic);
  assert.deepEqual(await readToEndMarkers(kafka, topic, false), ['c1', 'c2', 'c3', 'c4']);
  assert.deepEqual(await readToEndMarkers(kafka, topic, true),
                   ['a1', 'a2', 'c1', 'c2', 'c3', 'c4']);
}

// The exactly-once loop: a read_committed group consumer (auto commit off) and a
// transactional producer; per batch the outputs and the batch's next offset
// (sendOffsets, TxnOffsetCommit) in one transaction. Output: each input once; the group's
// committed offsets are the input's end offsets.
async function consumeTransformProduce(kafka, topic) {
  const input = `${topic}-in`;
  const output = `${topic}-out`;
  const groupId = `${topic}-group`;
  const n = 60;
  await createTopics(kafka, [input, output]);
  const plain = kafka.producer();
  await plain.connect();
  const inputs = [];
  for (let i = 0; i < n; i++) inputs.push(`${i}`);
  await plain.send({ topic: input, acks: -1, messages: messages(inputs) });
  await plain.disconnect();

  const producer = await transactionalProducer(kafka, `${topic}-txn`);
  const consumer = kafka.consumer({ groupId, readUncommitted: false });
  await consumer.connect();
  await consumer.subscribe({ topic: input, fromBeginning: true });
  let processed = 0;
  let resolve;
  const done = new Promise(r => { resolve = r; });
  await consumer.run({ autoCommit: false, eachBatch: async ({ batch }) => {
    if (batch.messages.length === 0) return;
    const txn = await producer.transaction();
    await txn.send({ topic: output, messages: batch.messages.map(m => (
      { value: `out-${m.value.toString()}`, partition: batch.partition })) });
    const next = (BigInt(batch.lastOffset()) + 1n).toString();
    await txn.sendOffsets({ consumerGroupId: groupId, topics: [
      { topic: input, partitions: [{ partition: batch.partition, offset: next }] }] });
    await txn.commit();
    processed += batch.messages.length;
    if (processed >= n) resolve();
  } });
  await withTimeout(done, `the loop (processed ${processed} of ${n})`);
  await consumer.disconnect();
  await producer.disconnect();

  await sendEndMarkers(kafka, output);
  const expected = inputs.map(v => `out-${v}`).sort();
  assert.deepEqual(await readToEndMarkers(kafka, output, false), expected);
  const admin = kafka.admin();
  await admin.connect();
  const [committed] = await admin.fetchOffsets({ groupId, topics: [input] });
  await admin.disconnect();
  const sum = committed.partitions.reduce((s, p) => s + Number(p.offset), 0);
  assert.equal(sum, n, `committed offsets ${JSON.stringify(committed.partitions)}`);
}

const scenarios = { 'commit-abort': commitAbort,
                    'consume-transform-produce': consumeTransformProduce };

async function main() {
  const [name, bootstrap, topic] = process.argv.slice(2);
  const scenario = scenarios[name];
  if (!scenario || !bootstrap || !topic) {
    throw new Error(`usage: transactions.js ${Object.keys(scenarios).join('|')} BOOTSTRAP TOPIC`);
  }
  await scenario(client(bootstrap), topic);
  console.log(`PASS ${name}`);
}

main().then(() => process.exit(0), err => {
  console.error(err && err.stack ? err.stack : err);
  process.exit(1);
});
