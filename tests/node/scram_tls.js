// KafkaJS over SASL_SSL with SCRAM-SHA-256 and SCRAM-SHA-512 (issue 29 point 7; KIP-84).
// tests/compat/test_scram_tls_clients.py runs
//
//   node scram_tls.js <sasl_ssl bootstrap> <CA certificate PEM file> <user> <password> <topic>
//
// where the user holds credentials for both mechanisms. With each mechanism a topic is
// created, records produced and consumed back; a wrong password is refused with the SASL
// authentication error. Prints `PASS scram-tls` when every check held; a failed check throws
// (exit code 1).
'use strict';

const assert = require('node:assert/strict');
const fs = require('node:fs');
const { Kafka, logLevel } = require('kafkajs');

const WAIT_MS = 60000;
const COUNT = 5;

function client(bootstrap, ca, mechanism, username, password) {
  return new Kafka({ clientId: 'sluice-compat-kafkajs-scram', brokers: [bootstrap],
                     ssl: { ca: [ca] }, sasl: { mechanism, username, password },
                     logLevel: logLevel.NOTHING, retry: { retries: 2 } });
}

async function roundTrip(kafka, topic) {
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: 1 }] });
  await admin.disconnect();

  const producer = kafka.producer();
  await producer.connect();
  const values = Array.from({ length: COUNT }, (_, i) => `${i}`);
  await producer.send({ topic, acks: -1, messages: values.map(value => ({ value })) });
  await producer.disconnect();

  const consumer = kafka.consumer({ groupId: `${topic}-reader` });
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const got = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`consumed only ${got}`)), WAIT_MS);
    consumer.run({ eachMessage: async ({ message }) => {
      got.push(message.value.toString());
      if (got.length === COUNT) { clearTimeout(timer); resolve(); }
    } }).catch(reject);
  });
  await consumer.disconnect();
  assert.deepEqual(got, values);
}

async function main() {
  const [bootstrap, caFile, user, password, topic] = process.argv.slice(2);
  const ca = fs.readFileSync(caFile, 'utf8');
  for (const mechanism of ['scram-sha-256', 'scram-sha-512']) {
    await roundTrip(client(bootstrap, ca, mechanism, user, password), `${topic}-${mechanism}`);

    const admin = client(bootstrap, ca, mechanism, user, 'wrong').admin();
    await assert.rejects(admin.connect(), err => {
      assert.equal(err.name, 'KafkaJSSASLAuthenticationError', `${err.name}: ${err.message}`);
      return true;
    });
  }
  console.log('PASS scram-tls');
}

main().catch(err => { console.error(err); process.exit(1); });
