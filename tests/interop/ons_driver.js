// Drives ali-ons, the pure-JavaScript RocketMQ 4.x client, for test_ali_ons_client.py.
//
//   node ons_driver.js produce NAMESRV TOPIC COUNT TAGS [FIRST]
//       Sends COUNT messages (body "ons-<i>-<tag>", keys ["okey-<i>", "oshared"]), cycling through the
//       comma-separated TAGS; i counts from FIRST (default 0). Each message also carries the user properties
//       a = i % 5 and i (through msg.properties, ali-ons's way). Prints one JSON line per send result.
//   node ons_driver.js consume NAMESRV TOPIC GROUP EXPRESSION COUNT SECONDS
//       Prints {"started": true} once the consumer is ready and {"message": ...} per delivery. The first
//       delivery is answered with ACTION_RETRY (the client sends it back to the broker); every other one is
//       acknowledged. After COUNT acknowledged messages it waits two more seconds, prints {"received": [...]}
//       (acknowledged deliveries) and exits 0; after SECONDS without them it prints the same and exits 2.
//
//   node ons_driver.js consume-sql NAMESRV TOPIC GROUP SELECTOR COUNT SECONDS
//       The same with a SQL92 subscription ({expressionType: "SQL92", subString: SELECTOR}); every delivery is
//       acknowledged.
//
// ali-ons is found through MQ_ALI_ONS (a directory holding node_modules/ali-ons).
"use strict";

const path = require("path");
const { Producer, Consumer, Message } = require(path.join(process.env.MQ_ALI_ONS, "node_modules", "ali-ons"));

const common = (ns) => ({
    nameSrv: ns,
    accessKeyId: process.env.MQ_ACCESS_KEY || "",  // set: every request is signed (ACL)
    accessKeySecret: process.env.MQ_SECRET_KEY || "",
    httpclient: require("http"),  // required by the constructor; unused once nameSrv is given
    pollNameServerInteval: 1000,  // ali-ons's spelling; learns the retry topic's route within a second
    rebalanceInterval: 1000,
    persistConsumerOffsetInterval: 1000,
});

function print(obj) {
    process.stdout.write(JSON.stringify(obj) + "\n");
}

async function produce(ns, topic, count, tags, first) {
    const producer = new Producer(Object.assign(common(ns), { producerGroup: "GID_ONS_PRODUCER" }));
    await producer.ready();
    const tagList = tags.split(",");
    for (let i = first; i < first + count; i++) {
        const tag = tagList[i % tagList.length];
        const msg = new Message(topic, tag, `ons-${i}-${tag}`);
        msg.keys = [`okey-${i}`, "oshared"];
        msg.properties.a = String(i % 5);
        msg.properties.i = String(i);
        const r = await producer.send(msg);
        print({ i: i, tag: tag, sendStatus: r.sendStatus, msgId: r.msgId,
                queueId: Number(r.messageQueue.queueId), queueOffset: r.queueOffset });
    }
    await producer.close();
}

async function consume(ns, topic, group, expression, count, seconds, sendBackFirst = true) {
    const consumer = new Consumer(Object.assign(common(ns), { consumerGroup: group }));
    const received = [];
    let first = sendBackFirst;
    let done = false;
    const finish = async (code) => {
        if (done) return;
        done = true;
        print({ received: received });
        await consumer.close();
        process.exit(code);
    };
    consumer.subscribe(topic, expression, async (msg) => {
        const seen = { topic: msg.topic, tags: msg.tags, keys: msg.keys, body: msg.body.toString(),
                       msgId: msg.msgId, reconsumeTimes: msg.reconsumeTimes, queueId: msg.queueId,
                       queueOffset: Number(msg.queueOffset), retry: first, a: msg.properties.a,
                       i: msg.properties.i };
        print({ message: seen });
        if (first) {
            first = false;
            return Consumer.ACTION_RETRY;
        }
        received.push(seen);
        if (received.length === count) setTimeout(() => finish(0), 2000);
    });
    // ali-ons reports, as errors, that %RETRY%<group> has no route before its first heartbeat creates it
    consumer.on("error", (err) => process.stderr.write(`consumer error: ${err.message}\n`));
    await consumer.ready();
    print({ started: true });
    setTimeout(() => finish(2), seconds * 1000);
}

const [mode, ns, topic, ...rest] = process.argv.slice(2);
let run;
if (mode === "produce") {
    run = produce(ns, topic, parseInt(rest[0], 10), rest[1], parseInt(rest[2] || "0", 10)).then(() => process.exit(0));
} else if (mode === "consume") {
    run = consume(ns, topic, rest[0], rest[1], parseInt(rest[2], 10), parseFloat(rest[3]));
} else if (mode === "consume-sql") {
    run = consume(ns, topic, rest[0], { expressionType: "SQL92", subString: rest[1] }, parseInt(rest[2], 10),
                  parseFloat(rest[3]), false);
} else {
    run = Promise.reject(new Error(`unknown mode ${mode}`));
}
run.catch((err) => {
    process.stderr.write(`${err && err.stack || err}\n`);
    process.exit(3);
});
