// Drives the official RocketMQ Node.js client (npm `apache-rocketmq`) for test_node_client.py.
//
//   node node_driver.js produce NAMESRV TOPIC GROUP COUNT TAGS
//       Sends COUNT messages one after another (body "node-<i>-<tag>", keys "nkey-<i> nshared"),
//       cycling through the comma-separated TAGS, after warm-up sends to TOPIC + "Warmup". Prints one JSON
//       line per send result.
//   node node_driver.js consume NAMESRV TOPIC GROUP EXPRESSION COUNT SECONDS
//       Prints {"started": true} once the push consumer runs, then {"message": ...} per delivery.
//       After COUNT messages it waits two more seconds for unexpected extras, prints
//       {"received": [...]} and exits 0; after SECONDS without COUNT it prints the same and exits 2.
//
// The module is found through MQ_NODE_CLIENT (a directory holding node_modules/apache-rocketmq).
"use strict";

const path = require("path");
const rocketmq = require(path.join(process.env.MQ_NODE_CLIENT, "node_modules", "apache-rocketmq"));

function print(obj) {
    process.stdout.write(JSON.stringify(obj) + "\n");
}

async function produce(namesrv, topic, group, count, tags) {
    const producer = new rocketmq.Producer(group, { nameServer: namesrv, logLevel: "info" });
    await producer.start();
    // The C++ client under the binding can fail the very first send to a broker when the new TCP connection is
    // not up yet (it retries within a millisecond), and the binding then reports an uninitialised result
    // instead of the error. Open the connection with warm-up sends to another topic first.
    for (let attempt = 0; ; attempt++) {
        const warm = await producer.send(`${topic}Warmup`, "warm-up", {});
        if (warm.statusStr === "OK") break;
        if (attempt === 4) throw new Error(`warm-up send failed: ${JSON.stringify(warm)}`);
        await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const tagList = tags.split(",");
    for (let i = 0; i < count; i++) {
        const tag = tagList[i % tagList.length];
        const result = await producer.send(topic, `node-${i}-${tag}`, { keys: `nkey-${i} nshared`, tags: tag });
        print({ i: i, tag: tag, status: result.status, statusStr: result.statusStr,
                msgId: result.msgId, offset: result.offset });
    }
    await producer.shutdown();
}

function consume(namesrv, topic, group, expression, count, seconds) {
    // One consume thread: the binding creates a uv_async handle per message from the client's consume
    // threads, which libuv does not allow from more than one thread at a time, and then loses messages.
    const consumer = new rocketmq.PushConsumer(group, { nameServer: namesrv, threadCount: 1, logLevel: "info" });
    consumer.subscribe(topic, expression);
    const received = [];
    let done = false;
    const finish = (code) => {
        if (done) return;
        done = true;
        print({ received: received });
        consumer.shutdown().then(() => process.exit(code), () => process.exit(code || 3));
    };
    consumer.on("message", (msg, ack) => {
        received.push(msg);
        print({ message: msg });
        ack.done();
        if (received.length === count) setTimeout(() => finish(0), 2000);
    });
    consumer.start().then(() => print({ started: true }), (err) => {
        process.stderr.write(`start failed: ${err}\n`);
        process.exit(4);
    });
    setTimeout(() => finish(2), seconds * 1000);
}

const [mode, namesrv, topic, group, ...rest] = process.argv.slice(2);
if (mode === "produce") {
    produce(namesrv, topic, group, parseInt(rest[0], 10), rest[1]).then(() => process.exit(0), (err) => {
        process.stderr.write(`send failed: ${err && err.stack || err}\n`);
        process.exit(3);
    });
} else if (mode === "consume") {
    consume(namesrv, topic, group, rest[0], parseInt(rest[1], 10), parseFloat(rest[2]));
} else {
    process.stderr.write(`unknown mode ${mode}\n`);
    process.exit(64);
}
