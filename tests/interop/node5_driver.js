'use strict';
// The official RocketMQ 5.x Node.js client (npm rocketmq-client-nodejs) for the interop tests: one role per
// process, JSON lines on stdout. MQ_NODE5_CLIENT names the directory whose node_modules holds the client.
//
//   node node5_driver.js send ENDPOINT TOPIC N [--tag T] [--group G] [--delay-ms MS] [--prefix P]
//   node node5_driver.js receive ENDPOINT TOPIC GROUP N SECONDS [--tag T] [--sql EXPR] [--no-ack]
//   node node5_driver.js push ENDPOINT TOPIC GROUP N SECONDS [--fail-once]
//   node node5_driver.js transaction ENDPOINT TOPIC SECONDS
//     three transactional messages: "commit" committed, "rollback" rolled back, "unknown" left open and
//     committed when the broker checks back; prints {"checked": id} for each check, waits SECONDS for one
//
// receive and push print {"started": true} once running, one {"got": ...} per delivery, then {"received": [...]}
// (the deliveries they acknowledged) when N arrived or SECONDS passed.
const path = require('path');
const client = require(path.join(process.env.MQ_NODE5_CLIENT, 'node_modules', 'rocketmq-client-nodejs'));
const { Producer, SimpleConsumer, PushConsumer, ConsumeResult, FilterExpression } = client;

const [mode, endpoints, ...rest] = process.argv.slice(2);
const flags = {};
const args = [];
for (let i = 0; i < rest.length; i++) {
  if (rest[i].startsWith('--')) {
    const name = rest[i].slice(2);
    flags[name] = (i + 1 < rest.length && !rest[i + 1].startsWith('--')) ? rest[++i] : true;
  } else {
    args.push(rest[i]);
  }
}
const out = o => process.stdout.write(JSON.stringify(o) + '\n');
const logger = { info() {}, debug() {}, warn() {}, error(...a) { process.stderr.write(a.map(String).join(' ') + '\n'); } };

function view(m) {
  return {
    id: m.messageId, topic: m.topic, body: m.body.toString(), tag: m.tag || null, keys: m.keys,
    group: m.messageGroup || null, attempt: m.deliveryAttempt, props: Object.fromEntries(m.properties || []),
    born: m.bornTimestamp ? m.bornTimestamp.getTime() : 0,
    delivery_ts: m.deliveryTimestamp ? m.deliveryTimestamp.getTime() : 0, at: Date.now(),
  };
}

function filter() {
  if (flags.sql) return new FilterExpression(flags.sql, 2);  // FilterType.SQL
  return flags.tag ? new FilterExpression(flags.tag) : FilterExpression.SUB_ALL;
}

async function send() {
  const [topic, n] = args;
  const producer = new Producer({ endpoints, namespace: '', topics: [topic], logger });
  await producer.startup();
  const prefix = flags.prefix || 'node5';
  for (let i = 0; i < Number(n); i++) {
    const msg = {
      topic, body: Buffer.from(`${prefix}-${i}`), keys: [`${prefix}key-${i}`],
      properties: new Map([['color', `red-${i}`]]),
    };
    if (flags.tag) msg.tag = flags.tag;
    if (flags.group) msg.messageGroup = flags.group;
    if (flags['delay-ms']) msg.delay = Number(flags['delay-ms']);
    const receipt = await producer.send(msg);
    out({ i, id: receipt.messageId, at: Date.now() });
  }
  await producer.shutdown();
}

async function receive() {
  const [topic, group, n, seconds] = args;
  const consumer = new SimpleConsumer({
    endpoints, namespace: '', consumerGroup: group, subscriptions: new Map([[topic, filter()]]),
    awaitDuration: 5000, logger,  // RocketMQ 5's proxy refuses a long poll under 5 s (ILLEGAL_POLLING_TIME)
  });
  await consumer.startup();
  out({ started: true });
  const received = [];
  const end = Date.now() + Number(seconds) * 1000;
  while (received.length < Number(n) && Date.now() < end) {
    for (const m of await consumer.receive(16, 10000)) {
      const v = view(m);
      out({ got: v });
      if (!flags['no-ack']) await consumer.ack(m);
      received.push(v);
    }
  }
  out({ received });
  await consumer.shutdown();
}

async function push() {
  const [topic, group, n, seconds] = args;
  const received = [];
  const failed = new Set();
  let done;
  const finished = new Promise(resolve => { done = resolve; });
  const consumer = new PushConsumer({
    endpoints, namespace: '', consumerGroup: group, subscriptions: new Map([[topic, FilterExpression.SUB_ALL]]),
    logger,
    messageListener: {
      async consume(m) {
        const v = view(m);
        out({ got: v });
        if (flags['fail-once'] && !failed.has(v.id)) {
          failed.add(v.id);
          return ConsumeResult.FAILURE;
        }
        received.push(v);
        if (received.length >= Number(n)) done();
        return ConsumeResult.SUCCESS;
      },
    },
  });
  await consumer.startup();
  out({ started: true });
  await Promise.race([finished, new Promise(resolve => setTimeout(resolve, Number(seconds) * 1000))]);
  out({ received });
  await Promise.race([consumer.shutdown(), new Promise(resolve => setTimeout(resolve, 3000))]);
}

async function transaction() {
  const [topic, seconds] = args;
  let checkedOnce;
  const checked = new Promise(resolve => { checkedOnce = resolve; });
  const producer = new Producer({
    endpoints, namespace: '', topics: [topic], logger,
    checker: {
      async check(m) {
        out({ checked: m.messageId, body: m.body.toString() });
        checkedOnce();
        return 1;  // TransactionResolution.COMMIT
      },
    },
  });
  await producer.startup();
  for (const kind of ['commit', 'rollback', 'unknown']) {
    const tx = producer.beginTransaction();
    const receipt = await producer.send({ topic, body: Buffer.from(kind), keys: [kind] }, tx);
    out({ kind, id: receipt.messageId });
    if (kind === 'commit') await tx.commit();
    if (kind === 'rollback') await tx.rollback();
  }
  await Promise.race([checked, new Promise(resolve => setTimeout(resolve, Number(seconds) * 1000))]);
  await producer.shutdown();
}

const roles = { send, receive, push, transaction };
if (!roles[mode]) {
  process.stderr.write(`unknown role ${mode}\n`);
  process.exit(2);
}
roles[mode]().then(() => process.exit(0), e => {
  process.stderr.write(String((e && e.stack) || e) + '\n');
  process.exit(1);
});
